package breaker_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// These tests run against a private redis-server child with real time, so
// their bounds are generous: they check orders of magnitude (a call while
// open costs microseconds, not a network timeout), not exact timings.

// TestRedisPausedMidLoad: under load from several goroutines, Redis freezes
// (the floodgatetest.Proxy between the client and Redis stops forwarding).
// Every call returns within CallTimeout plus a margin, the breaker opens after
// ConsecutiveFailures, calls while open never reach the network, a probe while
// still frozen reopens it, and once the proxy heals the probe closes it.
func TestRedisPausedMidLoad(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	rdb := redis.NewClient(redistest.Options(proxy.Addr()))
	defer rdb.Close()
	const (
		// 500ms, not 100ms: calls to the healthy server timed out on a
		// loaded machine before the freeze. The freeze lasts at least
		// CallTimeout + OpenDuration + CallTimeout (2s), so a call that
		// waited through it still fails the CallTimeout + margin bound.
		callTimeout  = 500 * time.Millisecond
		openDuration = time.Second
		margin       = 500 * time.Millisecond // scheduling on a loaded machine, -race
		workers      = 8
	)
	b := breaker.New(srv.Addr, breaker.Config{
		ConsecutiveFailures: 5, CallTimeout: callTimeout, OpenDuration: openDuration, Jitter: -1,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)),
	})
	ctx := t.Context()
	key := "load"
	incr := func(ctx context.Context) (int64, error) { return rdb.Incr(ctx, key).Result() }

	var (
		storeCalls atomic.Int64 // calls that reached the network
		slowest    atomic.Int64 // longest Do, ns
		degraded   atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	counted := func(ctx context.Context) (int64, error) { storeCalls.Add(1); return incr(ctx) }
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, src, err := breaker.Do(ctx, b, breaker.FailOpen, counted, nil)
				el := time.Since(start)
				for cur := slowest.Load(); int64(el) > cur && !slowest.CompareAndSwap(cur, int64(el)); cur = slowest.Load() {
				}
				if err != nil {
					t.Errorf("Do under FailOpen returned %v", err)
				}
				if src == breaker.FromFailOpen {
					degraded.Add(1)
				}
				time.Sleep(time.Millisecond) // pacing the load, not synchronisation
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()

	waitFor := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > within {
				t.Fatalf("%s: not within %v (state %v, stats %+v)", what, within, b.State(), b.Stats())
			}
			time.Sleep(5 * time.Millisecond) // polling real time against a real server
		}
		return time.Since(start)
	}

	waitFor("load reaches Redis", 5*time.Second, func() bool { return storeCalls.Load() > 50 })
	if st := b.Stats(); st.State != breaker.StateClosed || st.StoreFailures != 0 || degraded.Load() != 0 {
		t.Fatalf("before the freeze: %+v, %d degraded; want closed, no failures", st, degraded.Load())
	}
	slowest.Store(0)

	proxy.Freeze()
	tookToOpen := waitFor("breaker opens after the freeze", 2*time.Second, func() bool { return b.State() == breaker.StateOpen })
	st := b.Stats()
	t.Logf("opened %v after the freeze; %+v", tookToOpen, st)
	if st.Trips != 1 || st.StoreFailures < 5 || st.StoreFailures > 5+workers {
		t.Errorf("at the trip: %+v; want 1 trip after 5 store failures (+ at most %d in flight)", st, workers)
	}
	if tookToOpen > callTimeout+margin {
		t.Errorf("opened %v after the freeze, want within CallTimeout %v + %v", tookToOpen, callTimeout, margin)
	}

	// While open: no network, microseconds per call.
	before := storeCalls.Load()
	const n = 2000
	var worst time.Duration
	start := time.Now()
	for range n {
		s := time.Now()
		_, src, err := breaker.Do(ctx, b, breaker.FailClosed, counted, nil)
		worst = max(worst, time.Since(s))
		if src != breaker.FromFailClosed || err == nil {
			t.Fatalf("FailClosed call while open = %v, %v", src, err)
		}
	}
	perCall := time.Since(start) / n
	if st := b.Stats(); st.State != breaker.StateOpen || st.Trips != 1 {
		t.Fatalf("the open period ended during the measurement (%+v); lengthen OpenDuration", st)
	}
	if got := storeCalls.Load() - before; got != 0 {
		t.Errorf("%d calls reached Redis while open, want 0", got)
	}
	t.Logf("while open: %v per call, worst %v", perCall, worst)
	// A network wait would be CallTimeout (500ms) each; the bounds leave
	// room for a descheduled goroutine (one 100ms pause is 50µs a call).
	if perCall > 500*time.Microsecond || worst > 200*time.Millisecond {
		t.Errorf("calls while open took %v each (worst %v); want microseconds, no network wait", perCall, worst)
	}

	// A probe while Redis is still frozen fails: open again.
	waitFor("probe while frozen reopens", openDuration+callTimeout+2*time.Second, func() bool { return b.Stats().Trips == 2 })

	proxy.Heal()
	tookToClose := waitFor("probe closes it after the proxy heals", openDuration+callTimeout+2*time.Second, func() bool { return b.State() == breaker.StateClosed })
	t.Logf("closed %v after the proxy healed", tookToClose)
	if worst := time.Duration(slowest.Load()); worst > callTimeout+margin {
		t.Errorf("slowest call under load took %v, want within CallTimeout %v + %v", worst, callTimeout, margin)
	}
	// Calls reach the store again.
	before = storeCalls.Load()
	if _, src, err := breaker.Do(ctx, b, breaker.FailClosed, counted, nil); err != nil || src != breaker.FromStore || storeCalls.Load() == before {
		t.Fatalf("after recovery: %v, %v; want FromStore", src, err)
	}
	st = b.Stats()
	t.Logf("final %+v, %d degraded answers under load", st, degraded.Load())
	if st.FailOpen == 0 || degraded.Load() == 0 {
		t.Errorf("no degraded answers counted during the outage")
	}
}

