package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// replyError is a Redis error reply, as go-redis returns them (its type is
// internal; anything with a RedisError method is a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestIsStoreFailure(t *testing.T) {
	opErr := func(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"EOF", io.EOF, true},
		{"wrapped EOF", fmt.Errorf("redis: read: %w", io.EOF), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"connection refused", errRefused, true},
		{"connection reset", opErr("read", os.NewSyscallError("read", syscall.ECONNRESET)), true},
		{"broken pipe", opErr("write", os.NewSyscallError("write", syscall.EPIPE)), true},
		{"host unreachable", opErr("dial", os.NewSyscallError("connect", syscall.EHOSTUNREACH)), true},
		{"dial timeout", opErr("dial", &timeoutWrapsDeadline{}), true},
		{"dial cancelled by the caller", opErr("dial", context.Canceled), false},
		{"read deadline", opErr("read", os.ErrDeadlineExceeded), true},
		{"net.Error timeout", timeoutError{}, true},
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"wrapped pool timeout", fmt.Errorf("distsem: acquire: %w", redis.ErrPoolTimeout), true},
		{"joined pool timeout", errors.Join(errDenied, redis.ErrPoolTimeout), true},
		{"pool timeout's text in another message", errors.New("not redis: connection pool timeout"), false},
		{"LOADING", replyError("LOADING Redis is loading the dataset in memory"), true},
		{"READONLY", replyError("READONLY You can't write against a read only replica."), true},
		{"MASTERDOWN", replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"BUSY", replyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), true},
		{"OOM", replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"CLUSTERDOWN", replyError("CLUSTERDOWN The cluster is down"), true},
		{"TRYAGAIN", replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"KVRocks ERR prefix", replyError("ERR LOADING kvrocks is restoring the db from backup"), true},
		{"max clients", replyError("ERR max number of clients reached"), true},
		{"wrapped reply", fmt.Errorf("distsem: acquire: %w", replyError("READONLY You can't write")), true},
		{"redis.Nil", redis.Nil, false},
		{"BUSYGROUP is an answer", replyError("BUSYGROUP Consumer Group name already exists"), false},
		{"BUSYKEY is an answer", replyError("BUSYKEY Target key name already exists."), false},
		{"NOSCRIPT", redis.ErrNoScript, false},
		{"WRONGTYPE", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"script error", replyError("ERR user_script:1: attempt to compare nil with number"), false},
		{"denied", errDenied, false},
		{"client closed", redis.ErrClosed, false},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded (whose?)", context.DeadlineExceeded, false},
		{"wrapped DeadlineExceeded", fmt.Errorf("call: %w", context.DeadlineExceeded), false},
	} {
		if got := breaker.IsStoreFailure(tc.err); got != tc.want {
			t.Errorf("%s: IsStoreFailure(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// timeoutWrapsDeadline is like net's errTimeout for dial timeouts: a timeout
// that also matches context.DeadlineExceeded.
type timeoutWrapsDeadline struct{}

func (*timeoutWrapsDeadline) Error() string        { return "i/o timeout" }
func (*timeoutWrapsDeadline) Timeout() bool        { return true }
func (*timeoutWrapsDeadline) Temporary() bool      { return true }
func (*timeoutWrapsDeadline) Is(target error) bool { return target == context.DeadlineExceeded }

// TestIsStoreFailureRealRedisErrors classifies errors produced by a real
// go-redis client against a real redis-server in each failure mode.
func TestIsStoreFailureRealRedisErrors(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := t.Context()
	check := func(what string, err error, want bool) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if got := breaker.IsStoreFailure(err); got != want {
			t.Errorf("%s: IsStoreFailure(%T %v) = %v, want %v", what, err, err, got, want)
		}
	}

	// Answers from a healthy server.
	check("GET of a missing key", rdb.Get(ctx, "missing").Err(), false)
	rdb.XGroupCreateMkStream(ctx, "s", "g", "0")
	check("XGROUP CREATE twice", rdb.XGroupCreateMkStream(ctx, "s", "g", "0").Err(), false)
	rdb.Set(ctx, "str", "v", 0)
	check("WRONGTYPE", rdb.LPush(ctx, "str", "x").Err(), false)
	check("unknown command", rdb.Do(ctx, "NOSUCHCOMMAND").Err(), false)

	// OOM.
	must(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	check("SET over maxmemory", rdb.Set(ctx, "k", "v", 0).Err(), true)
	must(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())

	// A replica whose master is unreachable: READONLY, then MASTERDOWN.
	dead := closedPort(t)
	must(t, rdb.Do(ctx, "REPLICAOF", "127.0.0.1", dead).Err())
	check("write on a replica", rdb.Set(ctx, "k", "v", 0).Err(), true)
	must(t, rdb.ConfigSet(ctx, "replica-serve-stale-data", "no").Err())
	check("read on a replica whose master is down", rdb.Get(ctx, "k").Err(), true)
	must(t, rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err())

	// BUSY: a script runs past busy-reply-threshold.
	must(t, rdb.ConfigSet(ctx, "busy-reply-threshold", "50").Err())
	scriptDone := make(chan error, 1)
	go func() { scriptDone <- rdb.Eval(context.Background(), "while true do end", nil).Err() }()
	other := srv.Client()
	var busyErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) { // polling a real server
		if busyErr = other.Ping(ctx).Err(); busyErr != nil {
			break
		}
	}
	check("PING during a long script", busyErr, true)
	must(t, other.Do(ctx, "SCRIPT", "KILL").Err())
	check("the killed script's own error", <-scriptDone, false)

	// Paused: a read deadline from the client's ReadTimeout.
	opts := redistest.Options(srv.Addr)
	opts.ReadTimeout = 100 * time.Millisecond
	opts.MaxRetries = -1
	short := redis.NewClient(opts)
	defer short.Close()
	must(t, short.Ping(ctx).Err())
	srv.Pause()
	check("PING on a paused server past ReadTimeout", short.Ping(ctx).Err(), true)
	// The caller's own deadline: an error IsStoreFailure alone can't
	// attribute (it may say true), so Do must not count it.
	b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, Logger: discard})
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, src, err := breaker.Do(cctx, b, breaker.FailClosed, func(ctx context.Context) (string, error) { return rdb.Ping(ctx).Result() }, nil)
	cancel()
	if err == nil || src != breaker.FromStore || b.State() != breaker.StateClosed {
		t.Errorf("Do past the caller's own 50ms deadline on a paused server = %v, %v, state %v; want the error as is, FromStore, closed", src, err, b.State())
	}
	// Do's own CallTimeout on the paused server counts.
	b = breaker.New("t", breaker.Config{ConsecutiveFailures: 1, CallTimeout: 50 * time.Millisecond, Logger: discard})
	_, src, err = breaker.Do(ctx, b, breaker.FailClosed, func(ctx context.Context) (string, error) { return rdb.Ping(ctx).Result() }, nil)
	if !errors.Is(err, breaker.ErrUnavailable) || src != breaker.FromFailClosed || b.State() != breaker.StateOpen {
		t.Errorf("Do past its CallTimeout on a paused server = %v, %v, state %v; want FromFailClosed, ErrUnavailable, open", src, err, b.State())
	}
	srv.Resume()

	// Killed: connection refused (or EOF/reset on pooled connections).
	srv.Kill()
	check("PING on a killed server (pooled connection)", short.Ping(ctx).Err(), true)
	check("PING on a killed server (new dial)", short.Ping(ctx).Err(), true)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// closedPort returns a loopback port with nothing listening.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
