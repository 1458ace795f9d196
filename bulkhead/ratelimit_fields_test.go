package bulkhead_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/shaper"
)

// rlItem is one member of a RateLimit or RateLimit-Policy field.
type rlItem struct {
	name    string
	q, w    int64 // policy
	r, t    int64 // current
	hasR    bool
	hasQ    bool
	rawItem string
}

// parseRateLimit parses the draft's List syntax as far as bulkhead writes
// it: "name";k=v;k=v, … with integer values.
func parseRateLimit(t *testing.T, field string) map[string]rlItem {
	t.Helper()
	items := map[string]rlItem{}
	if field == "" {
		return items
	}
	for _, member := range strings.Split(field, ", ") {
		parts := strings.Split(member, ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil {
			t.Fatalf("item %q: name %v", member, err)
		}
		it := rlItem{name: name, rawItem: member}
		for _, p := range parts[1:] {
			k, v, ok := strings.Cut(p, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				t.Fatalf("item %q: parameter %q", member, p)
			}
			switch k {
			case "q":
				it.q, it.hasQ = n, true
			case "w":
				it.w = n
			case "r":
				it.r, it.hasR = n, true
			case "t":
				it.t = n
			}
		}
		items[name] = it
	}
	return items
}

// TestRateLimitPolicyHonest: RateLimit-Policy never advertises more than
// the layer enforces: q requests (the layer's N units each) per w seconds,
// q at most what is admitted at once, q/w at most the rate.
func TestRateLimitPolicyHonest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  shaper.Limit
		n      int64
		policy string
	}{
		{"burst above count", shaper.Limit{Rate: shaper.PerSecond(2), Burst: 4}, 1, `"l";q=2;w=1`},
		{"burst below count", shaper.Limit{Rate: shaper.PerMinute(100), Burst: 10}, 1, `"l";q=10;w=6`},
		{"default burst", shaper.Limit{Rate: shaper.PerMinute(5)}, 1, `"l";q=5;w=60`},
		{"cost 2", shaper.Limit{Rate: shaper.PerMinute(10)}, 2, `"l";q=5;w=60`},
		{"cost 3, uneven", shaper.Limit{Rate: shaper.PerMinute(10)}, 3, `"l";q=3;w=54`},
		{"period not whole seconds", shaper.Limit{Rate: shaper.Rate{Count: 3, Period: 1500 * time.Millisecond}}, 1, `"l";q=3;w=2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: []bulkhead.Layer{
				{Name: "l", Key: bulkhead.ByTenant, N: tc.n, Rate: shaper.NewMeter(tc.limit)},
			}})
			w := serveAs(b, "a")
			if got := w.Header().Get("RateLimit-Policy"); got != tc.policy {
				t.Errorf("%v, N %d: RateLimit-Policy = %s, want %s", tc.limit, tc.n, got, tc.policy)
			}
		})
	}
}

// serveAs serves GET / for tenant through b to a no-op handler.
func serveAs(b *bulkhead.Bulkhead, tenant string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: tenant}))
	w := httptest.NewRecorder()
	b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
	return w
}

// TestRateLimitRefusalAgreesWithRetryAfter: on a refusal, the refusing
// layer's item says r=0 and t equal to Retry-After (draft §6); the other
// layers keep their own values; and waiting t seconds is enough.
func TestRateLimitRefusalAgreesWithRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: []bulkhead.Layer{
			{Name: "tier", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)})},
			{Name: "export", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(6)})},
		}})
		for range 6 {
			serveAs(b, "a")
		}
		w := serveAs(b, "a")
		if w.Code != 429 {
			t.Fatalf("7th request: %d, want 429", w.Code)
		}
		ra, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
		items := parseRateLimit(t, w.Header().Get("RateLimit"))
		if ex := items["export"]; ex.r != 0 || ex.t != ra {
			t.Errorf("RateLimit = %s beside Retry-After %d: want export r=0;t=%d", w.Header().Get("RateLimit"), ra, ra)
		}
		if tier := items["tier"]; tier.r != 93 || tier.t != 5 {
			t.Errorf("RateLimit = %s: want tier r=93;t=5 (7 of 100/min spent)", w.Header().Get("RateLimit"))
		}
		time.Sleep(time.Duration(ra) * time.Second)
		if w := serveAs(b, "a"); w.Code != 200 {
			t.Errorf("after waiting t=%ds: %d, want 200", ra, w.Code)
		}
	})
}

// TestRateLimitRemainingHonest: on success, r is at most q, in requests of
// the layer's N units, and that many more requests at once are admitted.
func TestRateLimitRemainingHonest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit shaper.Limit
		n     int64
	}{
		{"burst above count", shaper.Limit{Rate: shaper.PerSecond(2), Burst: 4}, 1},
		{"cost 2", shaper.Limit{Rate: shaper.PerMinute(10)}, 2},
		{"cost 3", shaper.Limit{Rate: shaper.PerMinute(10), Burst: 20}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: []bulkhead.Layer{
					{Name: "l", Key: bulkhead.ByTenant, N: tc.n, Rate: shaper.NewMeter(tc.limit)},
				}})
				w := serveAs(b, "a")
				pol := parseRateLimit(t, w.Header().Get("RateLimit-Policy"))["l"]
				cur := parseRateLimit(t, w.Header().Get("RateLimit"))["l"]
				if cur.r > pol.q {
					t.Errorf("RateLimit %s beside RateLimit-Policy %s: r above q", cur.rawItem, pol.rawItem)
				}
				for i := range cur.r {
					if w := serveAs(b, "a"); w.Code != 200 {
						t.Fatalf("request %d of the r=%d advertised: %d", i+1, cur.r, w.Code)
					}
				}
			})
		})
	}
}

// TestRateLimitLiteralClient: a client that follows the fields literally
// never gets a 429, for limits with the burst above and below the count, a
// cost above 1, and several layers at once. It keeps, per item, the
// remaining r and the instant of the reset t; past the reset it counts on
// the policy's q; it sends while every item has some left (several requests
// at one instant, reading only the last answer), and otherwise sleeps until
// the exhausted items reset. A second client keeps only the policy: at most
// q requests in any w seconds.
func TestRateLimitLiteralClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers func() []bulkhead.Layer
	}{
		{"burst above count", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(2), Burst: 4})}}
		}},
		{"burst below count", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100), Burst: 10})}}
		}},
		{"cost 2", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, N: 2, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(10)})}}
		}},
		{"two layers", func() []bulkhead.Layer {
			return []bulkhead.Layer{
				{Name: "tier", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(3), Burst: 9})},
				{Name: "route", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(30), Burst: 5})},
			}
		}},
		{"token bucket", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerSecond(2), Burst: 5})}}
		}},
		{"fixed window", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerSecond(4)})}}
		}},
		{"sliding counter", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewSlidingCounter(shaper.Limit{Rate: shaper.PerSecond(4)})}}
		}},
		{"sliding log", func() []bulkhead.Layer {
			return []bulkhead.Layer{{Name: "l", Key: bulkhead.ByTenant, Rate: shaper.NewSlidingLog(shaper.Limit{Rate: shaper.PerSecond(4)})}}
		}},
	} {
		t.Run(tc.name+"/fields", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: tc.layers()})
				literalClient(t, b, rand.New(rand.NewPCG(1, 2)))
			})
		})
		t.Run(tc.name+"/policy", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: tc.layers()})
				span := int64(1)
				if tc.name == "sliding counter" {
					// Its estimate weighs the previous window: q in any
					// w can be refused, q in any 2w cannot.
					span = 2
				}
				policyClient(t, b, span, rand.New(rand.NewPCG(3, 4)))
			})
		})
	}
}

func literalClient(t *testing.T, b *bulkhead.Bulkhead, rnd *rand.Rand) {
	type belief struct {
		left    int64
		resetAt time.Time
	}
	beliefs := map[string]*belief{}
	policy := map[string]int64{}
	sent, refused := 0, 0
	end := time.Now().Add(10 * time.Minute)
	for time.Now().Before(end) {
		now := time.Now()
		k := int64(1 + rnd.IntN(4)) // how many it would like to send now
		var wake time.Time
		for name, bl := range beliefs {
			if !now.Before(bl.resetAt) {
				bl.left = policy[name]
			}
			if bl.left == 0 && bl.resetAt.After(wake) {
				wake = bl.resetAt
			}
			k = min(k, bl.left)
		}
		if k == 0 {
			time.Sleep(wake.Sub(now))
			continue
		}
		var w *httptest.ResponseRecorder
		for range k {
			w = serveAs(b, "a")
			sent++
			if w.Code != 200 {
				refused++
				t.Errorf("after %v, request %d: %d (Retry-After %s, RateLimit %s, RateLimit-Policy %s)",
					time.Since(end.Add(-10*time.Minute)), sent, w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"))
			}
			for _, bl := range beliefs {
				bl.left--
			}
		}
		if refused > 3 {
			t.FailNow()
		}
		for name, it := range parseRateLimit(t, w.Header().Get("RateLimit-Policy")) {
			policy[name] = it.q
		}
		for name, it := range parseRateLimit(t, w.Header().Get("RateLimit")) {
			beliefs[name] = &belief{left: it.r, resetAt: time.Now().Add(time.Duration(it.t) * time.Second)}
		}
		if rnd.IntN(3) == 0 {
			time.Sleep(time.Duration(rnd.IntN(3000)) * time.Millisecond)
		}
	}
	t.Logf("%d requests in 10 minutes", sent)
}

// policyClient sends at most q requests in any span·w seconds, for every
// item of RateLimit-Policy.
func policyClient(t *testing.T, b *bulkhead.Bulkhead, span int64, rnd *rand.Rand) {
	w := serveAs(b, "a")
	policy := parseRateLimit(t, w.Header().Get("RateLimit-Policy"))
	sentAt := []time.Time{time.Now()}
	start := time.Now()
	refused := 0
	for time.Since(start) < 10*time.Minute {
		now := time.Now()
		// The earliest instant a request keeps every item's promise.
		next := now
		for _, it := range policy {
			win := time.Duration(span*it.w) * time.Second
			if n := int64(len(sentAt)); n >= it.q {
				if at := sentAt[n-it.q].Add(win); at.After(next) {
					next = at
				}
			}
		}
		if next.After(now) {
			time.Sleep(next.Sub(now))
		}
		if w := serveAs(b, "a"); w.Code != 200 {
			refused++
			t.Errorf("after %v, request %d: %d (policy %s)", time.Since(start), len(sentAt)+1, w.Code, w.Header().Get("RateLimit-Policy"))
			if refused > 3 {
				t.FailNow()
			}
		}
		sentAt = append(sentAt, time.Now())
		if rnd.IntN(4) == 0 {
			time.Sleep(time.Duration(rnd.IntN(2000)) * time.Millisecond)
		}
	}
	t.Logf("%d requests in 10 minutes", len(sentAt))
}

// TestRateLimitStoreDown: a layer whose store could not be asked has no
// item (its decision carries no limit: "q=0;w=0" and "r=0;t=0" beside a
// Retry-After would be made up); the layers before it keep theirs.
func TestRateLimitStoreDown(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: []bulkhead.Layer{
		{Name: "tier", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)})},
		{Name: "fleet", Key: bulkhead.ByTenant, Rate: fakeRate{&breaker.OpenError{Name: "redis", State: breaker.StateOpen, Delay: 3 * time.Second}}},
	}})
	w := serveAs(b, "a")
	if w.Code != 503 || w.Header().Get("Retry-After") != "3" {
		t.Fatalf("got %d Retry-After %q, want 503, 3", w.Code, w.Header().Get("Retry-After"))
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"tier";q=100;w=60`; got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"tier";r=99;t=1`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
}
