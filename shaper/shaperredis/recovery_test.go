package shaperredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// failLocalMeter is a GCRA meter under FailLocal on a client that reaches
// Redis through proxy, with a breaker that opens on the first failure and
// probes again after 100ms.
func failLocalMeter(t *testing.T, proxy *floodgatetest.Proxy, prefix string, lim, share shaper.Limit) (*shaperredis.Meter, *breaker.Breaker) {
	return failLocalMeterOf(t, shaperredis.NewMeter, proxy, prefix, lim, share)
}

// newMeterFunc is a meter constructor: shaperredis.NewMeter, NewFixedWindow...
type newMeterFunc func(redis.UniversalClient, shaper.Limit, shaperredis.Config) *shaperredis.Meter

// failLocalMeterOf is failLocalMeter for the algorithm newMeter makes.
func failLocalMeterOf(t *testing.T, newMeter newMeterFunc, proxy *floodgatetest.Proxy, prefix string, lim, share shaper.Limit) (*shaperredis.Meter, *breaker.Breaker) {
	c := redis.NewClient(redistest.Options(proxy.Addr()))
	t.Cleanup(func() { c.Close() })
	brk := breaker.New("recovery", breaker.Config{ConsecutiveFailures: 1, OpenDuration: 100 * time.Millisecond, Jitter: -1, CallTimeout: 250 * time.Millisecond})
	return newMeter(c, lim, shaperredis.Config{Prefix: prefix, Breaker: brk, Policy: breaker.FailLocal, LocalShare: share}), brk
}

// spend makes decisions of 1 for key until one is refused (at most max) and
// returns how many were admitted, and how many of those were degraded.
func spend(t *testing.T, m *shaperredis.Meter, key string, max int) (admitted, degraded int) {
	for range max {
		d, err := m.AllowN(context.Background(), key, 1)
		if err != nil {
			t.Fatalf("AllowN: %v", err)
		}
		if !d.Allowed {
			break
		}
		admitted++
		if d.Degraded {
			degraded++
		}
	}
	return admitted, degraded
}

// TestFailLocalShareStartsFromWhatRemains: while Redis answers, a key's
// local share is kept at its part of what Redis says remains, so an outage
// that begins after the fleet spent three quarters of its burst admits a
// quarter of the share, not the whole share on top of what Redis admitted.
func TestFailLocalShareStartsFromWhatRemains(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	// A rate slow enough that nothing accrues meanwhile: 100 a minute, burst
	// 100; the share a quarter of it.
	lim := shaper.Limit{Rate: shaper.PerMinute(100), Burst: 100}
	share := shaper.Limit{Rate: shaper.PerMinute(25), Burst: 25}
	m, brk := failLocalMeter(t, proxy, "start:", lim, share)
	if got, deg := spend(t, m, "k", 76); got != 76 || deg != 0 {
		t.Fatalf("healthy: %d admitted (%d degraded), want 76 from Redis", got, deg)
	}
	proxy.Drop()
	got, deg := spend(t, m, "k", 100)
	if brk.State() != breaker.StateOpen {
		t.Fatalf("breaker %v with Redis gone, want open", brk.State())
	}
	// 24 remained of 100: the share's part is 24 × 25 / 100 = 6.
	if got != 6 || deg != 6 {
		t.Errorf("outage after 76 of 100 spent: the local share admitted %d (%d degraded), want 6 (24 × 25/100)", got, deg)
	}
}

