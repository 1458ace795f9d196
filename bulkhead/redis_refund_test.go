package bulkhead_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// The refund tests of refund_test.go through real Redis: shaperredis meters
// and distsem gates.

func quietBreaker(name string) *breaker.Breaker {
	return breaker.New(name, breaker.Config{CallTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
}

// TestRedisRefundOnKeyedGateRefusal is the README's job 3 on Redis, through
// the HTTP handler: three exports at once for one tenant (two run, the third
// is refused by the distsem.Keyed, never queued), then exports one after the
// other until the 5/min is spent: five pass in all, and the tier quota is
// charged for the five served only.
func TestRedisRefundOnKeyedGateRefusal(t *testing.T) {
	db := redistest.Connect(t)
	brk := quietBreaker(db.Key("redis"))
	tier := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(100)}, shaperredis.Config{Prefix: db.Key("free:"), Breaker: brk})
	export := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(5)}, shaperredis.Config{Prefix: db.Key("export:"), Breaker: brk})
	keyed := distsem.NewKeyed(db.Client, db.Key("export-gate:"), 2, distsem.KeyedConfig{Config: distsem.Config{Breaker: brk, WaiterTTL: 6 * time.Second}})
	t.Cleanup(func() { keyed.Close() })
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"free": tier}},
		{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant, MaxWait: -1, Rate: export, KeyedGate: keyed},
	}})
	var hold sync.WaitGroup // the first two exports run until released
	release := make(chan struct{})
	var once sync.Once
	running := make(chan struct{}, 2)
	holding := true
	var mu sync.Mutex
	inner := b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := holding
		mu.Unlock()
		if h {
			running <- struct{}{}
			<-release
		}
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := cutBearer(r); ok {
			r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: tok, Subject: tok, Tier: "free"}))
		}
		inner.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = discardLogger()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	codes := make(chan int, 2)
	for range 2 {
		hold.Go(func() {
			rp, err := call(t, context.Background(), srv.Client(), srv.URL, "POST", "/reports/export-pdf", "acme")
			if err != nil {
				t.Error(err)
			}
			codes <- rp.status
		})
	}
	<-running
	<-running
	if rp := mustCall(t, srv.Client(), srv.URL, "POST", "/reports/export-pdf", "acme"); rp.status != http.StatusTooManyRequests {
		t.Fatalf("third export at once: %d, want 429", rp.status)
	}
	mu.Lock()
	holding = false
	mu.Unlock()
	once.Do(func() { close(release) })
	hold.Wait()
	for range 2 {
		if c := <-codes; c != 200 {
			t.Fatalf("export held at once: %d, want 200", c)
		}
	}
	passed := 2
	for range 5 {
		if rp := mustCall(t, srv.Client(), srv.URL, "POST", "/reports/export-pdf", "acme"); rp.status != 200 {
			break
		}
		passed++
	}
	if passed != 5 {
		t.Errorf("%d exports passed in all, want 5 (5/min; the refused one spends no quota)", passed)
	}
	if r := remaining(t, tier, "acme"); r != 95 {
		t.Errorf("tier quota after 5 exports served and 2 refused: %d remaining, want 95", r)
	}
}

// TestRedisRefundOnGlobalGateFull: a per-tenant Redis rate before a full
// distsem gate (MaxWait -1): every refusal leaves the tenant's quota whole.
func TestRedisRefundOnGlobalGateFull(t *testing.T) {
	db := redistest.Connect(t)
	brk := quietBreaker(db.Key("redis"))
	rate := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(10)}, shaperredis.Config{Prefix: db.Key("tenant:"), Breaker: brk})
	global := distsem.New(db.Client, db.Key("global"), 1, distsem.Config{Breaker: brk, WaiterTTL: 6 * time.Second})
	t.Cleanup(func() { global.Close() })
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: rate},
		{Name: "global", Gate: global, MaxWait: -1},
	}})
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- global.Do(context.Background(), 1, func(context.Context) error { close(held); <-release; return nil })
	}()
	<-held
	ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
	for i := range 12 {
		err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
		if re, ok := errors.AsType[*bulkhead.RejectError](err); !ok || re.Layer != "global" {
			t.Fatalf("request %d with the global gate full: %v, want a refusal by the global layer", i, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := remaining(t, rate, "acme"); r != 10 {
		t.Errorf("tenant quota after 12 refusals by a full global gate: %d remaining, want 10", r)
	}
	if ls := layerStats(t, b, "tenant"); ls.Refunds != 12 || ls.RefundErrors != 0 {
		t.Errorf("tenant layer: %d refunds, %d refund errors, want 12 and 0", ls.Refunds, ls.RefundErrors)
	}
}

// TestRedisRefundOnLaterStoreUnavailable: a Redis rate, then a Redis rate
// whose store refuses connections (FailClosed): every request is a 503 and
// the first rate keeps its quota.
func TestRedisRefundOnLaterStoreUnavailable(t *testing.T) {
	db := redistest.Connect(t)
	first := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(10)}, shaperredis.Config{Prefix: db.Key("first:"), Breaker: quietBreaker(db.Key("up"))})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	dead := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerHour(100)}, shaperredis.Config{Breaker: quietBreaker("dead")})
	checkRefundOnLaterStoreUnavailable(t, first, dead, func() int64 { return remaining(t, first, "acme") })
}

