package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// Every local leaf fits bulkhead's interfaces as it is.
var (
	_ bulkhead.Rate       = (*shaper.Meter)(nil)
	_ bulkhead.Rate       = (*shaper.Limiter)(nil)
	_ floodgate.Gate      = (*semaphore.Weighted)(nil)
	_ floodgate.KeyedGate = (*semaphore.Keyed)(nil)
)

func ok(context.Context) error { return nil }

// TestBadInput: each bad input has its documented outcome and charges nothing.
func TestBadInput(t *testing.T) {
	free := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(10)})
	g := semaphore.New(1, semaphore.Config{})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: g, MaxWait: -1},
		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"free": free}},
		{Name: "export", Route: "POST /export", Key: bulkhead.BySubject, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1)})},
	}})
	withID := func(id bulkhead.Identity) context.Context { return bulkhead.WithIdentity(t.Context(), id) }
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		req    bulkhead.Request
		want   error
		status int
	}{
		{"no identity", t.Context(), bulkhead.Request{}, bulkhead.ErrNoIdentity, 401},
		{"empty tenant", withID(bulkhead.Identity{Tier: "free"}), bulkhead.Request{}, bulkhead.ErrInvalidKey, 401},
		{"10 MB tenant", withID(bulkhead.Identity{Tenant: strings.Repeat("x", 10<<20), Tier: "free"}), bulkhead.Request{}, bulkhead.ErrInvalidKey, 401},
		{"empty subject on a later layer", withID(bulkhead.Identity{Tenant: "a", Tier: "free"}), bulkhead.Request{Method: "POST", Path: "/export"}, bulkhead.ErrInvalidKey, 401},
		{"unknown tier", withID(bulkhead.Identity{Tenant: "a", Tier: "platinum"}), bulkhead.Request{}, bulkhead.ErrNoPolicy, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			err := b.Do(tc.ctx, tc.req, func(context.Context) error { ran = true; return nil })
			var re *bulkhead.RejectError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Status != tc.status || ran {
				t.Fatalf("Do = %v (ran %v), want %v with status %d, fn not run", err, ran, tc.want, tc.status)
			}
			if re.RetryAfter() != 0 {
				t.Errorf("RetryAfter = %v, want 0: retrying cannot help", re.RetryAfter())
			}
			if len(re.Error()) > 200 {
				t.Errorf("error text is %d bytes long: a big key leaked into it", len(re.Error()))
			}
		})
	}
	// Nothing was charged.
	for _, ls := range b.Stats().Layers {
		if ls.Admitted != 0 || ls.Limited != 0 || ls.InFlight != 0 {
			t.Errorf("layer %s charged by refused input: %+v", ls.Name, ls)
		}
	}
	if d, _ := free.AllowN("a", 0); d.Remaining != 10 {
		t.Errorf("tier meter remaining %d for tenant a, want 10 (untouched)", d.Remaining)
	}
	if st := b.Stats(); st.NoIdentity != 1 || st.InvalidKey != 3 || st.NoPolicy != 1 {
		t.Errorf("Stats = %+v, want NoIdentity 1, InvalidKey 3, NoPolicy 1", st)
	}

	// A route with no policy: only the unrouted layers apply.
	ctx := withID(bulkhead.Identity{Tenant: "a", Tier: "free"})
	if err := b.Do(ctx, bulkhead.Request{Method: "GET", Path: "/no/policy"}, ok); err != nil {
		t.Errorf("Do on a route without a layer = %v, want nil (global layers only)", err)
	}
	if ls := layerStats(t, b, "export"); ls.Admitted != 0 {
		t.Errorf("export layer saw a request for another route: %+v", ls)
	}
	// No layer at all applies: passes, counted as unmatched.
	empty := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "x", Route: "/x", Rate: free}}})
	if err := empty.Do(ctx, bulkhead.Request{Path: "/y"}, ok); err != nil || empty.Stats().Unmatched != 1 {
		t.Errorf("Do matching no layer = %v, Unmatched %d; want nil, 1", err, empty.Stats().Unmatched)
	}

	// Zero N is 1; negative N and other programmer errors panic in New.
	one := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "r", Rate: shaper.NewLimiter(shaper.Limit{Rate: shaper.PerMinute(1)})}}})
	if err := one.Do(ctx, bulkhead.Request{}, ok); err != nil {
		t.Fatal(err)
	}
	if err := one.Do(ctx, bulkhead.Request{}, ok); !errors.Is(err, shaper.ErrLimited) {
		t.Errorf("second Do under 1/min with N 0 = %v, want ErrLimited (N 0 counts as 1)", err)
	}
	for name, cfg := range map[string]bulkhead.Layer{
		"negative N":     {Name: "n", Rate: free, N: -1},
		"no name":        {Rate: free},
		"nothing":        {Name: "n"},
		"both gates":     {Name: "n", Gate: g, KeyedGate: semaphore.NewKeyed(1, semaphore.KeyedConfig{})},
		"bad route":      {Name: "n", Rate: free, Route: "GET items"},
		"partial {wild}": {Name: "n", Rate: free, Route: "/a/x{id}"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "bulkhead: ") {
					t.Errorf("New with %s: panic %v, want a bulkhead: panic", name, r)
				}
			}()
			bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{cfg}})
		}()
	}
}