// TestFailLocalRecoveryCarriesTheDebt: after an outage in which the local
// share spent its burst, Redis is told: for the share's period after its
// last decision, a decision needs the share's room too (its refusal costs no
// round trip), and the first decision Redis answers for the key carries
// what the share spent into Redis, so that Redis, which never saw the
// outage, does not hand out a whole burst again once the recovery is over.
func TestFailLocalRecoveryCarriesTheDebt(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	lim := shaper.Limit{Rate: shaper.PerSecond(10), Burst: 20} // one process: its share is the limit
	m, brk := failLocalMeter(t, proxy, "carry:", lim, lim)
	ctx := context.Background()
	proxy.Drop()
	if got, deg := spend(t, m, "k", 40); got < 20 || got > 22 || deg != got {
		t.Fatalf("outage: the local share admitted %d (%d degraded), want its burst of 20 (+ what accrued)", got, deg)
	}
	proxy.Heal()
	floodgatetest.Eventually(t, 5*time.Second, "the breaker closed by its probe", func() bool {
		m.AllowN(ctx, "other", 0) // a peek lets the breaker probe
		return brk.State() == breaker.StateClosed
	})
	// A key the share did not decide during the outage is Redis's alone:
	// its whole burst, from Redis.
	if got, deg := spend(t, m, "fresh", 40); got < 20 || deg != 0 {
		t.Errorf("a key untouched by the outage: %d admitted (%d degraded), want Redis's burst of 20, none degraded", got, deg)
	}
	// Recovering: the share has earned back a few tokens since; each
	// admission needs the share and Redis (fresh, its burst whole).
	admitted := 0
	start := time.Now()
	for range 40 {
		d, err := m.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	elapsed := time.Since(start) + 600*time.Millisecond // generous: what the share earned since the outage's last decision
	if earned := int(10*elapsed.Seconds()) + 2; admitted > earned {
		t.Errorf("recovering: %d admitted at once, want at most what the share earned (%d): Redis's fresh burst was handed out again", admitted, earned)
	}
	st := m.Stats()
	if st.Carried < 10 {
		t.Errorf("Stats().Carried = %d, want the share's debt (about 20) carried into Redis", st.Carried)
	}
	// Redis knows it: a peek at the key in Redis shows little left, not 20.
	rem := peekRedis(t, srv.Addr, lim, "carry:", "k")
	if rem > 8 {
		t.Errorf("Redis's remaining for the key after the carry: %d, want the debt charged (≤ 8, not a fresh 20)", rem)
	}

	// Redis flaps: what is carried next is only what the share admitted in
	// the new outage, not its whole debt once more. (A second of real time
	// first, so that Redis has room for a carry too large to go unseen: a
	// rate refilling, not a synchronisation.)
	time.Sleep(time.Second)
	proxy.Drop()
	got, deg := spend(t, m, "k", 2)
	if deg != got {
		t.Fatalf("second outage: %d admitted, %d of them degraded", got, deg)
	}
	proxy.Heal()
	floodgatetest.Eventually(t, 5*time.Second, "the breaker closed again", func() bool {
		m.AllowN(ctx, "other", 0)
		return brk.State() == breaker.StateClosed
	})
	for range 5 {
		if _, err := m.AllowN(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if again := m.Stats().Carried - st.Carried; again > uint64(deg) {
		t.Errorf("after a second outage in which the share admitted %d: %d more carried, want at most %d (the first outage's debt was carried already)", deg, again, deg)
	}
}

// TestFailLocalRecoveryCarriesTheFixedWindowDebt: a fixed window's share
// and Redis count the same window (both aligned to the Unix epoch), so what
// the share admitted in it without Redis is carried into Redis's count by
// the first decision Redis answers after the outage: Redis then knows every
// admission of the window, instead of learning of them only when the
// window ends.
func TestFailLocalRecoveryCarriesTheFixedWindowDebt(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	// A day's window, so that the test runs inside one (it waits out the
	// last seconds of a day rather than straddle two windows).
	lim := shaper.Limit{Rate: shaper.Rate{Count: 20, Period: 24 * time.Hour}}
	if left := time.Until(time.Now().Truncate(24 * time.Hour).Add(24 * time.Hour)); left < 10*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
	m, brk := failLocalMeterOf(t, shaperredis.NewFixedWindow, proxy, "fwcarry:", lim, lim) // one process: its share is the limit
	ctx := context.Background()
	if got, deg := spend(t, m, "k", 3); got != 3 || deg != 0 {
		t.Fatalf("healthy: %d admitted (%d degraded), want 3 from Redis", got, deg)
	}
	proxy.Drop()
	if got, deg := spend(t, m, "k", 12); got != 12 || deg != 12 {
		t.Fatalf("outage: the local share admitted %d (%d degraded), want 12 of the 17 left", got, deg)
	}
	proxy.Heal()
	floodgatetest.Eventually(t, 5*time.Second, "the breaker closed by its probe", func() bool {
		m.AllowN(ctx, "other", 0) // a peek lets the breaker probe
		return brk.State() == breaker.StateClosed
	})
	d, err := m.AllowN(ctx, "k", 1)
	if err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("first decision after the outage: %+v, %v; want admitted by Redis", d, err)
	}
	if st := m.Stats(); st.Carried != 12 {
		t.Errorf("Stats().Carried = %d, want the 12 the share admitted in this window", st.Carried)
	}
	// Redis counts the window's 3 + 12 + 1: 4 left (16 without the carry).
	if rem := peekRedisOf(t, shaperredis.NewFixedWindow, srv.Addr, lim, "fwcarry:", "k"); rem != 4 {
		t.Errorf("Redis's remaining for the window after the carry: %d, want 4 (20 - 3 - 12 carried - 1)", rem)
	}
	// The share and Redis agree: 4 more are admitted, by both, then none.
	if got, deg := spend(t, m, "k", 10); got != 4 || deg != 0 {
		t.Errorf("after the carry: %d admitted (%d degraded), want the 4 Redis has left", got, deg)
	}
}

// peekRedis returns what Redis says remains for key, through a meter of its
// own on a direct client (no proxy, no local share).
func peekRedis(t *testing.T, addr string, lim shaper.Limit, prefix, key string) int64 {
	return peekRedisOf(t, shaperredis.NewMeter, addr, lim, prefix, key)
}

// peekRedisOf is peekRedis for the algorithm newMeter makes.
func peekRedisOf(t *testing.T, newMeter newMeterFunc, addr string, lim shaper.Limit, prefix, key string) int64 {
	c := redis.NewClient(redistest.Options(addr))
	defer c.Close()
	m := newMeter(c, lim, shaperredis.Config{Prefix: prefix})
	d, err := m.AllowN(context.Background(), key, 0)
	if err != nil || d.Degraded {
		t.Fatalf("peek: %+v, %v", d, err)
	}
	return d.Remaining
}
