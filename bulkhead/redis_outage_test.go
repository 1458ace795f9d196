package bulkhead_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// outageEndpoint is one server whose bulkhead has one per-tenant layer: a
// Redis meter with the given failure policy and a breaker of its own.
type outageEndpoint struct {
	name   string
	policy breaker.Policy
	brk    *breaker.Breaker
	b      *bulkhead.Bulkhead
	srv    *httptest.Server
	c      *http.Client
}

// TestRedisOutage: with the Redis under a rate layer stopped (SIGSTOP), then
// resumed, then killed, then restarted: FailOpen serves; FailClosed answers 503
// with Retry-After; FailLocal admits its local share and refuses the rest with
// 429; no request waits past the breaker's call timeout (nowhere near its
// client deadline); and once Redis is back, the decisions are Redis's again
// (the burst of the shared limit, which neither fallback would give).
func TestRedisOutage(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client()
	// Slow refill (one every 10s), so the counts below are exact.
	lim := shaper.Limit{Rate: shaper.PerMinute(6), Burst: 3}
	localLim := shaper.Limit{Rate: shaper.PerMinute(6), Burst: 2}
	// 400ms, not less: on a loaded machine a call to a healthy Redis took
	// over 100ms, and the "before" phase saw a 503.
	const callTimeout = 400 * time.Millisecond
	const slowest = 2 * time.Second // far above callTimeout, far below the client's 10s

	var eps []*outageEndpoint
	for _, p := range []breaker.Policy{breaker.FailOpen, breaker.FailClosed, breaker.FailLocal} {
		ep := &outageEndpoint{name: p.String(), policy: p}
		ep.brk = breaker.New("bulkhead-"+ep.name, breaker.Config{
			CallTimeout: callTimeout, OpenDuration: 300 * time.Millisecond, Jitter: -1,
			Logger: slog.New(slog.DiscardHandler),
		})
		cfg := shaperredis.Config{Breaker: ep.brk, Policy: p}
		if p == breaker.FailLocal {
			cfg.LocalShare = localLim
		}
		m := shaperredis.NewMeter(rdb, lim, cfg)
		ep.b = bulkhead.New(bulkhead.Config{
			Layers:         []bulkhead.Layer{{Name: "tenant", Key: bulkhead.ByTenant, Rate: m}},
			DegradedHeader: "Degraded",
		})
		ep.srv = tenantServer(t, ep.b, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
		ep.c = ep.srv.Client()
		ep.c.Timeout = 10 * time.Second
		eps = append(eps, ep)
	}

	// send makes n requests as tenant, one after another, and checks that
	// none errs or takes long.
	send := func(ep *outageEndpoint, tenant string, n int) []reply {
		t.Helper()
		var rps []reply
		for range n {
			start := time.Now()
			rp, err := call(t, t.Context(), ep.c, ep.srv.URL, "GET", "/", tenant)
			if err != nil {
				t.Fatalf("%s, tenant %s: %v", ep.name, tenant, err)
			}
			if el := time.Since(start); el > slowest {
				t.Errorf("%s, tenant %s: request took %v (call timeout %v)", ep.name, tenant, el, callTimeout)
			}
			rps = append(rps, rp)
		}
		return rps
	}

	// normal checks Redis's own decisions for a fresh tenant: the shared
	// burst of 3, then 429 with Retry-After. FailOpen would admit the fourth,
	// FailLocal refuse the third.
	normal := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			rps := send(ep, phase+"-"+ep.name, 4)
			for i, rp := range rps {
				want := http.StatusOK
				if i == 3 {
					want = http.StatusTooManyRequests
				}
				if rp.status != want {
					t.Errorf("%s, %s: request %d: status %d, want %d", phase, ep.name, i, rp.status, want)
				}
				if want == http.StatusTooManyRequests && rp.retryAfter < 1 {
					t.Errorf("%s, %s: 429 without Retry-After", phase, ep.name)
				}
			}
		}
	}

	// outage checks each policy's answers while Redis cannot answer.
	outage := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			degradedBefore := ep.brk.Stats().Degraded
			layerDegradedBefore := ep.b.Stats().Layers[0].Degraded
			start := time.Now()
			rps := send(ep, phase+"-"+ep.name, 6)
			var ok int
			for i, rp := range rps {
				switch ep.policy {
				case breaker.FailOpen:
					if rp.status != http.StatusOK {
						t.Errorf("%s, FailOpen: request %d: status %d, want 200", phase, i, rp.status)
					}
				case breaker.FailClosed:
					if rp.status != http.StatusServiceUnavailable || rp.retryAfter < 1 || rp.body.Error != "unavailable" {
						t.Errorf("%s, FailClosed: request %d: status %d, Retry-After %d, body %q; want 503 with Retry-After",
							phase, i, rp.status, rp.retryAfter, rp.raw)
					}
				case breaker.FailLocal:
					switch rp.status {
					case http.StatusOK:
						ok++
					case http.StatusTooManyRequests:
						if rp.retryAfter < 1 {
							t.Errorf("%s, FailLocal: request %d: 429 without Retry-After", phase, i)
						}
					default:
						t.Errorf("%s, FailLocal: request %d: status %d, want 200 or 429", phase, i, rp.status)
					}
				}
			}
			switch ep.policy {
			case breaker.FailOpen:
				if d := ep.brk.Stats().Degraded - degradedBefore; d != 6 {
					t.Errorf("%s, FailOpen: breaker counted %d degraded admissions, want 6", phase, d)
				}
				if d := ep.b.Stats().Layers[0].Degraded - layerDegradedBefore; d != 6 {
					t.Errorf("%s, FailOpen: the layer counted %d degraded admissions, want 6", phase, d)
				}
			case breaker.FailLocal:
				// The local share: its burst, plus what refills meanwhile.
				max := int(localLim.Burst) + int(time.Since(start)/(10*time.Second))
				if ok < int(localLim.Burst) || ok > max {
					t.Errorf("%s, FailLocal: %d of 6 admitted; want the local share %d", phase, ok, localLim.Burst)
				}
			}
		}
	}

	// recovered waits until every breaker has closed again after a call
	// that Redis answered.
	recovered := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			floodgatetest.Eventually(t, 10*time.Second, phase+": "+ep.name+" breaker closed", func() bool {
				send(ep, "probe-"+phase, 1)
				return ep.brk.State() == breaker.StateClosed
			})
		}
	}

	normal("before")

	rs.Pause()
	outage("paused")
	rs.Resume()
	recovered("resumed")
	normal("resumed")

	rs.Kill()
	outage("killed")
	rs.Restart()
	recovered("restarted")
	normal("restarted")
}

