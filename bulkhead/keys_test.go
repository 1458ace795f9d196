package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// guid is a tenant id as SQL Server and .NET write GUIDs: in braces.
const guid = "{6F9619FF-8B86-D011-B42D-00C04FC964FF}"

// fleetStack is the README's job 3 on real Redis: a global distsem gate, a
// tier quota (shaperredis meters by tier) and the export layer (a shaperredis
// meter, then a distsem.Keyed of 2 per tenant, never queueing). The export
// rate has a burst of 3 and refills one a minute, so the counts below are
// exact. keyed configures the distsem.Keyed.
type fleetStack struct {
	tier, export *shaperredis.Meter
	keyed        *distsem.Keyed
	b            *bulkhead.Bulkhead
	srv          *httptest.Server
}

func newFleetStack(t *testing.T, keyed distsem.KeyedConfig) *fleetStack {
	t.Helper()
	db := redistest.Connect(t)
	// One breaker for the endpoint, with a call timeout that a loaded test
	// machine does not reach: these tests are about keys, not outages.
	brk := breaker.New(db.Key("redis"), breaker.Config{CallTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	dcfg := distsem.Config{Breaker: brk, WaiterTTL: 6 * time.Second}
	keyed.Breaker, keyed.WaiterTTL = brk, dcfg.WaiterTTL
	global := distsem.New(db.Client, db.Key("api"), 200, dcfg)
	t.Cleanup(func() { global.Close() })
	fs := &fleetStack{
		tier:   shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(100), Burst: 100}, shaperredis.Config{Prefix: db.Key("free:"), Breaker: brk}),
		export: shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(1), Burst: 3}, shaperredis.Config{Prefix: db.Key("export:"), Breaker: brk}),
		keyed:  distsem.NewKeyed(db.Client, db.Key("export:"), 2, keyed),
	}
	t.Cleanup(func() { fs.keyed.Close() })
	fs.b = bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: global, MaxWait: time.Second},
		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{"free": fs.tier}},
		{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant, MaxWait: -1,
			Rate: fs.export, KeyedGate: fs.keyed},
	}})
	inner := fs.b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	fs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := cutBearer(r); ok { // every token is a verified free tenant
			r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: tok, Subject: tok, Tier: "free"}))
		}
		inner.ServeHTTP(w, r)
	}))
	fs.srv.Config.ErrorLog = discardLogger()
	t.Cleanup(fs.srv.Close)
	return fs
}

func (fs *fleetStack) export1(t *testing.T, tenant string) int {
	t.Helper()
	return mustCall(t, fs.srv.Client(), fs.srv.URL, "POST", "/reports/export-pdf", tenant).status
}

// remaining reads m's remaining quota for key without spending any.
func remaining(t *testing.T, m *shaperredis.Meter, key string) int64 {
	t.Helper()
	d, err := m.AllowN(t.Context(), key, 0)
	if err != nil {
		t.Fatalf("AllowN(%q, 0): %v", key, err)
	}
	return d.Remaining
}

// TestRedisBracedTenantThroughFleetLayers: a tenant id in braces (a GUID)
// goes through the README's fleet layers like any other: its exports are
// served (200, not 500) up to the export rate's burst of 3, the fourth is a
// 429 for quota really spent, and its keys share nothing with the tenant
// whose id is the GUID without braces.
func TestRedisBracedTenantThroughFleetLayers(t *testing.T) {
	fs := newFleetStack(t, distsem.KeyedConfig{})
	for i, want := range []int{200, 200, 200, 429} {
		if got := fs.export1(t, guid); got != want {
			t.Errorf("export %d of tenant %s: status %d, want %d", i+1, guid, got, want)
		}
	}
	bare := strings.Trim(guid, "{}")
	if got := fs.export1(t, bare); got != 200 {
		t.Errorf("export of tenant %s after %s used its quota: status %d, want 200 (not shared)", bare, guid, got)
	}
	if ls := layerStats(t, fs.b, "export"); ls.Errors != 0 {
		t.Errorf("export layer: %d errors, want 0 (%+v)", ls.Errors, ls)
	}
	if ks := fs.keyed.Stats(); ks.Opened != 4 || ks.Held != 0 || ks.Keys != 0 {
		t.Errorf("Keyed stats %+v: want 4 keys opened (3 for %s, 1 for %s), none held or live", ks, guid, bare)
	}
}