// TestRedisRefundOnLaterRateRefusal: a later Redis rate's denial gives the
// earlier Redis rate its charge back, for every algorithm.
func TestRedisRefundOnLaterRateRefusal(t *testing.T) {
	db := redistest.Connect(t)
	brk := quietBreaker(db.Key("redis"))
	lim := shaper.Limit{Rate: shaper.PerHour(10)}
	for _, tc := range []struct {
		name string
		m    *shaperredis.Meter
		want int64
	}{
		{"gcra", shaperredis.NewMeter(db.Client, lim, shaperredis.Config{Prefix: db.Key("g:"), Breaker: brk}), 9},
		{"tokenbucket", shaperredis.NewTokenBucket(db.Client, lim, shaperredis.Config{Prefix: db.Key("t:"), Breaker: brk}), 9},
		{"fixedwindow", shaperredis.NewFixedWindow(db.Client, lim, shaperredis.Config{Prefix: db.Key("f:"), Breaker: brk}), 9},
		{"slidinglog", shaperredis.NewSlidingLog(db.Client, lim, shaperredis.Config{Prefix: db.Key("l:"), Breaker: brk}), 9},
		{"slidingcounter", shaperredis.NewSlidingCounter(db.Client, lim, shaperredis.Config{Prefix: db.Key("c:"), Breaker: brk}), 9},
		{"slidinglog-batch", shaperredis.NewSlidingLog(db.Client, lim, shaperredis.Config{Prefix: db.Key("lb:"), Breaker: brk, Batch: true}), 9},
		{"fixedwindow-batch", shaperredis.NewFixedWindow(db.Client, lim, shaperredis.Config{Prefix: db.Key("fb:"), Breaker: brk, Batch: true}), 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(1)}, shaperredis.Config{Prefix: db.Key(tc.name + "-second:"), Breaker: brk})
			b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
				{Name: "first", Key: bulkhead.ByTenant, Rate: tc.m},
				{Name: "second", Key: bulkhead.ByTenant, Rate: second},
			}})
			ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"})
			for i := range 6 {
				err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
				if re, ok := errors.AsType[*bulkhead.RejectError](err); i > 0 && (!ok || re.Layer != "second") || i == 0 && err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			if r := remaining(t, tc.m, "acme"); r != tc.want {
				t.Errorf("first layer's quota after 1 served and 5 refused by the second: %d remaining, want %d", r, tc.want)
			}
			if ls := layerStats(t, b, "first"); ls.RefundErrors != 0 {
				t.Errorf("first layer: %d refund errors, want 0", ls.RefundErrors)
			}
		})
	}
}

// TestRedisRefundWhenCanceled: a request charged by a Redis rate, then
// waiting for a full gate, whose client goes away: Do returns ctx's error
// and the rate is refunded all the same (the refund does not inherit the
// cancellation).
func TestRedisRefundWhenCanceled(t *testing.T) {
	db := redistest.Connect(t)
	rate := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerHour(10)}, shaperredis.Config{Prefix: db.Key("tenant:"), Breaker: quietBreaker(db.Key("redis"))})
	gate := semaphore.NewWeighted(1)
	if !gate.TryAcquire(1) {
		t.Fatal("TryAcquire on a fresh gate failed")
	}
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, Rate: rate},
		{Name: "gate", Gate: gate, MaxWait: time.Minute},
	}})
	for i := range 3 {
		ctx, cancel := context.WithCancel(bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "acme", Subject: "u"}))
		done := make(chan error, 1)
		go func() { done <- b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil }) }()
		// Polled, but the outcome does not depend on when: canceled before
		// or during the wait, the request is refused after the rate charged.
		floodgatetest.Eventually(t, 5*time.Second, "the request waits for the gate", func() bool {
			return layerStats(t, b, "gate").Waiting == 1
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("request %d canceled while waiting: %v, want context.Canceled", i, err)
		}
	}
	if r := remaining(t, rate, "acme"); r != 10 {
		t.Errorf("tenant quota after 3 requests canceled while waiting: %d remaining, want 10", r)
	}
}
