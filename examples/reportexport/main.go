// Command reportexport is an HTTP API guarded by a bulkhead, with the
// README's job 3 policies: a global cap (200 at once), tenant tiers (free
// 100/min, gold 1000/min), GET /items at 5000/min per tenant, and POST
// /reports/export-pdf at 5/min and 2 at once per tenant (a third at once is
// refused, never queued), answered over the limits with 429 and an honest
// Retry-After. With -redis (or REDIS_ADDR) the limits are shared by every
// process using that Redis; without it they hold in this process. If Redis
// goes away, every limit falls back to this process's share of it
// (breaker.FailLocal: the limit divided by -pods), so the API stays available
// and the fleet stays within the limits.
//
//	go -C examples run ./reportexport -redis 127.0.0.1:6379
//	curl -i -H 'X-API-Key: demo-free' -X POST localhost:8080/reports/export-pdf
//	curl localhost:8080/metrics
//
// GET /metrics serves every limiter's metrics (docs/metrics.md) through
// OpenTelemetry's Prometheus exporter, each under its name below
// (floodgate_limiter="export", ...; the bulkhead's layers under
// floodgate_limiter="api", per floodgate_part).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The README's job 3: global 200 at once (waiting up to 1s, then 503), tiers
// free 100/min and gold 1000/min, exports 5/min and 2 at once per tenant,
// never queued.
const (
	globalCap                                 = 200
	globalWait                                = time.Second
	freePerMin, goldPerMin                    = 100, 1000
	exportPerMin, exportRunning               = 5, 2
	exportWait                  time.Duration = -1
)

type config struct {
	Pods   int           // processes sharing the limits: each one's share while Redis is down (0: 1)
	Addr   string        // listen address
	Redis  string        // Redis address; "" for local limits
	Prefix string        // Redis key prefix of the limits
	Export time.Duration // how long one PDF takes to render
}

func main() {
	cfg := config{Export: 2 * time.Second, Pods: 2}
	flag.StringVar(&cfg.Addr, "addr", examplekit.EnvOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	flag.StringVar(&cfg.Redis, "redis", os.Getenv("REDIS_ADDR"), "Redis address for fleet-wide limits (env REDIS_ADDR); empty: limits of this process only")
	flag.StringVar(&cfg.Prefix, "prefix", "reportexport:", "Redis key prefix of the limits")
	flag.DurationVar(&cfg.Export, "render", cfg.Export, "how long rendering one PDF takes")
	flag.IntVar(&cfg.Pods, "pods", cfg.Pods, "with -redis: processes sharing the limits; while Redis is down each enforces 1/pods of every limit")
	flag.Parse()
	redis.SetLogger(examplekit.Quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "reportexport:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down cleanly. ready, if non-nil, is
// called with the address once it listens.
func run(ctx context.Context, cfg config, log io.Writer, ready func(addr string)) error {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	m, err := otelfloodgate.New(mp)
	if err != nil {
		return err
	}
	if cfg.Pods < 0 {
		return fmt.Errorf("-pods must be at least 1, got %d", cfg.Pods)
	}
	lim, closeLim, err := limiters(ctx, cfg.Redis, cfg.Prefix, max(cfg.Pods, 1), m)
	if err != nil {
		return err
	}
	defer closeLim()
	b := bulkhead.New(bulkhead.Config{Observer: m.Observer("api"), Layers: []bulkhead.Layer{
		{Name: "global", Gate: lim.gate("global", globalCap), MaxWait: globalWait}, // 503
		{Name: "tier", Key: bulkhead.ByTenant, Tiers: map[string]bulkhead.Rate{ // 429
			"free": lim.rate("tier-free", shaper.Limit{Rate: shaper.PerMinute(freePerMin), Burst: freePerMin}),
			"gold": lim.rate("tier-gold", shaper.Limit{Rate: shaper.PerMinute(goldPerMin), Burst: goldPerMin}),
		}},
		{Name: "items", Route: "GET /items", Key: bulkhead.ByTenant,
			Rate: lim.rate("items", shaper.Limit{Rate: shaper.PerMinute(5000)})},
		{Name: "export-pdf", Route: "POST /reports/export-pdf", Key: bulkhead.ByTenant, MaxWait: exportWait, // never queue
			Rate:      lim.rate("export", shaper.Limit{Rate: shaper.PerMinute(exportPerMin), Burst: exportPerMin}),
			KeyedGate: lim.keyed("export-running", exportRunning)},
	}})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"items":[]}`)
	})
	mux.HandleFunc("POST /reports/export-pdf", func(w http.ResponseWriter, r *http.Request) {
		select { // rendering the PDF
		case <-time.After(cfg.Export):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, `{"status":"done"}`)
	})
	root := http.NewServeMux()
	root.Handle("/", demoAuth(b.Handler(mux)))
	// The metrics, outside the bulkhead and without an API key. In production,
	// serve them on an address only the scraper reaches.
	root.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 5 * time.Second}
	where := "limits of this process only"
	if cfg.Redis != "" {
		where = "limits shared through Redis at " + cfg.Redis
	}
	fmt.Fprintf(log, "reportexport: listening on http://%s (%s); try: curl -i -H 'X-API-Key: demo-free' -X POST http://%s/reports/export-pdf\n", ln.Addr(), where, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(log, "reportexport: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// demoKeys stands in for real authentication (an API-key store, a JWT
// verifier): it maps a key to the identity it was issued to. The bulkhead
// charges every quota to that verified identity, never to a tenant name the
// client sends.
var demoKeys = map[string]bulkhead.Identity{
	"demo-free": {Tenant: "acme", Tier: "free", Subject: "demo-free"},
	"demo-gold": {Tenant: "globex", Tier: "gold", Subject: "demo-gold"},
}

func demoAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := demoKeys[r.Header.Get("X-API-Key")]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"unauthorized","message":"Send X-API-Key: demo-free or demo-gold."}`)
			return
		}
		next.ServeHTTP(w, r.WithContext(bulkhead.WithIdentity(r.Context(), id)))
	})
}

