package redisscript_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// echo returns the number of keys, the first key's length and its ARGV as
// integers.
const echo = "local r = {#KEYS, #KEYS[1]}\nfor _, a in ipairs(ARGV) do r[#r+1] = tonumber(a) end\nreturn r\n"

// sent is a go-redis hook that records the name of every script command sent
// (EVAL or EVALSHA), one by one or in a pipeline.
type sent struct {
	mu    sync.Mutex
	names []string
}

func (h *sent) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

func (h *sent) add(cmd redis.Cmder) {
	if !strings.HasPrefix(cmd.Name(), "eval") { // HELLO of a new connection, ...
		return
	}
	h.mu.Lock()
	h.names = append(h.names, cmd.Name())
	h.mu.Unlock()
}

// take returns the names recorded since the last take.
func (h *sent) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.names
	h.names = nil
	return n
}

// args returns a command of key and argv, with room for the head.
func args(key string, argv ...any) []any {
	return append([]any{nil, nil, 1, key}, argv...)
}

func TestNewCarriesDigestAndSource(t *testing.T) {
	s := redisscript.New(echo)
	if s.Source() != echo {
		t.Errorf("Source() = %q, want %q", s.Source(), echo)
	}
	if want := redis.NewScript(echo).Hash(); s.Hash() != want {
		t.Errorf("Hash() = %s, want %s", s.Hash(), want)
	}
	a := args("k", 7)
	cmd := s.Cmd(context.Background(), a)
	if got := cmd.Args(); got[0] != "evalsha" || got[1] != s.Hash() || got[3] != "k" {
		t.Errorf("Cmd args = %v, want evalsha, the digest, 1, k, 7", got)
	}
}

// TestEvalIntsHitsTheCache: with the script cached, a call is one EVALSHA
// with the caller's keys and arguments, and its reply is read as integers.
func TestEvalIntsHitsTheCache(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	s := redisscript.New(echo + "-- " + t.Name())
	if err := s.Load(ctx, db.Client).Err(); err != nil {
		t.Fatal(err)
	}
	var h sent
	db.Client.AddHook(&h)
	key := db.Prefix + "{k}"
	for _, argv := range [][]any{{}, {int64(5)}, {"-3", 0, int64(1) << 40}} {
		v, err := s.EvalInts(ctx, db.Client, args(key, argv...))
		want := []int64{1, int64(len(key))}
		for _, a := range argv {
			switch a := a.(type) {
			case int64:
				want = append(want, a)
			case int:
				want = append(want, int64(a))
			case string:
				want = append(want, -3)
			}
		}
		if err != nil || !slices.Equal(v, want) {
			t.Errorf("EvalInts(%v) = %v, %v; want %v", argv, v, err, want)
		}
		if got := h.take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Errorf("EvalInts(%v) sent %v, want one evalsha", argv, got)
		}
	}
}

