package shaperredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts round trips (commands and pipelines).
type roundTrips = redistest.RoundTrips

type newFunc func(redis.UniversalClient, shaper.Limit, shaperredis.Config) *shaperredis.Meter

var algos = []struct {
	name   string
	new    newFunc
	window bool
}{
	{"gcra", shaperredis.NewMeter, false},
	{"tokenbucket", shaperredis.NewTokenBucket, false},
	{"fixedwindow", shaperredis.NewFixedWindow, true},
	{"slidinglog", shaperredis.NewSlidingLog, true},
	{"slidingcounter", shaperredis.NewSlidingCounter, true},
}

func limitFor(window bool, count int64, period time.Duration, burst int64) shaper.Limit {
	if window {
		return shaper.Limit{Rate: shaper.Rate{Count: count, Period: period}}
	}
	return shaper.Limit{Rate: shaper.Rate{Count: count, Period: period}, Burst: burst}
}

// TestRedisMeterRefusesInvalidBeforeRoundTrip: a cost above the burst is a
// *RejectError (ErrTooLarge, no RetryAfter), a done context is ctx.Err(), and
// neither makes a round trip; a negative cost and invalid configurations panic.
func TestRedisMeterRefusesInvalidBeforeRoundTrip(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	var rt roundTrips
	rdb.AddHook(&rt)
	for _, a := range algos {
		m := a.new(rdb, limitFor(a.window, 5, time.Second, 5), shaperredis.Config{})
		_, err := m.AllowN(context.Background(), "k", 6)
		if re, ok := errors.AsType[*shaper.RejectError](err); !ok || !errors.Is(err, shaper.ErrTooLarge) || re.RetryAfter() != 0 {
			t.Errorf("%s: AllowN(6) with burst 5: err = %v, want ErrTooLarge with RetryAfter 0", a.name, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := m.AllowN(ctx, "k", 1); err != context.Canceled {
			t.Errorf("%s: AllowN with a cancelled ctx: err = %v, want context.Canceled", a.name, err)
		}
		mustPanic(t, a.name+" negative cost", func() { m.AllowN(context.Background(), "k", -1) })
	}
	if n := rt.N.Load(); n != 0 {
		t.Errorf("%d round trips for refused calls, want 0", n)
	}
	mustPanic(t, "nil client", func() { shaperredis.NewMeter(nil, shaper.Limit{Rate: shaper.PerSecond(1)}, shaperredis.Config{}) })
	mustPanic(t, "no ContextTimeoutEnabled", func() {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer c.Close()
		shaperredis.NewMeter(c, shaper.Limit{Rate: shaper.PerSecond(1)}, shaperredis.Config{})
	})
	mustPanic(t, "zero rate", func() { shaperredis.NewMeter(rdb, shaper.Limit{}, shaperredis.Config{}) })
	mustPanic(t, "window burst", func() {
		shaperredis.NewFixedWindow(rdb, shaper.Limit{Rate: shaper.PerSecond(5), Burst: 3}, shaperredis.Config{})
	})
	var zero shaperredis.Meter
	if _, err := zero.AllowN(context.Background(), "k", 1); !errors.Is(err, shaper.ErrTooLarge) {
		t.Errorf("zero RedisMeter: err = %v, want ErrTooLarge", err)
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// TestRedisMeterGCRABurst: 10/s with burst 5, 20 calls at once admit 5 (and
// one more for each 100ms they took); the retry-after of the first denial is
// in (0, 100ms], and a call after sleeping it is admitted. One round trip per
// decision.
func TestRedisMeterGCRABurst(t *testing.T) {
	db := redistest.Connect(t)
	var rt roundTrips
	db.Client.AddHook(&rt)
	// 10/s, not faster: at 100/s, 20 calls taking 150ms on a loaded machine
	// were all admitted, and no denial was seen.
	const per = 100 * time.Millisecond
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 5}, shaperredis.Config{Prefix: db.Prefix})
	ctx := context.Background()
	allowed := 0
	var firstDenial shaper.Decision
	denied := false
	start := time.Now()
	for range 20 {
		d, err := m.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		} else if !denied {
			firstDenial, denied = d, true
		}
	}
	if n := rt.N.Load(); n != 20 {
		t.Errorf("%d round trips for 20 decisions, want 20", n)
	}
	// Time passes during the 20 calls (tens of ms on a loaded machine, with
	// -race): each 100ms of it earns one more admission.
	if most := 5 + int(time.Since(start)/per) + 1; allowed < 5 || allowed > most {
		t.Errorf("%d of 20 calls allowed in %v, want 5 plus at most one per %v (%d)", allowed, time.Since(start), per, most)
	}
	if !denied {
		t.Fatalf("none of 20 calls denied in %v", time.Since(start))
	}
	if ra := firstDenial.RetryAfter; ra <= 0 || ra > per {
		t.Errorf("first denial's RetryAfter = %v, want in (0, %v]", ra, per)
	}
	if err := firstDenial.Err(); !errors.Is(err, shaper.ErrLimited) {
		t.Errorf("Decision.Err() = %v, want ErrLimited", err)
	}
	d, _ := m.AllowN(ctx, "k", 1)
	if !d.Allowed {
		time.Sleep(d.RetryAfter)
		if d, _ = m.AllowN(ctx, "k", 1); !d.Allowed {
			t.Errorf("after sleeping RetryAfter: %+v, want allowed", d)
		}
	}
}

// TestRedisRetryAfterIsEnough: for every algorithm, with random costs, a call
// repeated after sleeping exactly the RetryAfter of its denial is admitted (one
// client, one key, nothing else admitted meanwhile).
func TestRedisRetryAfterIsEnough(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	for _, a := range algos {
		t.Run("algo="+a.name, func(t *testing.T) {
			t.Parallel()
			m := a.new(db.Client, limitFor(a.window, 20, 200*time.Millisecond, 4), shaperredis.Config{Prefix: db.Prefix + a.name + ":"})
			max := int64(4)
			if a.window {
				max = 20
			}
			denials := 0
			deadline := time.Now().Add(time.Second)
			for i := 0; time.Now().Before(deadline); i++ {
				n := 1 + int64(i*7)%max
				d, err := m.AllowN(ctx, "k", n)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					continue
				}
				denials++
				if d.RetryAfter <= 0 {
					t.Fatalf("denial with RetryAfter %v", d.RetryAfter)
				}
				time.Sleep(d.RetryAfter)
				d2, err := m.AllowN(ctx, "k", n)
				if err != nil {
					t.Fatal(err)
				}
				if !d2.Allowed {
					t.Fatalf("AllowN(%d) after sleeping RetryAfter %v: denied again (%+v)", n, d.RetryAfter, d2)
				}
			}
			if denials == 0 {
				t.Errorf("no denial in the run")
			}
		})
	}
}

