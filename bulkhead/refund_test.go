package bulkhead_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// A refusal must never charge a quota: whatever step refuses a request after
// a Rate admitted it, that Rate is given back what it charged. These tests
// run through Do with in-process meters; redis_refund_test.go runs the same
// through real Redis meters.

// peek returns a local meter's remaining quota for key without spending any.
func peek(t *testing.T, m interface {
	AllowN(string, int64) (shaper.Decision, error)
}, key string) int64 {
	t.Helper()
	d, err := m.AllowN(key, 0)
	if err != nil {
		t.Fatalf("AllowN(%q, 0): %v", key, err)
	}
	return d.Remaining
}

// ownKeyed is a KeyedGate of the application's own, over semaphore.Keyed,
// whose refusal is its own error in a *RejectError: bulkhead must treat it as
// any gate's.
type ownKeyed struct{ k *semaphore.Keyed }

func (g ownKeyed) Hold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	return g.k.Hold(ctx, key, n)
}

var errNoRoom = errors.New("no room")

func (g ownKeyed) TryHold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	if !g.k.TryAcquire(key, n) {
		return floodgate.Held{}, &bulkhead.RejectError{Reason: floodgate.ReasonNoCapacity, Err: errNoRoom, Delay: time.Second}
	}
	return floodgate.NewHeld(ctx, g.k.Release, key, n), nil
}

// TestRefundOnKeyedGateRefusal is the README's job 3 in one process: a tier
// quota, then the export layer (5/min, then 2 at once per tenant, never
// queued). Three exports at once: two run, the third is refused by the
// KeyedGate; then exports one after the other pass until the 5/min is spent.
// Five in all must pass (the refused one spent nothing), and the tier quota
// must be charged for exactly the five served. With semaphore.Keyed, and
// with a KeyedGate of the application's own (ownKeyed).
func TestRefundOnKeyedGateRefusal(t *testing.T) {
	for _, shape := range []string{"semaphore.Keyed", "own"} {
		t.Run(shape, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tier := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)})
				export := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)})
				sk := semaphore.NewKeyed(2, semaphore.KeyedConfig{})
				var gate floodgate.KeyedGate = sk
				if shape == "own" {
					gate = ownKeyed{sk}
				}
				b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
					{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"free": tier}},
					{Name: "export", Key: bulkhead.ByTenant, Rate: export, KeyedGate: gate, MaxWait: -1},
				}})
				ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u", Tier: "free"})
				release := make(chan struct{})
				running := make(chan struct{}, 2)
				errs := make(chan error, 2)
				for range 2 {
					go func() {
						errs <- b.Do(ctx, bulkhead.Request{}, func(context.Context) error {
							running <- struct{}{}
							<-release
							return nil
						})
					}()
				}
				<-running
				<-running
				err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
				var re *bulkhead.RejectError
				if !errors.As(err, &re) || re.Reason != floodgate.ReasonNoCapacity || re.Layer != "export" {
					t.Fatalf("third export at once: %v, want a concurrency refusal by the export layer", err)
				}
				close(release)
				for range 2 {
					if err := <-errs; err != nil {
						t.Fatalf("export held at once: %v", err)
					}
				}
				passed := 2
				for range 5 {
					if err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil }); err != nil {
						break
					}
					passed++
				}
				if passed != 5 {
					t.Errorf("%d exports passed in all, want 5 (5/min; the refused one spends no quota)", passed)
				}
				if r := peek(t, tier, "acme"); r != 95 {
					t.Errorf("tier quota after 5 exports served and 2 refused: %d remaining, want 95", r)
				}
			})
		})
	}
}

// TestRefundOnGlobalGateFull: a per-tenant rate placed before a global gate
// that is full (MaxWait -1): the refusal (concurrency, 429) leaves the
// tenant's quota as it was, however many times the client tries.
func TestRefundOnGlobalGateFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate := shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerMinute(10)})
		global := semaphore.NewWeighted(1)
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "tenant", Key: bulkhead.ByTenant, Rate: rate},
			{Name: "global", Gate: global, MaxWait: -1},
		}})
		if !global.TryAcquire(1) {
			t.Fatal("TryAcquire on a fresh gate failed")
		}
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
		for i := range 20 {
			err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
			if re, ok := errors.AsType[*bulkhead.RejectError](err); !ok || re.Layer != "global" {
				t.Fatalf("request %d with the global gate full: %v, want a refusal by the global layer", i, err)
			}
		}
		if r := peek(t, rate, "acme"); r != 10 {
			t.Errorf("tenant quota after 20 refusals by a full global gate: %d remaining, want 10", r)
		}
		global.Release(1)
		if err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("request with room: %v", err)
		}
		if r := peek(t, rate, "acme"); r != 9 {
			t.Errorf("tenant quota after one request served: %d remaining, want 9", r)
		}
	})
}