// TestRedisKilledAndRestarted: a dead Redis answers "connection refused" at
// once; the breaker opens after ConsecutiveFailures, and closes after the
// restart. FailLocal answers from the fallback meanwhile.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	// One attempt per call: go-redis's defaults retry a refused dial 5 times
	// 100ms apart, which CallTimeout would cut at 250ms; here each refused
	// call must fail at once and be classified by IsStoreFailure.
	opts := redistest.Options(srv.Addr)
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	b := breaker.New(srv.Addr, breaker.Config{ConsecutiveFailures: 3, OpenDuration: 300 * time.Millisecond, Jitter: -1, Logger: discard})
	ctx := t.Context()
	var storeCalls atomic.Int64
	ping := func(ctx context.Context) (string, error) { storeCalls.Add(1); return rdb.Ping(ctx).Result() }
	fallback := func(context.Context) (string, error) { return "local", nil }

	if v, src, err := breaker.Do(ctx, b, breaker.FailLocal, ping, fallback); v != "PONG" || src != breaker.FromStore || err != nil {
		t.Fatalf("healthy: %q, %v, %v", v, src, err)
	}
	srv.Kill()
	for i := range 3 {
		start := time.Now()
		v, src, err := breaker.Do(ctx, b, breaker.FailLocal, ping, fallback)
		if v != "local" || src != breaker.FromFailLocal || err != nil {
			t.Fatalf("call %d on a killed server: %q, %v, %v; want the fallback", i, v, src, err)
		}
		if el := time.Since(start); el > breaker.DefaultCallTimeout/2 {
			t.Errorf("call %d on a killed server took %v; want a prompt refusal, not the call timeout", i, el)
		}
	}
	if st := b.Stats(); st.State != breaker.StateOpen || st.StoreFailures != 3 {
		t.Fatalf("after 3 refused calls: %+v, want open after 3 store failures", st)
	}
	before := storeCalls.Load()
	breaker.Do(ctx, b, breaker.FailLocal, ping, fallback)
	if storeCalls.Load() != before {
		t.Fatalf("a call while open reached the store")
	}

	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for b.State() != breaker.StateClosed {
		if time.Now().After(deadline) {
			t.Fatalf("not closed 5s after the restart: %+v", b.Stats())
		}
		breaker.Do(ctx, b, breaker.FailLocal, ping, fallback)
		time.Sleep(20 * time.Millisecond) // polling real time against a real server
	}
	if v, src, err := breaker.Do(ctx, b, breaker.FailLocal, ping, fallback); v != "PONG" || src != breaker.FromStore || err != nil {
		t.Fatalf("after the restart: %q, %v, %v", v, src, err)
	}
}

// tWriter sends log output to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