// TestRedisMeterTTL: every written key has a TTL; a GCRA key lives until its
// theoretical arrival time and then vanishes; a token-bucket key follows the
// seed (at least 60s).
func TestRedisMeterTTL(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	for _, a := range algos {
		m := a.new(db.Client, limitFor(a.window, 10, 100*time.Millisecond, 10), shaperredis.Config{Prefix: db.Prefix + a.name + ":"})
		if _, err := m.AllowN(ctx, "k", 3); err != nil {
			t.Fatal(err)
		}
		ttl := db.Client.PTTL(ctx, m.Key("k")).Val()
		switch {
		case a.name == "tokenbucket":
			if ttl < 59*time.Second || ttl > 60*time.Second {
				t.Errorf("%s: PTTL = %v, want 60s (the seed's minimum)", a.name, ttl)
			}
		case ttl <= 0 || ttl > 200*time.Millisecond:
			t.Errorf("%s: PTTL = %v, want in (0, 200ms]", a.name, ttl)
		}
	}
	gcra := shaperredis.NewMeter(db.Client, limitFor(false, 10, 100*time.Millisecond, 10), shaperredis.Config{Prefix: db.Prefix + "gcra:"})
	time.Sleep(250 * time.Millisecond)
	if n := db.Client.Exists(ctx, gcra.Key("k")).Val(); n != 0 {
		t.Errorf("GCRA key still there 250ms after a burst of 3 at 100/s")
	}
	if d, _ := gcra.AllowN(ctx, "k", 10); !d.Allowed || d.Remaining != 0 {
		t.Errorf("after expiry: %+v, want a full burst", d)
	}
}

