package bulkhead_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// seed is the seed's scenario: three tenants on two tiers (free 100/min, gold
// 1000/min), GET /items (5000/min over all tenants) and POST
// /reports/export-pdf (5/min and 2 at once per tenant), a global cap.
type seed struct {
	b       *bulkhead.Bulkhead
	global  *semaphore.Weighted
	items   *shaper.Meter
	tier    map[string]*shaper.Meter
	exports *semaphore.Keyed
	block   chan struct{} // handlers called with ?block=1 wait for it
	entered chan struct{} // and say they started
	ids     map[string]bulkhead.Identity
}

const globalCap = 4

func newSeed(cfg bulkhead.Config) *seed {
	s := &seed{
		global:  semaphore.New(globalCap, semaphore.Config{}),
		items:   shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5000)}),
		exports: semaphore.NewKeyed(2, semaphore.KeyedConfig{}),
		tier: map[string]*shaper.Meter{
			"free": shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)}),
			"gold": shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1000)}),
		},
		block:   make(chan struct{}),
		entered: make(chan struct{}, 16),
		ids: map[string]bulkhead.Identity{
			"tok-acme": {Tenant: "acme", Tier: "free", Subject: "u1"},
			"tok-beta": {Tenant: "beta", Tier: "free", Subject: "u2"},
			"tok-gold": {Tenant: "goldco", Tier: "gold", Subject: "u3"},
		},
	}
	cfg.Layers = []bulkhead.Layer{
		{Name: "global", Gate: s.global, MaxWait: -1},
		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"free": s.tier["free"], "gold": s.tier["gold"]}},
		{Name: "items", Route: "GET /items", Rate: s.items},
		{Name: "export-rate", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant,
			Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)})},
		{Name: "export-conc", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant, KeyedGate: s.exports, MaxWait: -1},
	}
	s.b = bulkhead.New(cfg)
	return s
}

func (s *seed) handler() http.Handler {
	mux := http.NewServeMux()
	work := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("block") != "" {
			s.entered <- struct{}{}
			select {
			case <-s.block:
			case <-r.Context().Done():
			}
		}
		w.Write([]byte("ok"))
	}
	mux.HandleFunc("GET /items", work)
	mux.HandleFunc("POST /reports/export-pdf", work)
	mux.HandleFunc("GET /health", work)
	return auth(s.ids, s.b.Handler(mux))
}

const base = "http://floodgate.test"

// wantReject checks a rejection's status, Retry-After and body.
func wantReject(t *testing.T, rp reply, status, retry int, code string) {
	t.Helper()
	if rp.status != status || rp.retryAfter != retry || rp.body.Error != code {
		t.Fatalf("got %d Retry-After %d body %s; want %d Retry-After %d error %q", rp.status, rp.retryAfter, rp.raw, status, retry, code)
	}
	if retry > 0 && rp.body.RetryAfterSeconds != retry {
		t.Fatalf("body retry_after_seconds %d, want %d (the Retry-After)", rp.body.RetryAfterSeconds, retry)
	}
	if ct := rp.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
}