// TestRedisLeafKeyRefusalChargesNothing: a key that a later leaf refuses (a
// distsem.Keyed whose MaxNameLen, 100, is below bulkhead's MaxKeyLen, 256) is refused as
// bad identity (401, ErrInvalidKey) before any layer is charged: the tier and
// export rates keep their whole quota, however many times the client tries.
func TestRedisLeafKeyRefusalChargesNothing(t *testing.T) {
	fs := newFleetStack(t, distsem.KeyedConfig{Config: distsem.Config{MaxNameLen: 100}})
	long := "tenant-" + strings.Repeat("x", 193) // 200 bytes: within bulkhead's 256, over the Keyed's 100
	for i := range 4 {
		if got := fs.export1(t, long); got != http.StatusUnauthorized {
			t.Errorf("export %d of a 200-byte tenant: status %d, want 401", i+1, got)
		}
	}
	if r := remaining(t, fs.tier, long); r != 100 {
		t.Errorf("tier quota of the refused tenant: %d remaining, want 100 (never charged)", r)
	}
	if r := remaining(t, fs.export, long); r != 3 {
		t.Errorf("export quota of the refused tenant: %d remaining, want 3 (never charged)", r)
	}
	if st := fs.b.Stats(); st.InvalidKey != 4 {
		t.Errorf("Stats().InvalidKey = %d, want 4", st.InvalidKey)
	}
	// A tenant the Keyed accepts is served.
	if got := fs.export1(t, "acme"); got != 200 {
		t.Errorf("export of acme: status %d, want 200", got)
	}
}

// TestRedisLeafKeyRuleCheckedFirst: through Do, with a Redis meter whose
// MaxKeyLen refuses the key as the last layer, the error is ErrInvalidKey
// (matching the leaf's own ErrInvalidKey too) with ReasonIdentity, and the
// local meter of the first layer is not charged.
func TestRedisLeafKeyRuleCheckedFirst(t *testing.T) {
	db := redistest.Connect(t)
	first := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1), Burst: 2})
	second := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerMinute(1), Burst: 2}, shaperredis.Config{Prefix: db.Key("m:"), MaxKeyLen: 8})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "first", Key: bulkhead.ByTenant, Rate: first},
		{Name: "second", Key: bulkhead.ByTenant, Rate: second},
	}})
	ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "tenant-0123456789"})
	for range 3 {
		err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
		rerr, ok := errors.AsType[*bulkhead.RejectError](err)
		if !ok || rerr.Reason != floodgate.ReasonInvalidKey || rerr.Status != http.StatusUnauthorized ||
			!errors.Is(err, bulkhead.ErrInvalidKey) || !errors.Is(err, shaperredis.ErrInvalidKey) {
			t.Fatalf("Do with a key too long for the second layer's meter: %v, want a 401 identity refusal matching both ErrInvalidKeys", err)
		}
	}
	if d, _ := first.AllowN("tenant-0123456789", 0); d.Remaining != 2 {
		t.Errorf("first layer's meter: %d remaining, want 2 (never charged)", d.Remaining)
	}
}

// TestAnonymousNeverSharesWithTenant: an anonymous client at 10.0.0.7 and a
// verified tenant named "addr:10.0.0.7" have different keys in every layer, in
// both orders: each spends only its own quota. The same holds for a Key of
// the application's own that builds on the identity, and for a keyed gate.
func TestAnonymousNeverSharesWithTenant(t *testing.T) {
	byTenant := bulkhead.ByTenant
	wrapped := func(id bulkhead.Identity, _ bulkhead.Request) string { return "t:" + id.Tenant }
	for _, tc := range []struct {
		name  string
		key   func(bulkhead.Identity, bulkhead.Request) string
		first string // "anonymous" or "tenant"
	}{
		{"ByTenant/anonymous first", byTenant, "anonymous"},
		{"ByTenant/tenant first", byTenant, "tenant"},
		{"own Key/anonymous first", wrapped, "anonymous"},
		{"own Key/tenant first", wrapped, "tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1})
			gate := semaphore.NewKeyed(1, semaphore.KeyedConfig{})
			b := bulkhead.New(bulkhead.Config{Anonymous: true, Layers: []bulkhead.Layer{
				{Name: "rate", Key: tc.key, Rate: rate},
				{Name: "gate", Key: tc.key, KeyedGate: gate, MaxWait: -1},
			}})
			// The handler of the first client holds the gate while the second
			// one comes in: a shared key would refuse it.
			var second func() int
			get := func(anonymous bool) int {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "10.0.0.7:4242"
				if !anonymous {
					r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "addr:10.0.0.7", Subject: "addr:10.0.0.7"}))
				}
				w := httptest.NewRecorder()
				b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if f := second; f != nil {
						second = nil
						if code := f(); code != 200 {
							t.Errorf("second client while the first holds its gate: status %d, want 200", code)
						}
					}
				})).ServeHTTP(w, r)
				return w.Code
			}
			firstAnon := tc.first == "anonymous"
			second = func() int { return get(!firstAnon) }
			if code := get(firstAnon); code != 200 {
				t.Errorf("first client: status %d, want 200", code)
			}
			// Each has spent its one request: both are refused now, by their
			// own quota.
			for _, anon := range []bool{true, false} {
				if code := get(anon); code != 429 {
					t.Errorf("anonymous=%v again: status %d, want 429", anon, code)
				}
			}
		})
	}
}

