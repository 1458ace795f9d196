package bulkhead_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// permitRig is a real httptest.Server whose outer wrapper reports when the
// bulkhead's handler has returned (after its deferred releases, panics
// included), so the test can check Stats without polling.
type permitRig struct {
	b       *bulkhead.Bulkhead
	global  *semaphore.Weighted
	keyed   *semaphore.Keyed
	srv     *httptest.Server
	entered chan struct{}
	exited  chan struct{}
}

func newPermitRig(t *testing.T, maxWait time.Duration, h http.HandlerFunc) *permitRig {
	rg := &permitRig{
		global:  semaphore.New(1, semaphore.Config{}),
		keyed:   semaphore.NewKeyed(1, semaphore.KeyedConfig{}),
		entered: make(chan struct{}, 4),
		exited:  make(chan struct{}, 4),
	}
	rg.b = bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: rg.global, MaxWait: maxWait},
		{Name: "tenant", Key: bulkhead.ByTenant, KeyedGate: rg.keyed, MaxWait: -1},
	}})
	inner := rg.b.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.entered <- struct{}{}
		h(w, r)
	}))
	ids := map[string]bulkhead.Identity{"t": {Tenant: "acme"}}
	rg.srv = httptest.NewServer(auth(ids, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { rg.exited <- struct{}{} }()
		inner.ServeHTTP(w, r)
	})))
	rg.srv.Config.ErrorLog = discardLogger()
	t.Cleanup(rg.srv.Close)
	return rg
}

func (rg *permitRig) wantEmpty(t *testing.T) {
	t.Helper()
	for _, ls := range rg.b.Stats().Layers {
		if ls.InFlight != 0 || ls.Waiting != 0 {
			t.Errorf("layer %s: InFlight %d, Waiting %d, want 0", ls.Name, ls.InFlight, ls.Waiting)
		}
	}
	if st := rg.global.Stats(); st.InUse != 0 {
		t.Errorf("global semaphore InUse %d, want 0", st.InUse)
	}
	if st := rg.keyed.Stats(); st.Keys != 0 || st.InUse != 0 || st.Waiting != 0 {
		t.Errorf("keyed gate %+v, want empty", st)
	}
}

// TestPermitBackAfterPanic: a handler that panics gives its permits back
// (net/http recovers the panic and drops the connection).
func TestPermitBackAfterPanic(t *testing.T) {
	rg := newPermitRig(t, 0, func(http.ResponseWriter, *http.Request) { panic("handler bug") })
	if _, err := call(t, t.Context(), rg.srv.Client(), rg.srv.URL, "GET", "/", "t"); err == nil {
		t.Error("request to a panicking handler succeeded")
	}
	<-rg.exited
	rg.wantEmpty(t)
}

// TestPermitBackAfterDisconnect: a client that goes away mid-request gives
// its permits back once the handler returns.
func TestPermitBackAfterDisconnect(t *testing.T) {
	rg := newPermitRig(t, 0, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, rg.srv.Client(), rg.srv.URL, "GET", "/", "t")
		errc <- err
	}()
	<-rg.entered
	if ls := layerStats(t, rg.b, "tenant"); ls.InFlight != 1 {
		t.Errorf("tenant layer InFlight %d while the handler runs, want 1", ls.InFlight)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v, want context.Canceled", err)
	}
	<-rg.exited
	rg.wantEmpty(t)
}

// TestPermitBackAfterWaitTimeout: requests that give up waiting for a gate
// (MaxWait, or their own deadline) leave nothing behind, and the MaxWait one
// gets 503 with Retry-After.
func TestPermitBackAfterWaitTimeout(t *testing.T) {
	release := make(chan struct{})
	rg := newPermitRig(t, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() { mustCall(t, rg.srv.Client(), rg.srv.URL, "GET", "/hold", "t") })
	<-rg.entered
	rp := mustCall(t, rg.srv.Client(), rg.srv.URL, "GET", "/", "t")
	<-rg.exited
	wantReject(t, rp, 503, 1, "max_wait")
	if ls := layerStats(t, rg.b, "global"); ls.MaxWait != 1 || ls.Waits != 1 || ls.WaitTime < 50*time.Millisecond {
		t.Errorf("global layer after a MaxWait timeout: %+v, want 1 max_wait rejection after one wait ≥ 50ms", ls)
	}
	// The caller's own deadline, shorter than MaxWait: ctx.Err, nothing kept.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := call(t, ctx, rg.srv.Client(), rg.srv.URL, "GET", "/", "t"); err == nil {
		t.Error("request with a 10ms deadline behind a held gate succeeded")
	}
	close(release)
	wg.Wait()
	<-rg.exited
	<-rg.exited
	rg.wantEmpty(t)
}

