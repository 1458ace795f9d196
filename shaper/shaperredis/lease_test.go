package shaperredis_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// TestLeaseServesLocally: after one refill, a Lease serves its batch with no
// round trip per call, refills in the background below the low-water mark, and
// a call costs well under a microsecond.
func TestLeaseServesLocally(t *testing.T) {
	db := redistest.Connect(t)
	var rt roundTrips
	db.Client.AddHook(&rt)
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: 1000}, shaperredis.Config{Prefix: db.Prefix})
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 500, LowWater: 100, Exhaustion: shaperredis.ExhaustWait, MaxWait: time.Second})
	defer l.Close()
	ctx := context.Background()
	if err := l.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	served := 1
	start := time.Now()
	for range 300 {
		if l.Allow() {
			served++
		}
	}
	perCall := time.Since(start) / 300
	if served != 301 {
		t.Errorf("served %d of 301 from a batch of 500", served)
	}
	if n := rt.N.Load(); n > 2 {
		t.Errorf("%d round trips for 301 calls, want 1", n)
	}
	if perCall > time.Microsecond {
		t.Logf("note: %v per call on this machine (want well under 1µs; see the benchmark)", perCall)
	}
	// Drain below the low-water mark: a refill follows without a caller waiting.
	for l.Allow() {
	}
	deadline := time.Now().Add(2 * time.Second)
	for l.Stats().Leased < 600 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if st := l.Stats(); st.Refills < 2 || st.Leased < 600 {
		t.Errorf("after draining: %+v, want a second refill", st)
	}
}

// TestLeaseOverAdmissionBound: 4 processes (clients) lease batches of 20 from a
// 200/s meter with burst 20 for 2s under heavy load: the fleet admits at most
// burst + rate·elapsed + Batch × processes, and at least 80% of rate·2s less
// what gaps with no call ending cost (see lostToGaps).
func TestLeaseOverAdmissionBound(t *testing.T) {
	db := redistest.Connect(t)
	const rate, burst, batch, procs = 200, 20, 20, 4
	const d = 2 * time.Second
	lim := shaper.Limit{Rate: shaper.PerSecond(rate), Burst: burst}
	var served atomic.Int64
	var wg sync.WaitGroup
	done := make([][]time.Duration, procs*8) // when each Wait returned, per goroutine
	start := time.Now()
	stop := start.Add(d)
	var leases []*shaperredis.Lease
	for p := range procs {
		c := redis.NewClient(redistest.Options(db.Client.Options().Addr))
		defer c.Close()
		m := shaperredis.NewMeter(c, lim, shaperredis.Config{Prefix: db.Prefix, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
		l := m.Lease("k", shaperredis.LeaseConfig{Batch: batch, Exhaustion: shaperredis.ExhaustWait, MaxWait: 20 * time.Millisecond, Expiry: -1})
		leases = append(leases, l)
		for g := range 8 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					err := l.Wait(context.Background(), 1)
					done[p*8+g] = append(done[p*8+g], time.Since(start))
					if err == nil {
						served.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	var leased int64
	for _, l := range leases {
		leased += l.Stats().Leased
		l.Close()
	}
	got := served.Load()
	bound := burst + int64(rate*elapsed.Seconds()) + batch*procs + 1
	if got > bound {
		t.Errorf("served %d in %v, bound burst + rate·t + Batch·P = %d", got, elapsed, bound)
	}
	if meterBound := burst + int64(rate*elapsed.Seconds()) + 1; leased > meterBound {
		t.Errorf("leased %d in %v, more than the meter admits (%d)", leased, elapsed, meterBound)
	}
	lost, gaps := lostToGaps(done, d, rate, burst)
	t.Logf("served %d, leased %d in %v; %d gaps with no call ending, worth %.0f", got, leased, elapsed, gaps, lost)
	if low := int64(0.8 * (rate*d.Seconds() - lost)); got < low {
		t.Errorf("served %d in %v, want at least %d (80%% of %v at %d/s, less %.0f lost to gaps)", got, elapsed, low, d, rate, lost)
	}
}

// TestLeaseUnusedQuotaReturnedOnClose: tokens a Lease holds are unavailable to
// other processes (the unused-quota trade-off) until Close gives them back.
func TestLeaseUnusedQuotaReturnedOnClose(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(1), Burst: 10}, shaperredis.Config{Prefix: db.Prefix})
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 8, LowWater: 1, Exhaustion: shaperredis.ExhaustWait, MaxWait: time.Second})
	if err := l.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The Lease holds 7; 2 are left in Redis.
	if d, err := m.AllowN(ctx, "k", 3); err != nil || d.Allowed || d.Remaining != 2 {
		t.Errorf("AllowN(3) while the lease holds 7: %+v, %v; want denied, 2 remaining", d, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Returned != 7 {
		t.Errorf("returned %d, want 7", st.Returned)
	}
	if d, err := m.AllowN(ctx, "k", 9); err != nil || !d.Allowed {
		t.Errorf("AllowN(9) after Close: %+v, %v; want allowed", d, err)
	}
	if l.Allow() {
		t.Errorf("Allow after Close: true")
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestLeaseExpiry: tokens not used within Expiry are dropped, not used late.
func TestLeaseExpiry(t *testing.T) {
	db := redistest.Connect(t)
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(1), Burst: 10}, shaperredis.Config{Prefix: db.Prefix})
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 5, LowWater: 1, Expiry: 100 * time.Millisecond, Exhaustion: shaperredis.ExhaustWait})
	defer l.Close()
	if err := l.Wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	l.Allow() // drops the expired 4, then refills in the background
	if st := l.Stats(); st.Expired != 4 {
		t.Errorf("Expired = %d, want 4", st.Expired)
	}
}