// TestWithIdentityCannotClaimAnonymous: an identity that the application
// marks Anonymous is still a verified identity: its keys are never those of
// the anonymous client with the same address.
func TestWithIdentityCannotClaimAnonymous(t *testing.T) {
	rate := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1})
	b := bulkhead.New(bulkhead.Config{Anonymous: true, Layers: []bulkhead.Layer{
		{Name: "rate", Key: bulkhead.ByTenant, Rate: rate},
	}})
	get := func(ctx context.Context) int {
		r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
		r.RemoteAddr = "10.0.0.7:4242"
		w := httptest.NewRecorder()
		b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		return w.Code
	}
	fake := bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "addr:10.0.0.7", Anonymous: true})
	if id, _ := bulkhead.IdentityFrom(fake); id.Anonymous {
		t.Errorf("IdentityFrom(WithIdentity(Anonymous: true)).Anonymous = true, want false")
	}
	if code := get(fake); code != 200 {
		t.Errorf("verified identity claiming Anonymous: status %d, want 200", code)
	}
	if code := get(context.Background()); code != 200 {
		t.Errorf("the anonymous client at that address: status %d, want 200 (its own quota)", code)
	}
}

// recordRate admits everything and records the keys it is asked for.
type recordRate struct{ keys []string }

func (r *recordRate) Admit(_ context.Context, key string, _ int64) (shaper.Decision, error) {
	r.keys = append(r.keys, key)
	return shaper.Decision{Allowed: true}, nil
}

// TestKeySpacesDisjoint: whatever a layer's Key returns, for anonymous and
// verified identities alike, the leaves see a different key for every
// different (key, anonymous) pair; the key of a verified identity reaches
// them unchanged unless it starts with "addr:" (or the byte 0xFF), and the
// "addr:<ip>" key of an anonymous identity unchanged too, so that state kept
// under the keys of earlier releases is still found.
func TestKeySpacesDisjoint(t *testing.T) {
	corpus := []string{
		"acme", "addr:10.0.0.7", "addr:", "addr", "addr:\xff", "addr:\xffacme", "addr:\xffaddr:10.0.0.7",
		"\xff", "\xffacme", "\xffaddr:10.0.0.7", "\xff\xff", "addr:addr:10.0.0.7", guid, "x",
	}
	var key string
	rec := &recordRate{}
	b := bulkhead.New(bulkhead.Config{Anonymous: true, Layers: []bulkhead.Layer{
		{Name: "rate", Key: func(bulkhead.Identity, bulkhead.Request) string { return key }, Rate: rec},
	}})
	owner := map[string]string{}
	for _, anonymous := range []bool{false, true} {
		for _, key = range corpus {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.7:1"
			if !anonymous {
				r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "t"}))
			}
			rec.keys = rec.keys[:0]
			w := httptest.NewRecorder()
			b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
			if w.Code != 200 || len(rec.keys) != 1 {
				t.Fatalf("anonymous=%v, Key %q: status %d, %d calls of the rate; want 200 and 1", anonymous, key, w.Code, len(rec.keys))
			}
			got := rec.keys[0]
			what := fmt.Sprintf("anonymous=%v, Key %q", anonymous, key)
			if o, dup := owner[got]; dup {
				t.Errorf("%s and %s both reach the rate as %q", o, what, got)
			}
			owner[got] = what
			unchanged := !strings.HasPrefix(key, "addr:") && key[0] != 0xff
			if anonymous {
				unchanged = strings.HasPrefix(key, "addr:") && !strings.HasPrefix(key, "addr:\xff")
				if !strings.HasPrefix(got, "addr:") {
					t.Errorf("%s reaches the rate as %q, outside the anonymous key space", what, got)
				}
			} else if strings.HasPrefix(got, "addr:") {
				t.Errorf("%s reaches the rate as %q, inside the anonymous key space", what, got)
			}
			if unchanged && got != key {
				t.Errorf("%s reaches the rate as %q, want it unchanged", what, got)
			}
		}
	}
}

// TestNewRefusesUnkeyedLayerOverKeyRules: a layer without Key gives its
// leaves the key "" on every request; a distsem.Keyed refuses it, so New
// panics rather than build a layer that refuses every request.
func TestNewRefusesUnkeyedLayerOverKeyRules(t *testing.T) {
	rdb := redis.NewClient(redistest.Options("127.0.0.1:1")) // New does no I/O
	t.Cleanup(func() { rdb.Close() })
	k := distsem.NewKeyed(rdb, "p:", 1, distsem.KeyedConfig{})
	t.Cleanup(func() { k.Close() })
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.HasPrefix(s, "bulkhead: layer global: ") {
			t.Errorf("New with an unkeyed layer over a distsem.Keyed: panic %v, want a bulkhead: layer global: panic", r)
		}
	}()
	bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "global", KeyedGate: k}}})
}