// TestDoWaitTimeoutSynctest: in fake time, a Do waiting on a full gate for
// MaxWait gets ErrMaxWait after exactly MaxWait, and one whose context ends
// first gets ctx.Err(); neither leaves a waiter behind.
func TestDoWaitTimeoutSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "g", Gate: g, MaxWait: 2 * time.Second}}})
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
		hold := make(chan struct{})
		go b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-hold; return nil })
		synctest.Wait()
		start := time.Now()
		err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
		if !errors.Is(err, bulkhead.ErrMaxWait) || time.Since(start) != 2*time.Second {
			t.Errorf("Do on a full gate = %v after %v, want ErrMaxWait after 2s", err, time.Since(start))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := b.Do(cctx, bulkhead.Request{}, func(context.Context) error { return nil }); err != context.DeadlineExceeded {
			t.Errorf("Do with a 1s deadline = %v, want context.DeadlineExceeded", err)
		}
		close(hold)
		synctest.Wait()
		if st := g.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Errorf("gate after timeouts: %+v, want empty", st)
		}
		if ls := layerStats(t, b, "g"); ls.Canceled != 1 || ls.MaxWait != 1 || ls.Admitted != 1 || ls.Waiting != 0 {
			t.Errorf("layer: %+v, want 1 admitted, 1 max_wait, 1 canceled", ls)
		}
	})
}

// TestMaxWaitBoundsTheWait: a gate granted after a wait holds its weight
// while fn runs, whose context MaxWait does not end (MaxWait bounds the wait,
// not the run); the gate gives the weight back on panic, and a later
// layer's refusal inside it still answers as that layer. (It was the test of
// a Gate with only Do, a shape that is gone.)
func TestMaxWaitBoundsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
		rate := shaper.NewLimiter(shaper.Limit{Rate: shaper.PerMinute(4)})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "g", Gate: w, MaxWait: time.Second},
			{Name: "r", Rate: rate},
		}})
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
		// The run may outlast MaxWait, after a wait too.
		first := make(chan struct{})
		go b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-first; return nil })
		synctest.Wait()
		time.AfterFunc(500*time.Millisecond, func() { close(first) })
		err := b.Do(ctx, bulkhead.Request{}, func(ctx context.Context) error {
			if w.Stats().InUse != 1 {
				t.Error("fn runs without the gate's weight")
			}
			time.Sleep(5 * time.Second)
			return ctx.Err()
		})
		if err != nil {
			t.Errorf("Do running 5s with MaxWait 1s = %v, want nil (MaxWait bounds the wait only)", err)
		}
		hold := make(chan struct{})
		go b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-hold; return nil })
		synctest.Wait()
		if err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrMaxWait) {
			t.Errorf("Do behind a held gate = %v, want ErrMaxWait", err)
		}
		close(hold)
		synctest.Wait()
		func() {
			defer func() {
				if r := recover(); r != "bug" {
					t.Errorf("Do whose fn panics: recovered %v, want the panic", r)
				}
			}()
			b.Do(ctx, bulkhead.Request{}, func(context.Context) error { panic("bug") })
		}()
		if st := w.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Errorf("gate after panic: %+v, want empty", st)
		}
		// Rate "r" (4/min) is spent: the next Do is refused by "r", inside g.
		err = b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return errBoom })
		var re *bulkhead.RejectError
		if !errors.As(err, &re) || re.Layer != "r" || !errors.Is(err, shaper.ErrLimited) {
			t.Errorf("Do with the rate spent = %v, want a RejectError from layer r matching shaper.ErrLimited", err)
		}
		if ls := layerStats(t, b, "g"); ls.InFlight != 0 || ls.Waiting != 0 {
			t.Errorf("layer g: %+v, want nothing in flight", ls)
		}
	})
}