// hammerRedis runs goroutines spread over clients calling m on one key until the
// deadline and returns the number admitted, the elapsed time, and idle: the
// admissions no call could have had because no call completed for a while (a
// loaded machine deschedules redis-server or the callers; a gap g with no
// reply costs rate·g − burst admissions, capacity that no caller asked for).
func hammerRedis(t *testing.T, meters []*shaperredis.Meter, goroutines int, d time.Duration, rate, burst float64) (allowedN int64, elapsed time.Duration, idle float64) {
	t.Helper()
	var allowed, denied, errs atomic.Int64
	var wg sync.WaitGroup
	done := make([][]time.Duration, goroutines) // reply times since start, per goroutine
	start := time.Now()
	stop := start.Add(d)
	for g := range goroutines {
		m := meters[g%len(meters)]
		wg.Go(func() {
			for time.Now().Before(stop) {
				dec, err := m.AllowN(context.Background(), "k", 1)
				done[g] = append(done[g], time.Since(start))
				if err != nil {
					if errs.Add(1) == 1 {
						t.Errorf("Allow: %v", err)
					}
					continue
				}
				if dec.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	idle, gaps := lostToGaps(done, d, rate, burst)
	t.Logf("%d admitted, %d denied in %v; %d gaps without a reply, worth %.0f admissions", allowed.Load(), denied.Load(), elapsed, gaps, idle)
	return allowed.Load(), elapsed, idle
}

// TestRedisConcurrentNeverOverAdmits: 64 goroutines over 4 clients (each its
// own connection pool), one key, 2s: admitted ≤ burst + rate·elapsed + 1, and at
// least 90% of rate·2s less what gaps with no reply at all cost (on a loaded
// machine redis-server itself stalls). With and without batching.
func TestRedisConcurrentNeverOverAdmits(t *testing.T) {
	db := redistest.Connect(t)
	addr := db.Client.Options().Addr
	for _, a := range algos[:2] {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("algo=%s/batch=%v", a.name, batch), func(t *testing.T) {
				const rate, burst = 200, 10
				var meters []*shaperredis.Meter
				for range 4 {
					c := redis.NewClient(redistest.Options(addr))
					defer c.Close()
					meters = append(meters, a.new(c, shaper.Limit{Rate: shaper.PerSecond(rate), Burst: burst},
						shaperredis.Config{Prefix: fmt.Sprintf("%s%s:%v:", db.Prefix, a.name, batch), Batch: batch, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})}))
				}
				const d = 2 * time.Second
				got, elapsed, idle := hammerRedis(t, meters, 64, d, rate, burst)
				bound := burst + int64(rate*elapsed.Seconds()) + 1
				if got > bound {
					t.Errorf("admitted %d in %v, bound %d", got, elapsed, bound)
				}
				if low := int64(0.9 * (rate*d.Seconds() - idle)); got < low {
					t.Errorf("admitted %d in %v, want at least %d (90%% of %v at %d/s, less %.0f lost to gaps with no reply)", got, elapsed, low, d, rate, idle)
				}
			})
		}
	}
}

// TestRedisScriptFlush: SCRIPT FLUSH every 5ms while 16 goroutines decide, with
// and without batching: no error reaches a caller (EVALSHA's NOSCRIPT is
// answered by EVAL, in pipelines too).
func TestRedisScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			var meters []*shaperredis.Meter
			for _, a := range algos {
				meters = append(meters, a.new(srv.Client(), limitFor(a.window, 1000, time.Second, 1000), shaperredis.Config{Batch: batch, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})}))
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				for ctx.Err() == nil {
					admin.ScriptFlush(context.Background())
					time.Sleep(5 * time.Millisecond)
				}
			})
			var calls, errs atomic.Int64
			for g := range 16 {
				m := meters[g%len(meters)]
				wg.Go(func() {
					for ctx.Err() == nil {
						_, err := m.AllowN(context.Background(), fmt.Sprint("k", g), 1)
						calls.Add(1)
						if err != nil && errs.Add(1) <= 3 {
							t.Errorf("Allow during SCRIPT FLUSH: %v", err)
						}
					}
				})
			}
			time.Sleep(time.Second)
			cancel()
			wg.Wait()
			if calls.Load() < 100 {
				t.Errorf("only %d calls", calls.Load())
			}
		})
	}
}

