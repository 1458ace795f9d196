package bulkhead_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
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
	const callTimeout = 100 * time.Millisecond
	const slowest = 2 * time.Second // far above callTimeout, far below the client's 10s

	var eps []*outageEndpoint
	for _, p := range []breaker.Policy{breaker.FailOpen, breaker.FailClosed, breaker.FailLocal} {
		ep := &outageEndpoint{name: p.String(), policy: p}
		ep.brk = breaker.New("bulkhead-"+ep.name, breaker.Config{
			CallTimeout: callTimeout, OpenDuration: 300 * time.Millisecond, Jitter: -1,
			Logger: slog.New(slog.DiscardHandler),
		})
		cfg := shaper.RedisConfig{Breaker: ep.brk, Policy: p}
		if p == breaker.FailLocal {
			cfg.LocalLimit = localLim
		}
		m := shaper.NewRedisMeter(rdb, lim, cfg)
		ep.b = bulkhead.New(bulkhead.Config{
			Layers:         []bulkhead.Layer{{Name: "tenant", Key: bulkhead.ByTenant, Rate: redisRate{m}}},
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
					if rp.status != http.StatusServiceUnavailable || rp.retryAfter < 1 || rp.body.Error != "service_unavailable" {
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
				// TODO(merge): also check bulkhead's LayerStats.Degraded and
				// the Degraded header once shaper.Decision has Degraded
				// (bulkhead's degraded() is false until then).
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
			eventually(t, 10*time.Second, phase+": "+ep.name+" breaker closed", func() bool {
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