// TestNoScriptFallsBackToEvalAndCaches: after SCRIPT FLUSH a call is answered
// NOSCRIPT and sent again as EVAL with the same keys and arguments, which
// caches the script: the next call is one EVALSHA again. A pipelined command
// answered NOSCRIPT is sent again as EVAL alone (Ints), not as EVALSHA first.
func TestNoScriptFallsBackToEvalAndCaches(t *testing.T) {
	srv := redistest.Start(t) // SCRIPT FLUSH would disturb tests sharing REDIS_ADDR
	c := srv.Client()
	ctx := context.Background()
	s := redisscript.New(echo)
	var h sent
	c.AddHook(&h)
	want := []int64{1, 3, 42}
	if v, err := s.EvalInts(ctx, c, args("{k}", 42)); err != nil || !slices.Equal(v, want) {
		t.Fatalf("first call: %v, %v; want %v", v, err, want)
	}
	h.take()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.take()
	v, err := s.EvalInts(ctx, c, args("{k}", 42))
	if err != nil || !slices.Equal(v, want) {
		t.Fatalf("after SCRIPT FLUSH: %v, %v; want %v", v, err, want)
	}
	if got := h.take(); !slices.Equal(got, []string{"evalsha", "eval"}) {
		t.Errorf("after SCRIPT FLUSH sent %v, want evalsha then eval", got)
	}
	if ok, err := c.ScriptExists(ctx, s.Hash()).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after the EVAL = %v, %v; want cached", ok, err)
	}
	h.take()
	if v, err := s.EvalInts(ctx, c, args("{k}", 42)); err != nil || !slices.Equal(v, want) {
		t.Errorf("next call: %v, %v", v, err)
	}
	if got := h.take(); !slices.Equal(got, []string{"evalsha"}) {
		t.Errorf("next call sent %v, want one evalsha", got)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.take()
	pipe := c.Pipeline()
	cmds := []redis.Cmder{s.Cmd(ctx, args("{a}", 1)), s.Cmd(ctx, args("{bb}", 2))}
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		want := []int64{1, int64(3 + i), int64(1 + i)}
		if v, err := s.Ints(ctx, c, cmd); err != nil || !slices.Equal(v, want) {
			t.Errorf("pipelined command %d: %v, %v; want %v", i, v, err, want)
		}
	}
	if got := h.take(); !slices.Equal(got, []string{"evalsha", "evalsha", "eval", "eval"}) {
		t.Errorf("pipeline after SCRIPT FLUSH sent %v, want 2 evalsha then 2 eval", got)
	}
}

// TestReplyNotIntegersIsAnError: a reply that is not an array of integers is
// an error that says so, and is not retried; an error raised by the script is
// Redis's error, as it is (the breaker classifies it); the connection serves
// the next call.
func TestReplyNotIntegersIsAnError(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	var h sent
	db.Client.AddHook(&h)
	for _, tc := range []struct{ src, want string }{
		{"return 'OK'", "can't parse array"},
		{"return 7", "can't parse array"},
		{"return {1, {2}, 3}", "can't parse int"},
		{"return {1, 'x', 3}", `parsing "x"`},
	} {
		s := redisscript.New(tc.src + " -- " + t.Name())
		if err := s.Load(ctx, db.Client).Err(); err != nil {
			t.Fatal(err)
		}
		h.take()
		_, err := s.EvalInts(ctx, db.Client, args(db.Prefix+"{k}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.src, err, tc.want)
		}
		if got := h.take(); len(got) != 1 {
			t.Errorf("%s: sent %v, want one command", tc.src, got)
		}
	}
	s := redisscript.New("return redis.error_reply('BUSY stop') -- " + t.Name())
	_, err := s.EvalInts(ctx, db.Client, args(db.Prefix+"{k}"))
	if rerr, ok := errors.AsType[redis.Error](err); !ok || rerr.Error() != "BUSY stop" {
		t.Errorf("script error: err = %v (%T), want the redis.Error BUSY stop", err, err)
	}
	ok := redisscript.New(echo)
	if v, err := ok.EvalInts(ctx, db.Client, args("{k}", 1)); err != nil || !slices.Equal(v, []int64{1, 3, 1}) {
		t.Errorf("call after the bad replies: %v, %v", v, err)
	}
}

// TestDeadlineIsAStoreTimeout: against a frozen Redis a call bounded by the
// breaker's CallTimeout returns at that deadline without an EVAL retry, and
// the breaker reports it as a store timeout (breaker.ErrTimeout), not as the
// caller's context; the caller's own cancellation is ctx.Err().
func TestDeadlineIsAStoreTimeout(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr) // frozen below
	c := redis.NewClient(redistest.Options(proxy.Addr()))
	defer c.Close()
	s := redisscript.New(echo)
	var h sent
	c.AddHook(&h)
	ctx := context.Background()
	if _, err := s.EvalInts(ctx, c, args("{k}")); err != nil { // connected, cached
		t.Fatal(err)
	}
	proxy.Freeze()
	defer proxy.Heal()
	h.take()
	b := breaker.New("t", breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 1000})
	call := func(ctx context.Context) ([]int64, error) { return s.EvalInts(ctx, c, args("{k}")) }
	withValue := context.WithValue(ctx, ctxKey{}, "span")
	for _, parent := range []context.Context{ctx, withValue} {
		start := time.Now()
		_, _, err := breaker.Do(parent, b, breaker.FailClosed, call, nil)
		if el := time.Since(start); el > time.Second {
			t.Errorf("call returned after %v, want ~100ms", el)
		}
		if !errors.Is(err, breaker.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out call: err = %v, want breaker.ErrTimeout and not context.DeadlineExceeded", err)
		}
		if got := h.take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Errorf("a timed-out call sent %v, want one evalsha", got)
		}
	}
	// The caller's cancellation is not the call's timeout.
	cancelled, cancel := context.WithCancel(withValue)
	time.AfterFunc(20*time.Millisecond, cancel)
	_, _, err := breaker.Do(cancelled, b, breaker.FailClosed, call, nil)
	if err != context.Canceled {
		t.Errorf("cancelled caller: err = %v, want context.Canceled", err)
	}
	if st := b.Stats(); st.StoreFailures != 2 {
		t.Errorf("StoreFailures = %d, want 2 (the cancelled call is not counted)", st.StoreFailures)
	}
}