// TestRedisKillAndRestart: with Redis SIGKILLed, FailClosed calls fail with
// breaker.ErrUnavailable within the call timeout and, once the breaker is open,
// at once; FailOpen calls are admitted (Degraded in the breaker's Stats);
// FailLocal calls are decided by the local share. After a restart (empty), calls
// succeed again once the breaker has closed.
func TestRedisKillAndRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	brk := breaker.New("test", breaker.Config{CallTimeout: 200 * time.Millisecond, OpenDuration: 300 * time.Millisecond, Jitter: -1,
		Logger: nil})
	lim := shaper.Limit{Rate: shaper.PerSecond(100), Burst: 10}
	closed := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Breaker: brk, Policy: breaker.FailClosed})
	open := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Breaker: brk, Policy: breaker.FailOpen})
	local := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Breaker: brk, Policy: breaker.FailLocal,
		LocalShare: shaper.Limit{Rate: shaper.PerSecond(1), Burst: 2}})
	ctx := context.Background()
	for _, m := range []*shaperredis.Meter{closed, open, local} {
		if d, err := m.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("before the kill: %+v, %v", d, err)
		}
	}
	srv.Kill()
	for i := range 10 {
		start := time.Now()
		_, err := closed.AllowN(ctx, "k", 1)
		if !errors.Is(err, breaker.ErrUnavailable) {
			t.Fatalf("call %d with Redis dead, FailClosed: err = %v, want ErrUnavailable", i, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("call %d took %v with Redis dead", i, el)
		}
	}
	if brk.State() != breaker.StateOpen {
		t.Fatalf("breaker %v after 10 failures, want open", brk.State())
	}
	start := time.Now()
	_, err := closed.AllowN(ctx, "k", 1)
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
		t.Errorf("open breaker, FailClosed: err = %v, want a RetryAfter", err)
	}
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Errorf("open breaker: call took %v, want immediate", el)
	}
	if d, err := open.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Errorf("FailOpen with Redis dead: %+v, %v; want allowed", d, err)
	}
	if brk.Stats().Degraded == 0 {
		t.Errorf("FailOpen admission not counted as degraded")
	}
	var localAllowed int
	for range 5 {
		d, err := local.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatalf("FailLocal with Redis dead: %v", err)
		}
		if d.Allowed {
			localAllowed++
		}
	}
	if localAllowed != 2 {
		t.Errorf("FailLocal admitted %d of 5, want the local burst 2", localAllowed)
	}

	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := closed.AllowN(ctx, "k", 1)
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the restart: %+v, %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisCluster: on a 3-node Redis Cluster every algorithm, the fleet queue
// and leases work on keys spread over all nodes (no CROSSSLOT, no MOVED
// surfaced), with and without batching.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		for _, a := range algos {
			m := a.new(c.Client, limitFor(a.window, 5, time.Second, 5), shaperredis.Config{
				Prefix: fmt.Sprintf("%s:%v:", a.name, batch), Batch: batch, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
			var wg sync.WaitGroup
			for k := range 30 {
				wg.Go(func() {
					key := fmt.Sprint("tenant-", k)
					allowed := 0
					start := time.Now()
					for range 7 {
						d, err := m.AllowN(ctx, key, 1)
						if err != nil {
							t.Errorf("%s batch=%v key %s: %v", a.name, batch, key, err)
							return
						}
						if d.Allowed {
							allowed++
						}
					}
					// A window boundary may fall between the calls, and on a
					// loaded machine each 200ms they take earns one more.
					most := 5 + int(time.Since(start)/(200*time.Millisecond)) + 1
					if allowed < 5 || allowed > most && !a.window {
						t.Errorf("%s batch=%v key %s: %d of 7 allowed in %v, want 5 (at most %d)", a.name, batch, key, allowed, time.Since(start), most)
					}
				})
			}
			wg.Wait()
		}
	}
	// The fleet queue and leases, on keys of every node.
	for k := range 6 {
		q := shaperredis.NewQueue(c.Client, fmt.Sprint("jobs-", k), shaper.PerSecond(100), shaper.QueueConfig{Burst: 2},
			shaperredis.Config{Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
		for range 3 {
			if err := q.Wait(ctx, 1); err != nil {
				t.Errorf("RedisQueue.Wait on the cluster: %v", err)
			}
		}
		q.Close()
		m := shaperredis.NewMeter(c.Client, shaper.Limit{Rate: shaper.PerSecond(100), Burst: 20}, shaperredis.Config{Prefix: "lease:", Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
		l := m.Lease(fmt.Sprint("tenant-", k), shaperredis.LeaseConfig{Batch: 10, Exhaustion: shaperredis.ExhaustWait, MaxWait: time.Second})
		for range 15 {
			if err := l.Wait(ctx, 1); err != nil {
				t.Errorf("Lease.Wait on the cluster: %v", err)
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("Lease.Close on the cluster: %v", err)
		}
	}
	// The keys are spread over the nodes.
	var nodes atomic.Int64
	c.Client.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		if n.DBSize(ctx).Val() > 0 {
			nodes.Add(1)
		}
		return nil
	})
	if nodes := nodes.Load(); nodes != 3 {
		t.Errorf("keys on %d of 3 nodes", nodes)
	}
}

// TestRedisPausedRespectsCallTimeout: with Redis frozen (the
// floodgatetest.Proxy between the meter and Redis stops forwarding), a decision
// returns within its call timeout (plus scheduling slack), with and without
// batching, with a shared breaker and with the meter's own (whose timeout the
// meter applies itself, for a context.Background caller through a shared
// deadline), and a caller's cancellation returns ctx.Err() without waiting for
// Redis. After the proxy heals, decisions succeed again.
func TestRedisPausedRespectsCallTimeout(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr) // frozen by each subtest
	for _, own := range []bool{false, true} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("own=%v/batch=%v", own, batch), func(t *testing.T) {
				testPaused(t, proxy, own, batch)
			})
		}
	}
}