// TestLeaseExhaustion: with Redis unreachable, ExhaustReject refuses at once
// with a *RejectError (ErrLimited), ExhaustWait refuses after MaxWait, and ExhaustLocal admits
// its local allowance (burst 3) and no more.
func TestLeaseExhaustion(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(100), Burst: 100}, shaperredis.Config{})
	ctx := context.Background()

	rej := m.Lease("k", shaperredis.LeaseConfig{})
	defer rej.Close()
	if err := rej.Wait(ctx, 1); !errors.Is(err, shaper.ErrLimited) {
		t.Errorf("ExhaustReject: %v, want ErrLimited", err)
	}

	wait := m.Lease("k", shaperredis.LeaseConfig{Exhaustion: shaperredis.ExhaustWait, MaxWait: 100 * time.Millisecond})
	defer wait.Close()
	start := time.Now()
	if err := wait.Wait(ctx, 1); !errors.Is(err, shaper.ErrLimited) {
		t.Errorf("ExhaustWait: %v, want ErrLimited", err)
	}
	if el := time.Since(start); el < 90*time.Millisecond || el > 2*time.Second {
		t.Errorf("ExhaustWait refused after %v, want about MaxWait (100ms)", el)
	}

	loc := m.Lease("k", shaperredis.LeaseConfig{Exhaustion: shaperredis.ExhaustLocal, LocalShare: shaper.Limit{Rate: shaper.PerHour(1), Burst: 3}})
	defer loc.Close()
	n := 0
	for range 10 {
		if loc.Allow() {
			n++
		}
	}
	if n != 3 {
		t.Errorf("ExhaustLocal admitted %d of 10, want the local burst 3", n)
	}
	if st := loc.Stats(); st.Local != 3 || st.Rejected != 7 {
		t.Errorf("stats %+v, want Local 3, Rejected 7", st)
	}
}

// TestLeaseInvalid: bad configurations panic; costs above Batch are refused.
func TestLeaseInvalid(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}, shaperredis.Config{})
	mustPanic(t, "Batch > burst", func() { m.Lease("k", shaperredis.LeaseConfig{Batch: 11}) })
	mustPanic(t, "LowWater ≥ Batch", func() { m.Lease("k", shaperredis.LeaseConfig{Batch: 5, LowWater: 5}) })
	mustPanic(t, "ExhaustLocal without limit", func() { m.Lease("k", shaperredis.LeaseConfig{Exhaustion: shaperredis.ExhaustLocal}) })
	tb := shaperredis.NewTokenBucket(rdb, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}, shaperredis.Config{})
	mustPanic(t, "token bucket", func() { tb.Lease("k", shaperredis.LeaseConfig{}) })
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 4})
	defer l.Close()
	if err := l.Wait(context.Background(), 5); !errors.Is(err, shaper.ErrTooLarge) {
		t.Errorf("Wait(5) with Batch 4: %v, want ErrTooLarge", err)
	}
}

// TestLeaseCloseWaitsForRefill: with Redis frozen, a refill in flight is waited
// for by Close (it ends with its call timeout), so no goroutine outlives the
// Lease, and the failed refill is counted.
func TestLeaseCloseWaitsForRefill(t *testing.T) {
	srv := redistest.Start(t)
	m := shaperredis.NewMeter(srv.Client(), shaper.Limit{Rate: shaper.PerSecond(100), Burst: 100},
		shaperredis.Config{Breaker: breaker.New("test", breaker.Config{CallTimeout: 200 * time.Millisecond})})
	l := m.Lease("k", shaperredis.LeaseConfig{})
	srv.Pause()
	defer srv.Resume()
	if l.Allow() {
		t.Fatal("Allow with no tokens yet: true")
	}
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if st := l.Stats(); st.Refills != 1 || st.Errors != 1 {
		t.Errorf("after Close: %+v, want the one refill finished, failed", st)
	}
	if el < 100*time.Millisecond || el > 2*time.Second {
		t.Errorf("Close took %v, want about the 200ms call timeout of the refill it waited for", el)
	}
}

// TestLeaseWaitRetriesWhenRedisHadNone: a refill that finds no token in Redis
// defers the next one until Redis's retry-after; a waiter wakes then and gets
// the tokens, rather than sleeping out MaxWait.
func TestLeaseWaitRetriesWhenRedisHadNone(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(20), Burst: 2}, shaperredis.Config{Prefix: db.Prefix})
	if d, err := m.AllowN(ctx, "k", 2); err != nil || !d.Allowed {
		t.Fatalf("emptying the bucket: %+v, %v", d, err)
	}
	l := m.Lease("k", shaperredis.LeaseConfig{Batch: 2, LowWater: 1, Exhaustion: shaperredis.ExhaustWait, MaxWait: 2 * time.Second})
	defer l.Close()
	start := time.Now()
	if err := l.Wait(ctx, 1); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Wait took %v; a token is due within 50ms", el)
	}
}