// TestRefundOnLaterRateRefusal: a later rate's denial gives the earlier rate
// its charge back, for each window algorithm in the earlier layer.
func TestRefundOnLaterRateRefusal(t *testing.T) {
	type meter interface {
		bulkhead.Rate
		AllowN(string, int64) (shaper.Decision, error)
	}
	lim := shaper.Limit{Rate: shaper.PerMinute(10)}
	for name, first := range map[string]meter{
		"Meter":          shaper.NewMeter(lim),
		"TokenBucket":    shaper.NewTokenBucket(lim),
		"FixedWindow":    shaper.NewFixedWindow(lim),
		"SlidingLog":     shaper.NewSlidingLog(lim),
		"SlidingCounter": shaper.NewSlidingCounter(lim),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// synctest's clock starts at midnight: every window meter is
				// at the start of a window, which the test does not leave.
				second := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1)})
				b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
					{Name: "first", Key: bulkhead.ByTenant, Rate: first},
					{Name: "second", Key: bulkhead.ByTenant, Rate: second},
				}})
				ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
				for i := range 6 {
					time.Sleep(time.Second) // so that the log has entries at several times
					err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
					if i == 0 && err != nil {
						t.Fatalf("first request: %v", err)
					}
					if re, ok := errors.AsType[*bulkhead.RejectError](err); i > 0 && (!ok || re.Layer != "second" || re.Reason != floodgate.ReasonLimited) {
						t.Fatalf("request %d: %v, want a denial by the second layer", i, err)
					}
				}
				if r := peek(t, first, "acme"); r != 9 {
					t.Errorf("first layer's quota after 1 served and 5 refused by the second: %d remaining, want 9", r)
				}
			})
		})
	}
}

// TestRefundOnLaterStoreUnavailable: the later layer is a real shaperredis
// meter whose Redis refuses connections, under FailClosed: every request is
// a 503 (ReasonUnavailable), and the earlier local rate keeps its quota.
func TestRefundOnLaterStoreUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	dead := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerMinute(100)}, shaperredis.Config{
		Policy: breaker.FailClosed, Breaker: breaker.New("dead", breaker.Config{Logger: slog.New(slog.DiscardHandler)})})
	first := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(10)})
	checkRefundOnLaterStoreUnavailable(t, first, dead, func() int64 { return peek(t, first, "acme") })
}

// checkRefundOnLaterStoreUnavailable sends 12 requests through first (a rate
// of 10 per hour) then dead (a rate whose store is down, FailClosed): each
// must be a 503 of the fleet layer, and first must keep all 10 (remaining
// reads it).
func checkRefundOnLaterStoreUnavailable(t *testing.T, first, dead bulkhead.Rate, remaining func() int64) {
	t.Helper()
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "first", Key: bulkhead.ByTenant, Rate: first},
		{Name: "fleet", Key: bulkhead.ByTenant, Rate: dead},
	}})
	ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
	for i := range 12 {
		err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
		if re, ok := errors.AsType[*bulkhead.RejectError](err); !ok || re.Reason != floodgate.ReasonUnavailable || re.Layer != "fleet" {
			t.Fatalf("request %d with the fleet store down: %v, want ReasonUnavailable from the fleet layer", i, err)
		}
	}
	if r := remaining(); r != 10 {
		t.Errorf("first layer's quota after 12 refusals by an unavailable store: %d remaining, want 10", r)
	}
}

// TestRefundNotAfterServed: a request that was served is never refunded,
// whatever fn returns (a failure of the work is service rendered), and a
// refusal refunds each layer exactly once.
func TestRefundNotAfterServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(10)})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "tenant", Key: bulkhead.ByTenant, Rate: rate},
		}})
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
		for range 3 {
			if err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return errBoom }); !errors.Is(err, errBoom) {
				t.Fatalf("Do = %v, want fn's error", err)
			}
		}
		if r := peek(t, rate, "acme"); r != 7 {
			t.Errorf("quota after 3 requests served (fn failed): %d remaining, want 7", r)
		}
	})
}
