package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// tenantVary is throttled's key: the tenant from the verified identity, the
// same key the floodgate layers use.
type tenantVary struct{}

func (tenantVary) Key(r *http.Request) string {
	id, _ := bulkhead.IdentityFrom(r.Context())
	return id.Tenant
}

// httpImpl is one HTTP admission middleware around a handler.
type httpImpl struct {
	name string
	h    http.Handler
}

// httpImpls returns the middlewares of the HTTP benchmarks around next, each
// with its own state, every request admitted: a bare handler; floodgate's
// bulkhead with one rate layer (GCRA meter keyed by tenant) and one
// concurrency layer (a semaphore); failsafe-go's failsafehttp with a rate
// limiter and a bulkhead; throttled's HTTPRateLimiterCtx (GCRA, memstore,
// keyed by tenant; it has no concurrency limit).
func httpImpls(b *testing.B, next http.Handler) []httpImpl {
	// Limits no benchmark run can reach, with a tolerance (burst/rate, 43 s) no
	// preempted goroutine's stale clock reading can exceed.
	const rate, burst = 1e8, 1 << 32

	fg := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
		{Name: "rate", Key: bulkhead.ByTenant, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(rate), Burst: burst})},
		{Name: "conc", Gate: semaphore.New(64, semaphore.Config{})},
	}})

	fsRate := ratelimiter.NewBursty[*http.Response](rate, time.Second)
	fsBulk := fsbulkhead.New[*http.Response](64)

	st, err := memstore.NewCtx(65536)
	if err != nil {
		b.Fatal(err)
	}
	th, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(rate), MaxBurst: burst})
	if err != nil {
		b.Fatal(err)
	}
	thl := &throttled.HTTPRateLimiterCtx{RateLimiter: th, VaryBy: tenantVary{}}

	return []httpImpl{
		{"bare", next},
		{"floodgate", fg.Handler(next)},
		{"failsafehttp", failsafehttp.NewHandler(next, fsRate, fsBulk)},
		{"throttled", thl.RateLimit(next)},
	}
}

// BenchmarkBulkhead: per-request overhead of HTTP admission middleware with
// local state (httpImpls), every request admitted, handlers called directly (no
// network). Target: impl=floodgate: ns/op ≤ 1× impl=failsafehttp;
// impl=floodgate: ns/op ≤ 1× impl=throttled.
func BenchmarkBulkhead(b *testing.B) {
	var served atomic.Int64 // every request must be admitted, or the comparison is void
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	for _, impl := range httpImpls(b, bare) {
		r := httptest.NewRequest("GET", "/items", nil)
		r = r.WithContext(bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "acme", Tier: "gold"}))
		b.Run("impl="+impl.name, func(b *testing.B) {
			w := httptest.NewRecorder()
			impl.h.ServeHTTP(w, r)
			if w.Code != http.StatusNoContent {
				b.Fatalf("%s: status %d, want 204 (admitted)", impl.name, w.Code)
			}
			b.ReportAllocs()
			served.Store(0)
			n := int64(0)
			for b.Loop() {
				impl.h.ServeHTTP(w, r)
				n++
			}
			if served.Load() != n {
				b.Fatalf("%s: %d of %d requests admitted", impl.name, served.Load(), n)
			}
		})
		b.Run("impl="+impl.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			served.Store(0)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				w := httptest.NewRecorder()
				for pb.Next() {
					impl.h.ServeHTTP(w, r)
					n.Add(1)
				}
			})
			// throttled's memstore denies a few updates that lose a
			// compare-and-swap race under contention: report them, and fail
			// only past 1%, where the cheaper denials would skew its ns/op
			// (on a loaded machine a short round saw 17 of 10000, 0.17%).
			// Every other middleware must admit every request.
			denied := n.Load() - served.Load()
			b.ReportMetric(float64(denied), "denied")
			tolerated := int64(0)
			if impl.name == "throttled" {
				tolerated = n.Load() / 100
			}
			if denied > tolerated {
				b.Fatalf("%s: %d of %d requests admitted", impl.name, served.Load(), n.Load())
			}
		})
	}
}

// loopbackClients is the number of keep-alive clients of BenchmarkBulkheadLoopback.
const loopbackClients = 32

// BenchmarkBulkheadLoopback: the middlewares of httpImpls over real loopback
// sockets, in one run: a net/http server on 127.0.0.1 (httptest.Server) and
// loopbackClients goroutines, each a keep-alive client (one net/http
// Transport with that many idle connections) sending GET requests one after
// the other and reading each response to the end. An authentication
// middleware in front of every implementation, bare included, puts the
// tenant's Identity in the request context, as an application's would. Reports
// req/s; ns/op and allocs/op are per request, client and server together.
func BenchmarkBulkheadLoopback(b *testing.B) {
	var served atomic.Int64
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	for _, impl := range httpImpls(b, bare) {
		b.Run("impl="+impl.name+"/clients="+strconv.Itoa(loopbackClients), func(b *testing.B) {
			auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := bulkhead.Identity{Tenant: "acme", Tier: "gold"}
				impl.h.ServeHTTP(w, r.WithContext(bulkhead.WithIdentity(r.Context(), id)))
			})
			srv := httptest.NewServer(auth)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: loopbackClients, MaxConnsPerHost: loopbackClients}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			url := srv.URL + "/items"
			get := func() (int, error) {
				resp, err := client.Get(url)
				if err != nil {
					return 0, err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode, err
			}
			// Open every client's connection before the clock starts.
			var warm sync.WaitGroup
			for range loopbackClients {
				warm.Go(func() {
					if code, err := get(); err != nil || code != http.StatusNoContent {
						b.Errorf("%s: status %d, %v; want 204 (admitted)", impl.name, code, err)
					}
				})
			}
			warm.Wait()
			if b.Failed() {
				return
			}
			b.ReportAllocs()
			served.Store(0)
			var next, denied atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range loopbackClients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						code, err := get()
						if err != nil {
							b.Error(err)
							return
						}
						if code != http.StatusNoContent {
							denied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(denied.Load()), "denied")
			if denied.Load()*1000 > int64(b.N) {
				b.Fatalf("%s: %d of %d requests denied", impl.name, denied.Load(), b.N)
			}
		})
	}
}
