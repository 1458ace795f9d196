package bulkhead_test

import (
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// fleetResult is what the clients of a fleet saw.
type fleetResult struct {
	rated    int64         // 200s on the rate-limited route, all servers
	limited  int64         // 429s on it
	slow     int64         // 200s on the slow route
	maxConc  int64         // most handlers running at once, all servers
	elapsed  time.Duration // from before the first request to after the last response
	admitted uint64        // the rate layer's Admitted, summed over the bulkheads
}

// runFleet starts three httptest.Servers, server i with its own bulkhead
// whose layers are a global gate and a per-tenant rate on /rated, both made by
// mk(i), and drives them concurrently for d: on each server, drivers
// goroutines call the slow route (a handler that works 20ms) and as many call
// the rated route, all as tenant acme.
func runFleet(t *testing.T, d time.Duration, drivers int, mk func(i int) (bulkhead.Rate, floodgate.Gate)) fleetResult {
	t.Helper()
	var cur, maxConc atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for m := maxConc.Load(); n > m && !maxConc.CompareAndSwap(m, n); m = maxConc.Load() {
		}
		if r.URL.Path == "/slow" {
			time.Sleep(20 * time.Millisecond) // the handler's work, so that handlers overlap
		}
	})
	var (
		bs   []*bulkhead.Bulkhead
		srvs []string
		cs   []*http.Client
	)
	for i := range 3 {
		rate, gate := mk(i)
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "global", Gate: gate, MaxWait: 200 * time.Millisecond},
			{Name: "tenant", Route: "/rated", Key: bulkhead.ByTenant, Rate: rate},
		}})
		srv := tenantServer(t, b, h, nil)
		c := srv.Client()
		c.Timeout = 10 * time.Second
		bs, srvs, cs = append(bs, b), append(srvs, srv.URL), append(cs, c)
	}

	var res fleetResult
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := range 3 {
		for _, path := range []string{"/slow", "/rated"} {
			for range drivers {
				wg.Go(func() {
					for time.Now().Before(stop) {
						rp, err := call(t, t.Context(), cs[i], srvs[i], "GET", path, "acme")
						if err != nil {
							t.Errorf("server %d GET %s: %v", i, path, err)
							return
						}
						switch {
						case path == "/slow" && rp.status == http.StatusOK:
							atomic.AddInt64(&res.slow, 1)
						case rp.status == http.StatusOK:
							atomic.AddInt64(&res.rated, 1)
						case rp.status == http.StatusTooManyRequests:
							atomic.AddInt64(&res.limited, 1)
						case rp.status == http.StatusServiceUnavailable && rp.retryAfter >= 1:
							// the global gate stayed full for MaxWait
						default:
							t.Errorf("server %d GET %s: status %d, Retry-After %d", i, path, rp.status, rp.retryAfter)
							return
						}
					}
				})
			}
		}
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.maxConc = maxConc.Load()
	for _, b := range bs {
		res.admitted += layerStats(t, b, "tenant").Admitted
	}
	return res
}

// TestRedisFleet: three servers, each with its own Redis client and bulkhead,
// share a per-tenant Redis rate and a global distsem cap. Together they admit
// at most burst + rate × elapsed (+1) on the rated route and never run more
// handlers at once than the distsem limit; the same fleet with local leaves
// admits about three times the rate and runs more handlers than the limit.
func TestRedisFleet(t *testing.T) {
	db := redistest.Connect(t)
	addr := os.Getenv("REDIS_ADDR")
	// A rate the drive outruns even on a loaded machine (at 20/s it sent 35
	// requests to the rated route in 1.6s, all admitted, and the test saw
	// no refusal).
	lim := shaper.Limit{Rate: shaper.PerSecond(10), Burst: 5}
	const gateLimit = 4
	const d = 1500 * time.Millisecond
	bound := func(elapsed time.Duration) int64 {
		return lim.Burst + int64(elapsed.Seconds()*float64(lim.Rate.Count)) + 1
	}

	shared := runFleet(t, d, 3, func(int) (bulkhead.Rate, floodgate.Gate) {
		rdb := redis.NewClient(redistest.Options(addr))
		t.Cleanup(func() { rdb.Close() })
		m := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: db.Key("rate:")})
		sem := distsem.New(rdb, db.Key("global"), gateLimit, distsem.Config{})
		t.Cleanup(func() { sem.Close() })
		return m, sem
	})
	t.Logf("Redis fleet: %+v, rate bound %d", shared, bound(shared.elapsed))
	if shared.rated > bound(shared.elapsed) {
		t.Errorf("Redis fleet admitted %d on the rated route in %v, bound burst + rate × elapsed + 1 = %d",
			shared.rated, shared.elapsed, bound(shared.elapsed))
	}
	if shared.rated < lim.Burst || shared.limited == 0 {
		t.Errorf("Redis fleet: %d admitted, %d limited on the rated route; want at least the burst %d, and refusals",
			shared.rated, shared.limited, lim.Burst)
	}
	if shared.admitted != uint64(shared.rated) {
		t.Errorf("rate layers' Admitted sum %d, clients saw %d 200s", shared.admitted, shared.rated)
	}
	if shared.maxConc > gateLimit {
		t.Errorf("Redis fleet ran %d handlers at once, distsem limit %d", shared.maxConc, gateLimit)
	}
	if shared.maxConc < 2 || shared.slow == 0 {
		t.Errorf("Redis fleet: at most %d handlers at once, %d slow requests served; the drive did not load the gate",
			shared.maxConc, shared.slow)
	}

	// The contrast: the same fleet with a local meter and a local semaphore
	// per server.
	local := runFleet(t, d, 3, func(int) (bulkhead.Rate, floodgate.Gate) {
		return shaper.NewMeter(lim), semaphore.New(gateLimit, semaphore.Config{})
	})
	t.Logf("local fleet: %+v, one server's rate bound %d", local, bound(local.elapsed))
	if local.rated <= 2*bound(local.elapsed) {
		t.Errorf("local fleet admitted %d on the rated route in %v; want more than twice one limit's bound %d (three limits)",
			local.rated, local.elapsed, bound(local.elapsed))
	}
	if local.maxConc <= gateLimit {
		t.Errorf("local fleet ran at most %d handlers at once; want more than one gate's limit %d (three gates)",
			local.maxConc, gateLimit)
	}
}