type pausedKey struct{}

func testPaused(t *testing.T, proxy *floodgatetest.Proxy, own, batch bool) {
	cfg := shaperredis.Config{Batch: batch, Breaker: breaker.New("test", breaker.Config{CallTimeout: 150 * time.Millisecond})}
	if !own {
		cfg = shaperredis.Config{Batch: batch, Breaker: breaker.New("paused", breaker.Config{CallTimeout: 150 * time.Millisecond, ConsecutiveFailures: 1000})}
	}
	rdb := redis.NewClient(redistest.Options(proxy.Addr()))
	defer rdb.Close()
	m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 100}, cfg)
	ctx := context.Background()
	if _, err := m.AllowN(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	defer proxy.Heal()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cx := ctx
			if i%2 == 1 { // a caller's ctx that cannot be done, with a value
				cx = context.WithValue(ctx, pausedKey{}, i)
			}
			start := time.Now()
			_, err := m.AllowN(cx, "k", 1)
			if !errors.Is(err, breaker.ErrUnavailable) {
				t.Errorf("Allow with Redis frozen: %v, want ErrUnavailable", err)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("Allow with Redis frozen took %v, call timeout 150ms", el)
			}
		})
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := m.AllowN(cctx, "k", 1); err != context.DeadlineExceeded {
		t.Errorf("Allow with a 50ms deadline: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("Allow with a 50ms deadline took %v", el)
	}
	wg.Wait()
	proxy.Heal()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := m.AllowN(ctx, "k", 1)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the proxy heals: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisQueuePolicies: with Redis unreachable, a FailOpen queue starts calls
// at once, a FailLocal queue paces them with its local rate, and a FailClosed
// queue returns breaker.ErrUnavailable.
func TestRedisQueuePolicies(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	closed := shaperredis.NewQueue(rdb, "q", shaper.PerSecond(10), shaper.QueueConfig{}, shaperredis.Config{})
	if err := closed.Wait(ctx, 1); !errors.Is(err, breaker.ErrUnavailable) {
		t.Errorf("FailClosed: %v, want ErrUnavailable", err)
	}
	open := shaperredis.NewQueue(rdb, "q", shaper.PerSecond(10), shaper.QueueConfig{}, shaperredis.Config{Policy: breaker.FailOpen})
	for range 3 {
		if err := open.Wait(ctx, 1); err != nil {
			t.Errorf("FailOpen: %v", err)
		}
	}
	local := shaperredis.NewQueue(rdb, "q", shaper.PerSecond(10), shaper.QueueConfig{}, shaperredis.Config{Policy: breaker.FailLocal,
		LocalShare: shaper.Limit{Rate: shaper.PerSecond(20), Burst: 1}})
	defer local.Close()
	start := time.Now()
	for range 3 {
		if err := local.Wait(ctx, 1); err != nil {
			t.Errorf("FailLocal: %v", err)
		}
	}
	if el := time.Since(start); el < 90*time.Millisecond {
		t.Errorf("FailLocal: 3 calls at a local 20/s took %v, want ≥ 100ms", el)
	}
}

// TestRedisHalfOpenRetryAfter: with the meter's own breaker (whose call timeout
// the meter applies), a call refused while the half-open probe is in flight
// says to retry after the call timeout, as a shared breaker's refusal does.
func TestRedisHalfOpenRetryAfter(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr) // frozen below
	c := redis.NewClient(redistest.Options(proxy.Addr()))
	defer c.Close()
	var rt redistest.RoundTrips // counts each command as it is sent
	c.AddHook(&rt)
	m := shaperredis.NewMeter(c, shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 100},
		shaperredis.Config{Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	ctx := context.Background()
	if _, err := m.AllowN(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	for range 5 { // breaker.DefaultConsecutiveFailures
		if _, err := m.AllowN(ctx, "k", 1); !errors.Is(err, breaker.ErrUnavailable) {
			t.Fatalf("Allow with Redis frozen: %v", err)
		}
	}
	time.Sleep(1300 * time.Millisecond) // past the open period (1s + 10% jitter)
	sent := rt.N.Load()
	probe := make(chan error, 1)
	go func() {
		_, err := m.AllowN(ctx, "k", 1)
		probe <- err
	}()
	// The probe is in flight, waiting on the frozen Redis, once its command
	// reaches the client (the breaker admitted it); its call timeout leaves
	// 100ms for the next call.
	for deadline := time.Now().Add(5 * time.Second); rt.N.Load() == sent; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the half-open probe sent nothing to Redis within 5s")
		}
	}
	_, err := m.AllowN(ctx, "k", 1)
	oe, ok := errors.AsType[*breaker.OpenError](err)
	if !ok || oe.State != breaker.StateHalfOpen {
		t.Fatalf("Allow while the probe is in flight: %v, want a half-open *breaker.OpenError", err)
	}
	if oe.RetryAfter() != 100*time.Millisecond {
		t.Errorf("half-open RetryAfter = %v, want the call timeout 100ms", oe.RetryAfter())
	}
	<-probe
}