// TestRoutes: Layer.Route's pattern subset.
func TestRoutes(t *testing.T) {
	m := shaper.NewLimiter(shaper.Limit{Rate: shaper.PerSecond(1000)})
	for _, tc := range []struct {
		pattern, method, path string
		want                  bool
	}{
		{"POST /reports/export-pdf", "POST", "/reports/export-pdf", true},
		{"POST /reports/export-pdf", "GET", "/reports/export-pdf", false},
		{"POST /reports/export-pdf", "POST", "/reports/export-pdf/x", false},
		{"POST /reports/export-pdf", "POST", "/reports", false},
		{"GET /items", "HEAD", "/items", true},
		{"GET /items", "GET", "/items/", false},
		{"/items/", "PUT", "/items/7/parts", true},
		{"/items/", "PUT", "/itemsx", false},
		{"GET /items/{id}", "GET", "/items/7", true},
		{"GET /items/{id}", "GET", "/items/", false},
		{"GET /items/{id}", "GET", "/items/7/parts", false},
		{"/files/{path...}", "GET", "/files/a/b/c", true},
		{"/", "GET", "/anything/at/all", true},
		{"/a/{x}/c", "GET", "/a/b/c", true},
		{"/a/{x}/c", "GET", "/a/b/d", false},
	} {
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "r", Route: tc.pattern, Rate: m}}})
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
		b.Do(ctx, bulkhead.Request{Method: tc.method, Path: tc.path}, ok)
		if got := layerStats(t, b, "r").Admitted == 1; got != tc.want {
			t.Errorf("pattern %q on %s %s: applied %v, want %v", tc.pattern, tc.method, tc.path, got, tc.want)
		}
	}
}

// TestClientAddr: X-Forwarded-For counts only through trusted proxies.
func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		remote, xff string
		trusted     []netip.Prefix
		want        string
	}{
		{"203.0.113.5:4000", "", nil, "203.0.113.5"},
		{"203.0.113.5:4000", "1.2.3.4", nil, "203.0.113.5"},                 // no trusted proxies: ignored
		{"203.0.113.5:4000", "1.2.3.4", proxies, "203.0.113.5"},             // peer is not a proxy: ignored
		{"10.0.0.1:4000", "1.2.3.4", proxies, "1.2.3.4"},                    // through a trusted proxy
		{"10.0.0.1:4000", "6.6.6.6, 1.2.3.4, 10.0.0.9", proxies, "1.2.3.4"}, // rightmost untrusted
		{"10.0.0.1:4000", "garbage", proxies, "10.0.0.1"},
		{"[::ffff:192.0.2.7]:80", "", nil, "192.0.2.7"},
		{"@", "", nil, "invalid IP"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := bulkhead.ClientAddr(r, tc.trusted).String(); got != tc.want {
			t.Errorf("ClientAddr(%s, XFF %q, %v) = %s, want %s", tc.remote, tc.xff, tc.trusted, got, tc.want)
		}
	}
}

// TestAnonymous: with Config.Anonymous, requests without identity are limited
// one address at a time under their own tier; without it, 401.
func TestAnonymous(t *testing.T) {
	anon := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2)})
	layers := []bulkhead.Layer{{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{
		"anonymous": anon, "free": shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)}),
	}}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	get := func(b *bulkhead.Bulkhead, remote, xff string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		w := httptest.NewRecorder()
		b.Handler(h).ServeHTTP(w, r)
		return w.Code
	}
	closed := bulkhead.New(bulkhead.Config{Layers: layers})
	if code := get(closed, "192.0.2.1:1", ""); code != 401 {
		t.Errorf("no identity, Anonymous off: %d, want 401", code)
	}
	open := bulkhead.New(bulkhead.Config{Layers: layers, Anonymous: true})
	for i, want := range []int{200, 200, 429} {
		if code := get(open, "192.0.2.1:1", "9.9.9."+fmt.Sprint(i)); code != want {
			t.Errorf("anonymous request %d from 192.0.2.1 (spoofed XFF): %d, want %d", i, code, want)
		}
	}
	if code := get(open, "192.0.2.2:1", ""); code != 200 {
		t.Errorf("another address: %d, want 200 (not pooled)", code)
	}
	if d, _ := anon.AllowN("addr:192.0.2.1", 0); d.Remaining != 0 {
		t.Errorf("anonymous key for 192.0.2.1 remaining %d, want 0", d.Remaining)
	}
}

// fakeRate returns a fixed error, like a Redis meter whose store is down.
type fakeRate struct{ err error }

func (f fakeRate) Admit(context.Context, string, int64) (shaper.Decision, error) {
	return shaper.Decision{}, f.err
}

