package floodgatetest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/redis/go-redis/v9"
)

// echoServer starts a line server (serve, in example_test.go) that answers
// every line with prefix + the line, and stops it (and waits for its
// goroutines) when the test ends.
func echoServer(t testing.TB, prefix string) string {
	addr, stop := serve(prefix)
	t.Cleanup(stop)
	return addr
}

// lineConn is a client connection that sends and reads lines.
type lineConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialLines(t testing.TB, addr string) *lineConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineConn{t: t, c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and returns the answer, or the error, within timeout.
func (l *lineConn) roundTrip(line string, timeout time.Duration) (string, error) {
	l.c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(l.c, line+"\n"); err != nil {
		return "", err
	}
	got, err := l.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// read returns the next line, or the error, within timeout.
func (l *lineConn) read(timeout time.Duration) (string, error) {
	l.c.SetReadDeadline(time.Now().Add(timeout))
	got, err := l.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// refused returns nil if a connection to addr fails, at the dial or at its
// first round trip, other than by a timeout, and an error saying what
// happened otherwise.
func refused(t testing.TB, addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		if isTimeout(err) {
			return fmt.Errorf("dial: %v; want it refused or reset", err)
		}
		return nil
	}
	defer c.Close()
	l := &lineConn{t: t, c: c, r: bufio.NewReader(c)}
	got, err := l.roundTrip("y", 5*time.Second)
	if err == nil || isTimeout(err) {
		return fmt.Errorf("roundTrip = %q, %v; want the connection refused or reset", got, err)
	}
	return nil
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// Quiet is how long a test waits to see that nothing arrives: real time, as
// the proxy forwards real sockets.
const quiet = 150 * time.Millisecond

func TestProxyForwards(t *testing.T) {
	p := floodgatetest.StartProxy(t, echoServer(t, "echo: "))
	c := dialLines(t, p.Addr())
	for i := range 3 {
		got, err := c.roundTrip(fmt.Sprint("hello ", i), 5*time.Second)
		if want := fmt.Sprint("echo: hello ", i); err != nil || got != want {
			t.Fatalf("roundTrip = %q, %v; want %q", got, err, want)
		}
	}
}

func TestProxyFreezeKeepsTheStream(t *testing.T) {
	p := floodgatetest.StartProxy(t, echoServer(t, ""))
	c := dialLines(t, p.Addr())
	if got, err := c.roundTrip("before", 5*time.Second); err != nil || got != "before" {
		t.Fatalf("roundTrip before the freeze = %q, %v", got, err)
	}
	p.Freeze()
	c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for i := range 100 {
		fmt.Fprintf(c.c, "line %d\n", i)
	}
	if got, err := c.read(quiet); !isTimeout(err) {
		t.Fatalf("read while frozen = %q, %v; want a timeout", got, err)
	}
	// A new connection is accepted but gets no answer.
	c2 := dialLines(t, p.Addr())
	if got, err := c2.roundTrip("new", quiet); !isTimeout(err) {
		t.Fatalf("roundTrip on a connection made while frozen = %q, %v; want a timeout", got, err)
	}
	p.Heal()
	for i := range 100 {
		got, err := c.read(5 * time.Second)
		if want := fmt.Sprint("line ", i); err != nil || got != want {
			t.Fatalf("after Heal, line %d = %q, %v; want %q", i, got, err, want)
		}
	}
	if got, err := c2.read(5 * time.Second); err != nil || got != "new" {
		t.Fatalf("after Heal, the new connection read %q, %v; want %q", got, err, "new")
	}
}

func TestProxyDelay(t *testing.T) {
	p := floodgatetest.StartProxy(t, echoServer(t, ""))
	c := dialLines(t, p.Addr())
	const d = 100 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if got, err := c.roundTrip("slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("roundTrip = %q, %v", got, err)
	}
	if took := time.Since(start); took < 2*d {
		t.Errorf("a delayed round trip took %v, want at least 2×%v", took, d)
	}
	p.Delay(0)
	start = time.Now()
	if got, err := c.roundTrip("fast", 5*time.Second); err != nil || got != "fast" {
		t.Fatalf("roundTrip = %q, %v", got, err)
	}
	if took := time.Since(start); took >= d {
		t.Errorf("after Delay(0) a round trip took %v, want less than %v", took, d)
	}
}

func TestProxyDrop(t *testing.T) {
	p := floodgatetest.StartProxy(t, echoServer(t, ""))
	c := dialLines(t, p.Addr())
	if _, err := c.roundTrip("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Drop()
	if got, err := c.read(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("read on a dropped connection = %q, %v; want it closed", got, err)
	}
	// New connections fail at once.
	for range 3 {
		if err := refused(t, p.Addr()); err != nil {
			t.Fatalf("a connection made while dropped: %v", err)
		}
	}
	p.Heal()
	c3 := dialLines(t, p.Addr())
	if got, err := c3.roundTrip("z", 5*time.Second); err != nil || got != "z" {
		t.Fatalf("after Heal, roundTrip = %q, %v", got, err)
	}
}

func TestProxyReset(t *testing.T) {
	p := floodgatetest.StartProxy(t, echoServer(t, ""))
	c := dialLines(t, p.Addr())
	if _, err := c.roundTrip("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if got, err := c.read(5 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a reset connection = %q, %v; want ECONNRESET", got, err)
	}
	c2 := dialLines(t, p.Addr())
	if got, err := c2.roundTrip("y", 5*time.Second); err != nil || got != "y" {
		t.Fatalf("after Reset, a new connection's roundTrip = %q, %v", got, err)
	}
}

func TestProxySetTarget(t *testing.T) {
	a, b := echoServer(t, "a: "), echoServer(t, "b: ")
	p := floodgatetest.StartProxy(t, a)
	old := dialLines(t, p.Addr())
	if got, err := old.roundTrip("1", 5*time.Second); err != nil || got != "a: 1" {
		t.Fatalf("roundTrip = %q, %v", got, err)
	}
	p.SetTarget(b)
	if got := p.Target(); got != b {
		t.Errorf("Target() = %q, want %q", got, b)
	}
	if got, err := old.roundTrip("2", 5*time.Second); err != nil || got != "a: 2" {
		t.Fatalf("an open connection after SetTarget: roundTrip = %q, %v; want it still on a", got, err)
	}
	c := dialLines(t, p.Addr())
	if got, err := c.roundTrip("3", 5*time.Second); err != nil || got != "b: 3" {
		t.Fatalf("a new connection after SetTarget: roundTrip = %q, %v; want b", got, err)
	}
}

func TestProxyTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	p := floodgatetest.StartProxy(t, down)
	if err := refused(t, p.Addr()); err != nil {
		t.Fatalf("with the target down: %v", err)
	}
}

// TestProxyCloseLeavesNoGoroutine: Close ends every connection, even frozen
// or delayed ones, and after it none of the proxy's goroutines is left.
func TestProxyCloseLeavesNoGoroutine(t *testing.T) {
	echo := echoServer(t, "")
	before := runtime.NumGoroutine()
	p, err := floodgatetest.NewProxy(echo)
	if err != nil {
		t.Fatal(err)
	}
	var conns []*lineConn
	for range 4 {
		c := dialLines(t, p.Addr())
		if _, err := c.roundTrip("x", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	p.Delay(time.Hour)
	fmt.Fprintln(conns[0].c, "delayed")
	p.Delay(0)
	p.Freeze()
	fmt.Fprintln(conns[1].c, "frozen")
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	p.Close() // a second Close does nothing
	for i, c := range conns {
		if got, err := c.read(5 * time.Second); err == nil || isTimeout(err) {
			t.Errorf("connection %d after Close: read %q, %v; want it closed", i, got, err)
		}
	}
	floodgatetest.CheckGoroutines(t, before)
}

// TestProxyRedisPipelineAcrossFreeze: a pipeline of commands sent to a real
// Redis while the proxy is frozen completes, in order, after Heal.
func TestProxyRedisPipelineAcrossFreeze(t *testing.T) {
	addr := floodgatetest.RedisAddr(t)
	p := floodgatetest.StartProxy(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), DisableIdentity: true, ReadTimeout: -1, PoolSize: 1})
	defer rdb.Close()
	ctx := t.Context()
	if err := rdb.Ping(ctx).Err(); err != nil {
		floodgatetest.Missing(t, "redis at "+addr+" unreachable: "+err.Error())
	}
	key := fmt.Sprintf("ft:proxy-pipeline:%d", time.Now().UnixNano())
	defer redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true}).Del(context.Background(), key)

	p.Freeze()
	const n = 2000
	var cmds []*redis.IntCmd
	var execErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, execErr = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for range n {
				cmds = append(cmds, pipe.Incr(ctx, key))
			}
			return nil
		})
	}()
	select {
	case <-done:
		t.Fatalf("the pipeline completed while the proxy was frozen (err %v)", execErr)
	case <-time.After(quiet):
	}
	p.Heal()
	<-done
	if execErr != nil {
		t.Fatalf("pipeline after Heal: %v", execErr)
	}
	for i, c := range cmds {
		if got, want := c.Val(), int64(i+1); got != want {
			t.Fatalf("INCR %d answered %d, want %d (bytes lost or reordered)", i, got, want)
		}
	}

	// A longer pipeline while the proxy freezes and heals, mid-stream, again
	// and again.
	const m = 50000
	cmds = cmds[:0]
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, execErr = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for range m {
				cmds = append(cmds, pipe.Incr(ctx, key))
			}
			return nil
		})
	}()
	freezes := 0
	for running := true; running; {
		p.Freeze()
		freezes++
		time.Sleep(time.Millisecond) // the fault's length: not synchronisation
		p.Heal()
		select {
		case <-done:
			running = false
		case <-time.After(time.Millisecond):
		}
	}
	if execErr != nil {
		t.Fatalf("pipeline across %d freezes: %v", freezes, execErr)
	}
	for i, c := range cmds {
		if got, want := c.Val(), int64(n+i+1); got != want {
			t.Fatalf("across %d freezes, INCR %d answered %d, want %d (bytes lost or reordered)", freezes, i, got, want)
		}
	}
	t.Logf("%d INCRs pipelined across %d freezes", m, freezes)
}