// TestRedisProbeOffCallersPath: once the breaker has opened on a frozen
// Redis, no decision waits on it, half-open included: the breaker probes
// Redis itself with a PING the meter gave it (breaker.Config.Probe), and
// every decision meanwhile is the policy's, in far less than the call
// timeout. When Redis comes back, a probe closes the breaker and decisions
// are Redis's again within an open period.
func TestRedisProbeOffCallersPath(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	c := redis.NewClient(redistest.Options(proxy.Addr()))
	defer c.Close()
	brk := breaker.New("probe", breaker.Config{CallTimeout: 250 * time.Millisecond, OpenDuration: 300 * time.Millisecond})
	m := shaperredis.NewMeter(c, shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 100}, shaperredis.Config{Breaker: brk, Policy: breaker.FailOpen})
	ctx := context.Background()
	if d, err := m.AllowN(ctx, "k", 1); err != nil || d.Degraded {
		t.Fatalf("healthy: %+v, %v", d, err)
	}
	proxy.Freeze()
	for brk.State() != breaker.StateOpen { // the calls that trip it wait their timeout
		if _, err := m.AllowN(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	var worst time.Duration
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		start := time.Now()
		d, err := m.AllowN(ctx, "k", 1)
		worst = max(worst, time.Since(start))
		if err != nil || !d.Degraded {
			t.Fatalf("open, Redis frozen: %+v, %v, want a degraded admission", d, err)
		}
	}
	st := brk.Stats()
	if st.Probes < 2 || st.ProbeFailures+1 < st.Probes { // the last may be in flight
		t.Errorf("after 1.5s frozen with a 300ms open period: %d probes, %d failed, want ≥ 2, all but one in flight failed", st.Probes, st.ProbeFailures)
	}
	if worst > 50*time.Millisecond {
		t.Errorf("slowest decision once the breaker had opened: %v, want no wait on Redis (≪ the 250ms call timeout)", worst)
	}
	proxy.Heal()
	floodgatetest.Eventually(t, 5*time.Second, "decisions from Redis after it returned", func() bool {
		d, err := m.AllowN(ctx, "k", 1)
		return err == nil && !d.Degraded
	})
}
