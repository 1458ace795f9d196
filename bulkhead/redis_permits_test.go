package bulkhead_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// distsemRig is a real httptest.Server behind a bulkhead whose global layer is
// a distsem.Semaphore of limit 1. entered is signalled when the handler
// starts, exited when the bulkhead's handler has returned (its deferred
// releases done, panics included).
type distsemRig struct {
	sem     *distsem.Semaphore
	b       *bulkhead.Bulkhead
	srv     *httptest.Server
	entered chan struct{}
	exited  chan struct{}
}

func newDistsemRig(t *testing.T, maxWait time.Duration, h http.HandlerFunc) *distsemRig {
	t.Helper()
	db := redistest.Connect(t)
	rg := &distsemRig{
		sem:     distsem.New(db.Client, db.Key("global"), 1, distsem.Config{}),
		entered: make(chan struct{}, 4),
		exited:  make(chan struct{}, 4),
	}
	t.Cleanup(func() { rg.sem.Close() })
	rg.b = bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "global", Gate: rg.sem, MaxWait: maxWait},
	}})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.entered <- struct{}{}
		h(w, r)
	})
	rg.srv = tenantServer(t, rg.b, inner, rg.exited)
	return rg
}

// wantFree checks that the semaphore is back to nothing held and nobody
// queued, in Redis and in the bulkhead's stats, and that a new request is
// admitted. A cancelled Acquire withdraws its token in the background, so
// Redis is polled for a while.
func (rg *distsemRig) wantFree(t *testing.T) {
	t.Helper()
	var st distsem.Stats
	floodgatetest.Eventually(t, 5*time.Second, "distsem back to InUse 0, Waiting 0", func() bool {
		var err error
		st, err = rg.sem.Stats(t.Context())
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return st.InUse == 0 && st.Holders == 0 && st.Waiting == 0
	})
	ls := layerStats(t, rg.b, "global")
	if ls.InFlight != 0 || ls.Waiting != 0 {
		t.Errorf("layer stats: InFlight %d, Waiting %d, want 0", ls.InFlight, ls.Waiting)
	}
	if rp := mustCall(t, rg.srv.Client(), rg.srv.URL, "GET", "/", "acme"); rp.status != http.StatusOK {
		t.Errorf("request after the permit came back: status %d, want 200", rp.status)
	}
	<-rg.exited
}

// TestRedisPermitBackAfterPanic: a handler that panics gives its distsem
// permit back (net/http recovers the panic and drops the connection).
func TestRedisPermitBackAfterPanic(t *testing.T) {
	rg := newDistsemRig(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("handler bug")
		}
	})
	if _, err := call(t, t.Context(), rg.srv.Client(), rg.srv.URL, "GET", "/panic", "acme"); err == nil {
		t.Error("request to a panicking handler succeeded")
	}
	<-rg.exited
	rg.wantFree(t)
}

// TestRedisPermitBackAfterDisconnect: a client that goes away while its
// handler runs: the handler's context ends, and the permit is given back even
// though the request's context, on which it was acquired, is cancelled.
func TestRedisPermitBackAfterDisconnect(t *testing.T) {
	rg := newDistsemRig(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-r.Context().Done()
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, rg.srv.Client(), rg.srv.URL, "GET", "/hold", "acme")
		errc <- err
	}()
	<-rg.entered
	if st, err := rg.sem.Stats(t.Context()); err != nil || st.InUse != 1 {
		t.Fatalf("while the handler runs: Stats %+v, %v; want InUse 1", st, err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("cancelled request succeeded")
	}
	<-rg.exited
	rg.wantFree(t)
}

// TestRedisPermitBackAfterWaitTimeout: a request that times out while queued
// for the distsem permit, by the layer's MaxWait (503 with Retry-After) or by
// its client's deadline, leaves nothing held or queued in Redis.
func TestRedisPermitBackAfterWaitTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		client  time.Duration // client-side deadline of the waiting request
	}{
		{"maxwait", 300 * time.Millisecond, 10 * time.Second},
		{"deadline", 0, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			rg := newDistsemRig(t, tc.maxWait, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
			})
			holder := make(chan reply, 1)
			go func() {
				rp, _ := call(t, t.Context(), rg.srv.Client(), rg.srv.URL, "GET", "/hold", "acme")
				holder <- rp
			}()
			<-rg.entered

			ctx, cancel := context.WithTimeout(t.Context(), tc.client)
			defer cancel()
			start := time.Now()
			rp, err := call(t, ctx, rg.srv.Client(), rg.srv.URL, "GET", "/", "acme")
			el := time.Since(start)
			switch {
			case tc.maxWait > 0:
				if err != nil || rp.status != http.StatusServiceUnavailable || rp.retryAfter < 1 {
					t.Errorf("waiter past MaxWait: %+v, %v; want 503 with Retry-After", rp, err)
				}
			default:
				if err == nil {
					t.Errorf("waiter past its deadline got status %d, want a client timeout", rp.status)
				}
			}
			if el > 3*time.Second {
				t.Errorf("waiter took %v to time out after 300ms", el)
			}
			<-rg.exited // the waiter's handler is done
			if st, err := rg.sem.Stats(t.Context()); err != nil || st.InUse != 1 {
				t.Errorf("after the waiter left: Stats %+v, %v; want InUse 1 (the holder)", st, err)
			}

			close(release)
			if rp := <-holder; rp.status != http.StatusOK {
				t.Errorf("holder: status %d, want 200", rp.status)
			}
			<-rg.exited
			rg.wantFree(t)
		})
	}
}