// gateEndpoint is one server whose bulkhead has one global layer: a
// distsem.Semaphore of limit 2 with the given failure policy and a breaker of
// its own. A request to /hold runs until the test sends on release.
type gateEndpoint struct {
	policy  breaker.Policy
	brk     *breaker.Breaker
	sem     *distsem.Semaphore
	srv     *httptest.Server
	c       *http.Client
	entered chan struct{}
	release chan struct{}
}

// hold starts k requests to /hold and waits until their handlers run. done
// lets them return and checks they were served.
func (ep *gateEndpoint) hold(t *testing.T, k int) (done func()) {
	t.Helper()
	replies := make(chan reply, k)
	for range k {
		go func() {
			rp, err := call(t, t.Context(), ep.c, ep.srv.URL, "GET", "/hold", "acme")
			if err != nil {
				t.Errorf("%v: holder: %v", ep.policy, err)
			}
			replies <- rp
		}()
	}
	for i := range k {
		select {
		case <-ep.entered:
		case <-time.After(10 * time.Second): // a failure bound, not synchronisation
			t.Fatalf("%v: only %d of %d holders admitted", ep.policy, i, k)
		}
	}
	return func() {
		t.Helper()
		for range k {
			ep.release <- struct{}{}
		}
		for range k {
			if rp := <-replies; rp.status != http.StatusOK {
				t.Errorf("%v: holder: status %d, want 200", ep.policy, rp.status)
			}
		}
	}
}