// limiterSet makes the leaves of the layers: in-process, or through Redis.
type limiterSet struct {
	gate  func(name string, limit int64) floodgate.Gate
	keyed func(name string, limit int64) floodgate.KeyedGate
	rate  func(name string, lim shaper.Limit) bulkhead.Rate
}

// limiters returns the leaves, each observed through m under its name (a
// local shaper.Meter has no Observer: the bulkhead's layer reports its
// decisions).
func limiters(ctx context.Context, addr, prefix string, pods int, m *otelfloodgate.Metrics) (limiterSet, func(), error) {
	if addr == "" {
		return limiterSet{
			gate: func(name string, n int64) floodgate.Gate {
				return semaphore.New(n, semaphore.Config{Observer: m.Observer(name)})
			},
			keyed: func(name string, n int64) floodgate.KeyedGate {
				return semaphore.NewKeyed(n, semaphore.KeyedConfig{Observer: m.Observer(name)})
			},
			rate: func(_ string, l shaper.Limit) bulkhead.Rate { return shaper.NewMeter(l) },
		}, func() {}, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second})
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return limiterSet{}, nil, fmt.Errorf("redis at %s is unreachable (%v); start one or run without -redis for local limits", addr, err)
	}
	// One breaker for the one Redis. Every limit fails over to this
	// process's share of it (FailLocal): a dead Redis costs neither
	// availability (FailClosed would answer 503 to every request, through
	// the global cap) nor protection (FailOpen would drop every limit).
	brk := breaker.New(addr, breaker.Config{Observer: m.Observer(addr)})
	share := func(n int64) int64 { return max(1, n/int64(pods)) }
	var closers []func() error
	closers = append(closers, rdb.Close)
	return limiterSet{
			gate: func(name string, n int64) floodgate.Gate {
				s := distsem.New(rdb, prefix+name, n, distsem.Config{Breaker: brk,
					Policy: breaker.FailLocal, LocalShare: share(n), Observer: m.Observer(name)})
				closers = append(closers, s.Close)
				return s
			},
			keyed: func(name string, n int64) floodgate.KeyedGate {
				k := distsem.NewKeyed(rdb, prefix+name+":", n, distsem.KeyedConfig{Config: distsem.Config{Breaker: brk,
					Policy: breaker.FailLocal, LocalShare: share(n), Observer: m.Observer(name)}})
				closers = append(closers, k.Close)
				return k
			},
			rate: func(name string, l shaper.Limit) bulkhead.Rate {
				// The local meter admits 1/pods of the rate: the same count
				// over pods times the period, with a burst of 1/pods.
				local := shaper.Limit{Rate: shaper.Rate{Count: l.Rate.Count, Period: l.Rate.Period * time.Duration(pods)}, Burst: share(max(l.Burst, l.Rate.Count))}
				return shaperredis.NewMeter(rdb, l, shaperredis.Config{Prefix: prefix + name + ":", Breaker: brk,
					Policy: breaker.FailLocal, LocalShare: local, Observer: m.Observer(name)})
			},
		}, func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}, nil
}