// TestSeedScenario: each layer rejects exactly its own share, with its status,
// Retry-After and body, over a real http.Server and http.Client.
func TestSeedScenario(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSeed(bulkhead.Config{})
		c := pipeServer(t, s.handler())

		// Tier: acme (free, 100/min) sends 110: 100 pass, 10 refused by "tier".
		for i := range 110 {
			rp := mustCall(t, c, base, "GET", "/items", "tok-acme")
			if i < 100 && rp.status != 200 {
				t.Fatalf("acme request %d: %d %s, want 200", i, rp.status, rp.raw)
			}
			if i >= 100 {
				wantReject(t, rp, 429, 1, "limited") // 600 ms to the next slot
			}
		}

		// Global cap: goldco holds all 4 slots; the fifth request (any tenant)
		// gets 503 from "global" at once.
		var wg sync.WaitGroup
		for range globalCap {
			wg.Go(func() {
				if rp := mustCall(t, c, base, "GET", "/items?block=1", "tok-gold"); rp.status != 200 {
					t.Errorf("blocked request: %d", rp.status)
				}
			})
		}
		for range globalCap {
			<-s.entered
		}
		wantReject(t, mustCall(t, c, base, "GET", "/items", "tok-beta"), 503, 1, "no_capacity")
		close(s.block)
		wg.Wait()
		s.block = make(chan struct{})

		// Items (5000/min over every tenant): others used all but 10 of it;
		// goldco sends 20: 10 pass, 10 refused by "items" with 503 (an unkeyed
		// layer: global saturation).
		if _, err := s.items.AllowN("", 4990-(100+globalCap)); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			rp := mustCall(t, c, base, "GET", "/items", "tok-gold")
			if i < 10 && rp.status != 200 {
				t.Fatalf("goldco request %d: %d %s, want 200", i, rp.status, rp.raw)
			}
			if i >= 10 {
				wantReject(t, rp, 503, 1, "limited") // 12 ms to the next slot
			}
		}

		// Export rate: beta sends 7 exports: 5 pass, 2 refused by
		// "export-rate" with Retry-After 12 (one every 12 s).
		for i := range 7 {
			rp := mustCall(t, c, base, "POST", "/reports/export-pdf", "tok-beta")
			if i < 5 && rp.status != 200 {
				t.Fatalf("beta export %d: %d %s, want 200", i, rp.status, rp.raw)
			}
			if i >= 5 {
				wantReject(t, rp, 429, 12, "limited")
			}
		}

		// Export concurrency: goldco runs 2 exports; a third is refused by
		// "export-conc" at once; another tenant is not affected.
		for range 2 {
			wg.Go(func() {
				if rp := mustCall(t, c, base, "POST", "/reports/export-pdf?block=1", "tok-gold"); rp.status != 200 {
					t.Errorf("blocked export: %d", rp.status)
				}
			})
		}
		<-s.entered
		<-s.entered
		wantReject(t, mustCall(t, c, base, "POST", "/reports/export-pdf", "tok-gold"), 429, 1, "no_capacity")
		if rp := mustCall(t, c, base, "POST", "/reports/export-pdf", "tok-acme"); rp.status != 429 || rp.retryAfter != 1 {
			// acme's tier quota is spent (10 refused above kept nothing back)
			t.Fatalf("acme export: %d Retry-After %d, want 429 from its tier", rp.status, rp.retryAfter)
		}
		close(s.block)
		wg.Wait()

		want := map[string][2]uint64{ // layer: {limited, no capacity}
			"global":      {0, 1},
			"tier":        {11, 0},
			"items":       {10, 0},
			"export-rate": {2, 0},
			"export-conc": {0, 1},
		}
		for name, w := range want {
			ls := layerStats(t, s.b, name)
			if ls.Limited != w[0] || ls.NoCapacity != w[1] || ls.Unavailable != 0 || ls.Errors != 0 || ls.InFlight != 0 || ls.Waiting != 0 {
				t.Errorf("layer %s: %+v, want Limited %d, NoCapacity %d, nothing else, nothing held", name, ls, w[0], w[1])
			}
		}
		if st := s.exports.Stats(); st.Keys != 0 || st.InUse != 0 {
			t.Errorf("keyed gate after the scenario: %+v, want empty", st)
		}
		if st := s.global.Stats(); st.InUse != 0 {
			t.Errorf("global gate after the scenario: InUse %d, want 0", st.InUse)
		}
	})
}

// TestHonestRetryAfter: a client that sleeps Retry-After and retries is
// admitted, for the tier rate and for the export rate.
func TestHonestRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSeed(bulkhead.Config{})
		c := pipeServer(t, s.handler())
		for _, tc := range []struct {
			method, path, token string
			n                   int
		}{
			{"GET", "/items", "tok-acme", 250},
			{"POST", "/reports/export-pdf", "tok-beta", 12},
		} {
			admitted, refused := 0, 0
			for range tc.n {
				rp := mustCall(t, c, base, tc.method, tc.path, tc.token)
				if rp.status == 200 {
					admitted++
					continue
				}
				refused++
				if rp.status != 429 || rp.retryAfter < 1 {
					t.Fatalf("%s %s: %d Retry-After %d, want 429 with a delay", tc.method, tc.path, rp.status, rp.retryAfter)
				}
				time.Sleep(time.Duration(rp.retryAfter) * time.Second)
				if rp := mustCall(t, c, base, tc.method, tc.path, tc.token); rp.status != 200 {
					t.Fatalf("%s %s after sleeping Retry-After %ds: %d %s, want 200", tc.method, tc.path, rp.retryAfter, rp.status, rp.raw)
				}
				admitted++
			}
			if refused == 0 {
				t.Errorf("%s %s: never refused, the test proves nothing", tc.method, tc.path)
			}
		}
	})
}

// TestRateGivenBackOnLaterRefusal: a request refused by a later layer gets
// back the rate quota an earlier layer took, and its gates. (Until issue 19
// this test asserted the opposite, that the quota stayed spent.)
func TestRateGivenBackOnLaterRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSeed(bulkhead.Config{})
		c := pipeServer(t, s.handler())
		for range 7 { // 5 admitted, 2 refused by export-rate (after tier)
			mustCall(t, c, base, "POST", "/reports/export-pdf", "tok-beta")
		}
		d, err := s.tier["free"].AllowN("beta", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Remaining != 100-5 {
			t.Errorf("beta's tier quota after 5 admitted and 2 refused later: remaining %d, want %d (refused requests spend nothing)", d.Remaining, 100-5)
		}
		if ls := layerStats(t, s.b, "tier"); ls.Refunds != 2 || ls.RefundErrors != 0 {
			t.Errorf("tier layer: %d refunds, %d refund errors, want 2 and 0", ls.Refunds, ls.RefundErrors)
		}
		if st := s.global.Stats(); st.InUse != 0 {
			t.Errorf("global gate InUse %d after refusals, want 0 (gates are given back)", st.InUse)
		}
		if ls := layerStats(t, s.b, "global"); ls.Admitted != 7 || ls.InFlight != 0 {
			t.Errorf("global layer: %+v, want 7 admitted, none in flight", ls)
		}
	})
}

var _ = context.Background
