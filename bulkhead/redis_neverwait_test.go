package bulkhead_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestRedisKeyedGateNeverWaits: with a negative MaxWait, a fleet-wide
// per-tenant gate (distsem.Keyed, limit 2) refuses a tenant's third
// concurrent request at once with 429 and Retry-After, instead of queueing
// it; another tenant is admitted meanwhile, and once the two finish the
// tenant is admitted again, with every count back to zero.
func TestRedisKeyedGateNeverWaits(t *testing.T) {
	db := redistest.Connect(t)
	k := distsem.NewKeyed(db.Client, db.Key("tenant:"), 2, distsem.KeyedConfig{})
	t.Cleanup(func() { k.Close() })
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "tenant", Key: bulkhead.ByTenant, KeyedGate: k, MaxWait: -1},
	}})
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	exited := make(chan struct{}, 8)
	srv := tenantServer(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}), exited)
	// Let the holders go on every path, before the server's Close (which
	// waits for them) runs: cleanups run last registered first.
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c := srv.Client()
	c.Timeout = 20 * time.Second

	type result struct {
		rp  reply
		err error
	}
	held := make(chan result, 2)
	for range 2 {
		go func() {
			rp, err := call(t, context.Background(), c, srv.URL, "GET", "/block", "acme")
			held <- result{rp, err}
		}()
	}
	for i := range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("holder %d of 2 not admitted within 10s", i+1)
		}
	}

	// The third of acme's: refused at once. A gate that queued it would hold
	// it until the bound on ctx, which is far beyond the one allowed.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	rp, err := call(t, ctx, c, srv.URL, "GET", "/", "acme")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("third concurrent request of acme: %v after %v (it waited), want 429 at once", err, took)
	}
	if rp.status != http.StatusTooManyRequests || rp.retryAfter < 1 {
		t.Errorf("third concurrent request of acme: status %d, Retry-After %d; want 429 with Retry-After >= 1", rp.status, rp.retryAfter)
	}
	if took > 500*time.Millisecond {
		t.Errorf("third concurrent request of acme answered after %v, want well under a second (no queueing)", took)
	}
	<-exited

	// Another tenant has its own 2.
	if rp := mustCall(t, c, srv.URL, "GET", "/", "globex"); rp.status != http.StatusOK {
		t.Errorf("globex while acme is full: status %d, want 200", rp.status)
	}
	<-exited

	unblock()
	for range 2 {
		r := <-held
		if r.err != nil || r.rp.status != http.StatusOK {
			t.Errorf("holder: status %d, err %v; want 200", r.rp.status, r.err)
		}
		<-exited
	}
	if rp := mustCall(t, c, srv.URL, "GET", "/", "acme"); rp.status != http.StatusOK {
		t.Errorf("acme after its two finished: status %d, want 200", rp.status)
	}
	<-exited

	ls := layerStats(t, b, "tenant")
	if ls.Admitted != 4 || ls.NoCapacity != 1 || ls.Canceled != 0 || ls.Errors != 0 {
		t.Errorf("layer stats: %+v, want 4 admitted and 1 no_capacity rejection", ls)
	}
	if ls.InFlight != 0 || ls.Waiting != 0 {
		t.Errorf("layer stats: InFlight %d, Waiting %d, want 0", ls.InFlight, ls.Waiting)
	}
	if ks := k.Stats(); ks.Held != 0 || ks.Waiting != 0 || ks.Keys != 0 {
		t.Errorf("Keyed stats: %+v, want nothing held, waiting or live", ks)
	}
	for _, tenant := range []string{"acme", "globex"} {
		s := distsem.New(db.Client, db.Key("tenant:")+tenant, 2, distsem.Config{})
		floodgatetest.Eventually(t, 5*time.Second, tenant+"'s permits back in Redis", func() bool {
			st, err := s.Stats(t.Context())
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			return st.InUse == 0 && st.Holders == 0 && st.Waiting == 0
		})
		s.Close()
	}
}

// TestRedisGateNeverWaits: the same for a global distsem.Semaphore (limit 1)
// as a Gate: with a negative MaxWait the second request is refused at once
// with 503 and Retry-After, and the permit is free once the first finishes.
func TestRedisGateNeverWaits(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	rg := newDistsemRig(t, -1, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(unblock)
	c := rg.srv.Client()
	c.Timeout = 20 * time.Second
	held := make(chan error, 1)
	go func() {
		rp, err := call(t, context.Background(), c, rg.srv.URL, "GET", "/", "acme")
		if err == nil && rp.status != http.StatusOK {
			err = errors.New(http.StatusText(rp.status))
		}
		held <- err
	}()
	select {
	case <-rg.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("first request not admitted within 10s")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	rp, err := call(t, ctx, c, rg.srv.URL, "GET", "/", "globex")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("second request: %v after %v (it waited), want 503 at once", err, took)
	}
	if rp.status != http.StatusServiceUnavailable || rp.retryAfter < 1 {
		t.Errorf("second request: status %d, Retry-After %d; want 503 with Retry-After >= 1", rp.status, rp.retryAfter)
	}
	if took > 500*time.Millisecond {
		t.Errorf("second request answered after %v, want well under a second (no queueing)", took)
	}
	<-rg.exited
	unblock()
	if err := <-held; err != nil {
		t.Errorf("first request: %v, want 200", err)
	}
	<-rg.exited
	if ls := layerStats(t, rg.b, "global"); ls.Admitted != 1 || ls.NoCapacity != 1 {
		t.Errorf("layer stats: %+v, want 1 admitted and 1 no_capacity rejection", ls)
	}
	rg.wantFree(t)
}