type ctxKey struct{}

// TestClusterRoutesByFirstKey: on a Cluster, EVALSHA and its EVAL fallback go
// to the node serving the first key, so no node ever answers MOVED.
func TestClusterRoutesByFirstKey(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	s := redisscript.New("redis.call('SET', KEYS[1], ARGV[1])\nreturn {tonumber(ARGV[1])}")
	for round := range 2 { // not cached on any node, then cached on all
		for i, tag := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			v, err := s.EvalInts(ctx, cl.Client, args("{"+tag+"}", i))
			if err != nil || !slices.Equal(v, []int64{int64(i)}) {
				t.Fatalf("round %d, {%s}: %v, %v", round, tag, v, err)
			}
		}
	}
	for _, n := range cl.Nodes {
		info, err := n.Client().Info(ctx, "errorstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "MOVED") {
			t.Errorf("node %s answered MOVED:\n%s", n.Addr, info)
		}
	}
}

// packedEcho is echo with its reply packed as little-endian 64-bit integers.
const packedEcho = "local r = {#KEYS, #KEYS[1]}\nfor _, a in ipairs(ARGV) do r[#r+1] = tonumber(a) end\n" +
	"return struct.pack('<' .. string.rep('i8', #r), unpack(r))\n"

// TestPackedReply: a packed script's reply (a string of little-endian int64s)
// reads as the same []int64 as an array, negative and large values included,
// alone and pipelined, after NOSCRIPT too; a string of another length is an
// error.
func TestPackedReply(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	s := redisscript.NewPacked(packedEcho + " -- " + t.Name())
	want := []int64{1, 3, -2, 0, 1<<53 - 1, -(1 << 40)}
	for range 2 { // NOSCRIPT then EVAL, then EVALSHA
		if v, err := s.EvalInts(ctx, db.Client, args("{k}", -2, 0, 1<<53-1, -(1<<40))); err != nil || !slices.Equal(v, want) {
			t.Errorf("EvalInts = %v, %v; want %v", v, err, want)
		}
	}
	pipe := db.Client.Pipeline()
	cmds := []redis.Cmder{s.Cmd(ctx, args("{a}", 7)), s.Cmd(ctx, args("{bb}", 8))}
	for _, cmd := range cmds {
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		if v, err := s.Ints(ctx, db.Client, cmd); err != nil || !slices.Equal(v, []int64{1, int64(3 + i), int64(7 + i)}) {
			t.Errorf("pipelined command %d: %v, %v", i, v, err)
		}
	}
	bad := redisscript.NewPacked("return 'abc' -- " + t.Name())
	if _, err := bad.EvalInts(ctx, db.Client, args("{k}")); err == nil || !strings.Contains(err.Error(), "unexpected reply of 3 bytes") {
		t.Errorf("3-byte reply: err = %v", err)
	}
}