// refused checks that a request to / is refused with 503 and a Retry-After,
// without waiting long past the layer's MaxWait.
func (ep *gateEndpoint) refused(t *testing.T, phase string) {
	t.Helper()
	start := time.Now()
	rp, err := call(t, t.Context(), ep.c, ep.srv.URL, "GET", "/", "acme")
	if err != nil {
		t.Fatalf("%s, %v: %v", phase, ep.policy, err)
	}
	if rp.status != http.StatusServiceUnavailable || rp.retryAfter < 1 {
		t.Errorf("%s, %v: status %d, Retry-After %d, body %q; want 503 with Retry-After",
			phase, ep.policy, rp.status, rp.retryAfter, rp.raw)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("%s, %v: refusal took %v (MaxWait 1s)", phase, ep.policy, el)
	}
}

// TestRedisOutageGate: the same outage under a global distsem gate of limit
// 2: FailOpen admits beyond the limit, FailClosed answers 503 with
// Retry-After, FailLocal admits its local share of 1 and refuses the next
// after MaxWait; after Redis returns, the shared limit of 2 holds again.
func TestRedisOutageGate(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client()
	var eps []*gateEndpoint
	for _, p := range []breaker.Policy{breaker.FailOpen, breaker.FailClosed, breaker.FailLocal} {
		ep := &gateEndpoint{policy: p, entered: make(chan struct{}, 8), release: make(chan struct{})}
		ep.brk = breaker.New("bulkhead-gate-"+p.String(), breaker.Config{
			CallTimeout: 100 * time.Millisecond, OpenDuration: 300 * time.Millisecond, Jitter: -1,
			Logger: slog.New(slog.DiscardHandler),
		})
		ep.sem = distsem.New(rdb, "gate-"+p.String(), 2, distsem.Config{Breaker: ep.brk, Policy: p, LocalShare: 1})
		t.Cleanup(func() { ep.sem.Close() })
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			// Long enough for a queued Acquire to ride out its blip
			// allowance (three failed calls) and reach the failure policy
			// while the breaker is still closed.
			{Name: "global", Gate: ep.sem, MaxWait: time.Second},
		}})
		ep.srv = tenantServer(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				ep.entered <- struct{}{}
				<-ep.release
			}
		}), nil)
		ep.c = ep.srv.Client()
		ep.c.Timeout = 10 * time.Second
		eps = append(eps, ep)
	}

	// normal: two held at once across the fleet's Redis limit, a third refused.
	normal := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			done := ep.hold(t, 2)
			ep.refused(t, phase)
			done()
		}
	}
	outage := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			switch ep.policy {
			case breaker.FailOpen:
				ep.hold(t, 3)() // above the limit: nobody counts
			case breaker.FailClosed:
				for range 6 {
					ep.refused(t, phase)
				}
			case breaker.FailLocal:
				done := ep.hold(t, 1)
				ep.refused(t, phase) // the local share is 1
				done()
			}
		}
	}
	recovered := func(phase string) {
		t.Helper()
		for _, ep := range eps {
			floodgatetest.Eventually(t, 10*time.Second, phase+": "+ep.policy.String()+" breaker closed", func() bool {
				call(t, t.Context(), ep.c, ep.srv.URL, "GET", "/", "acme")
				return ep.brk.State() == breaker.StateClosed
			})
		}
	}

	normal("before")
	rs.Pause()
	outage("paused")
	rs.Resume()
	recovered("resumed")
	normal("resumed")
	rs.Kill()
	outage("killed")
	rs.Restart()
	recovered("restarted")
	normal("restarted")
}