// TestStoreOutageAndErrors: breaker.ErrUnavailable answers 503 with the
// breaker's Retry-After; a leaf error that is not a rejection answers 500
// with no internal text; a context error is passed through.
func TestStoreOutageAndErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		retry  string
		reason floodgate.Reason
	}{
		{"open breaker", &breaker.OpenError{Name: "redis", State: breaker.StateOpen, Delay: 2500 * time.Millisecond}, 503, "3", floodgate.ReasonUnavailable},
		{"too large", errors.New("shaper: cost exceeds burst (secret internal detail)"), 500, "", floodgate.ReasonError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "r", Key: bulkhead.ByTenant, Rate: fakeRate{tc.err}}}})
			r := httptest.NewRequest("GET", "/", nil)
			r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
			w := httptest.NewRecorder()
			b.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retry {
				t.Errorf("got %d Retry-After %q, want %d %q", w.Code, w.Header().Get("Retry-After"), tc.status, tc.retry)
			}
			if strings.Contains(w.Body.String(), "breaker") || strings.Contains(w.Body.String(), "secret") {
				t.Errorf("body leaks the error: %s", w.Body)
			}
			err := b.Do(r.Context(), bulkhead.Request{}, ok)
			var re *bulkhead.RejectError
			if !errors.As(err, &re) || re.Reason != tc.reason || !errors.Is(err, tc.err) {
				t.Errorf("Do = %v, want reason %v wrapping the leaf's error", err, tc.reason)
			}
		})
	}
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "r", Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)})}}})
	ctx, cancel := context.WithCancel(bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"}))
	cancel()
	if err := b.Do(ctx, bulkhead.Request{}, ok); err != context.Canceled {
		t.Errorf("Do with a done context = %v, want context.Canceled", err)
	}
}

// TestRateLimitFields: opt-in fields in the draft's structured-field syntax,
// and a custom renderer.
func TestRateLimitFields(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{
		RateLimitFields: true,
		Layers: []bulkhead.Layer{
			{Name: "tier", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(100)})},
			{Name: "export", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)})},
		},
		Render: func(w http.ResponseWriter, r *http.Request, err *bulkhead.RejectError) {
			w.WriteHeader(err.Status)
			fmt.Fprintf(w, "refused by %s", err.Layer)
		},
	})
	h := b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	serve := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := serve()
	if got, want := w.Header().Get("RateLimit-Policy"), `"tier";q=100;w=60, "export";q=5;w=60`; got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"tier";r=99;t=1, "export";r=4;t=12`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	for range 4 {
		serve()
	}
	w = serve()
	if w.Code != 429 || w.Body.String() != "refused by export" || w.Header().Get("Retry-After") != "12" {
		t.Errorf("6th request: %d %q Retry-After %s, want 429 from the renderer, Retry-After 12", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if got := w.Header().Get("RateLimit"); !strings.Contains(got, `"export";r=0;t=`) {
		t.Errorf("RateLimit on a refusal = %s, want export with r=0", got)
	}
}

// TestRetrySecondsRoundsUp: Retry-After is never 0 for a delay.
func TestRetrySecondsRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{time.Nanosecond, "1"}, {999 * time.Millisecond, "1"}, {time.Second, "1"}, {1001 * time.Millisecond, "2"}, {12 * time.Second, "12"}} {
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "r", Key: bulkhead.ByTenant, Rate: fakeRate{shaper.Decision{RetryAfter: tc.d}.Err()}}}})
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "a"}))
		w := httptest.NewRecorder()
		b.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
		if got := w.Header().Get("Retry-After"); got != tc.want || w.Code != 429 {
			t.Errorf("delay %v: %d Retry-After %q, want 429 %q", tc.d, w.Code, got, tc.want)
		}
	}
}

// TestAllocs: an admitted request through a rate and a gate allocates nothing
// of bulkhead's own beyond a bare handler (the budget is 2).
func TestAllocs(t *testing.T) {
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "rate", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1 << 30), Burst: 1 << 20})},
		{Name: "conc", Key: bulkhead.ByTenant, KeyedGate: semaphore.NewKeyed(4, semaphore.KeyedConfig{})},
		{Name: "global", Gate: semaphore.New(64, semaphore.Config{})},
	}})
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	limited := b.Handler(bare)
	r := httptest.NewRequest("GET", "/items", nil)
	r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "acme", Tier: "gold"}))
	w := httptest.NewRecorder()
	limited.ServeHTTP(w, r)
	base := testing.AllocsPerRun(200, func() { bare.ServeHTTP(w, r) })
	got := testing.AllocsPerRun(200, func() { limited.ServeHTTP(w, r) })
	if got-base > 2 {
		t.Errorf("allocs per admitted request: %v (bare %v): %v of bulkhead's own, want ≤ 2", got, base, got-base)
	}
	t.Logf("allocs of bulkhead's own per admitted request: %v", got-base)
	ctx := r.Context()
	if a := testing.AllocsPerRun(200, func() { b.Do(ctx, bulkhead.Request{Method: "GET", Path: "/items"}, ok) }); a > 2 {
		t.Errorf("Do allocs = %v, want ≤ 2", a)
	}
}
