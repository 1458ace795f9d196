// Command pgxreplica caps expensive report queries against PostgreSQL with
// bulkheadpgx, as the README's job 1: at most -cap report queries at once
// (50 by default), each waiting at most 2s for a slot and failing fast after
// (ErrMaxWait, with a RetryAfter), while cheap queries are not limited. It
// runs a burst of both for -d and prints what happened.
//
// With -redis (or REDIS_ADDR) the cap is the fleet's: a distsem semaphore in
// Redis named -name, shared by every pgxreplica that uses it (run two in two
// terminals: together they stay within -cap). If Redis goes away, each
// process admits through a local share of -share (breaker.FailLocal; the
// README's 4, about 50 / 12 pods). Without -redis the cap is this process's
// (a semaphore.Weighted).
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go -C examples run ./pgxreplica
//	go -C examples run ./pgxreplica -redis 127.0.0.1:6379 -callers 30
//	go -C examples run ./pgxreplica -metrics 127.0.0.1:9464 -d 1m
//
// A refused caller does what a request handler would do with the refusal's
// RetryAfter (answer 503 with Retry-After): it comes back after that delay,
// not at once.
//
// With -metrics it serves GET /metrics through OpenTelemetry's Prometheus
// exporter (docs/metrics.md): the DB's classes (floodgate_limiter="db", per
// floodgate_part) and the reports' gate (floodgate_limiter="reports").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/examples/internal/examplemetrics"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The README's job 1: 50 report queries at once across the fleet, a wait of
// at most 2 s, a local share of 4 per pod while Redis is down.
const (
	defaultCap   = 50
	maxWait      = 2 * time.Second
	defaultShare = 4
)

type config struct {
	URL      string
	Cap      int64         // report queries at once
	Callers  int           // goroutines running reports
	Query    time.Duration // how long one report query takes (pg_sleep)
	Duration time.Duration
	Metrics  string // serve GET /metrics on this address; "" for none
	Redis    string // Redis address for the fleet-wide cap; "" for this process's
	Name     string // the cap's name in Redis
	Share    int64  // the local share under FailLocal, with Redis
}

// Marker is in every report query, to find them in pg_stat_activity.
const Marker = "/* pgxreplica report */"

func main() {
	cfg := config{}
	flag.StringVar(&cfg.URL, "db", examplekit.EnvOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL URL (env DATABASE_URL)")
	flag.Int64Var(&cfg.Cap, "cap", defaultCap, "report queries at once (with -redis: across every process sharing -name)")
	flag.IntVar(&cfg.Callers, "callers", 200, "callers running report queries")
	flag.DurationVar(&cfg.Query, "query", time.Second, "duration of one report query")
	flag.StringVar(&cfg.Redis, "redis", os.Getenv("REDIS_ADDR"), "Redis address for a fleet-wide cap (env REDIS_ADDR); empty: a cap for this process")
	flag.StringVar(&cfg.Name, "name", "replica-reports", "name of the fleet-wide cap in Redis")
	flag.Int64Var(&cfg.Share, "share", defaultShare, "with -redis: report queries this process may run while Redis is down (FailLocal)")
	flag.DurationVar(&cfg.Duration, "d", 5*time.Second, "how long to run")
	flag.StringVar(&cfg.Metrics, "metrics", "", "serve GET /metrics (Prometheus) on this address while running, e.g. 127.0.0.1:9464")
	flag.Parse()
	redis.SetLogger(examplekit.Quiet{}) // a missing Redis is reported once, by run
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pgxreplica:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, w io.Writer) error {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return fmt.Errorf("bad DATABASE_URL: %v", err)
	}
	pcfg.MaxConns = int32(cfg.Cap) + 4 // room for the cheap queries beside the capped ones
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("bad DATABASE_URL: %v", err)
	}
	defer pool.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return fmt.Errorf("PostgreSQL at %s is unreachable (%s); set DATABASE_URL or -db", pcfg.ConnConfig.Host, strings.Join(strings.Fields(err.Error()), " "))
	}

	m, stopMetrics, err := examplemetrics.Serve(cfg.Metrics, w)
	if err != nil {
		return err
	}
	defer stopMetrics()
	gate, where, closeGate, err := reportsGate(ctx, cfg, m)
	if err != nil {
		return err
	}
	defer closeGate()
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{
		Classes:  []bulkheadpgx.Class{{Name: "reports", Gate: gate, MaxWait: maxWait}},
		Observer: examplemetrics.Observer(m, "db"),
	})
	reports := db.Class("reports")
	var inFlight, peak, done, refusedAtOnce, refusedWaited, cheap atomic.Int64
	var firstErr error
	var once sync.Once
	fmt.Fprintf(w, "pgxreplica: %d callers run %v report queries for %v, at most %d at once (%s), each waiting at most %v\n",
		cfg.Callers, cfg.Query, cfg.Duration, cfg.Cap, where, maxWait)
	rctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	for range cfg.Callers {
		wg.Go(func() {
			for rctx.Err() == nil {
				t0 := time.Now()
				err := reports.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
					}
					_, err := c.Exec(ctx, "SELECT pg_sleep($1) "+Marker, cfg.Query.Seconds())
					return err
				})
				switch {
				case err == nil:
					done.Add(1)
				case errors.Is(err, bulkheadpgx.ErrMaxWait):
					// No slot within 2s: at once when the gate's estimate
					// says the wait would be longer, else after waiting.
					if time.Since(t0) >= maxWait-maxWait/10 {
						refusedWaited.Add(1)
					} else {
						refusedAtOnce.Add(1)
					}
					// A handler would answer 503 with Retry-After; this
					// caller comes back after it, as a client would.
					var re *bulkheadpgx.RejectError
					if errors.As(err, &re) {
						examplekit.Sleep(rctx, re.RetryAfter())
					}
				case ctx.Err() != nil:
					return
				default:
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Go(func() { // cheap queries: the default class, unlimited
		for rctx.Err() == nil {
			var one int
			if err := db.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil {
				cheap.Add(1)
			}
			examplekit.Sleep(rctx, 10*time.Millisecond)
		}
	})
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	st := reports.Stats()
	fmt.Fprintf(w, "reports: %d done, %d refused (ErrMaxWait: %d at once, the wait being estimated past %v; %d after waiting %v), peak %d / cap %d in flight\n",
		done.Load(), refusedAtOnce.Load()+refusedWaited.Load(), refusedAtOnce.Load(), maxWait, refusedWaited.Load(), maxWait, peak.Load(), cfg.Cap)
	fmt.Fprintf(w, "reports: %d calls, %d admitted, %d refused (the class's Stats)\n", st.Calls, st.Admitted, st.RejectedMaxWait)
	fmt.Fprintf(w, "cheap:   %d queries, never waited for the report cap\n", cheap.Load())
	if ctx.Err() != nil {
		fmt.Fprintln(w, "interrupted: stopped cleanly")
	}
	return nil
}

// reportsGate returns the cap of the report queries: with cfg.Redis, a
// distsem semaphore that every process using cfg.Name shares (FailLocal with a
// local share of cfg.Share while Redis is down), else a semaphore.Weighted of
// this process. The gate is observed through m when m is not nil.
func reportsGate(ctx context.Context, cfg config, m *otelfloodgate.Metrics) (gate floodgate.Gate, where string, closeGate func(), err error) {
	if cfg.Redis == "" {
		sem := semaphore.New(cfg.Cap, semaphore.Config{Observer: examplemetrics.Observer(m, "reports")})
		return sem, "this process", func() {}, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second})
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, "", nil, fmt.Errorf("redis at %s is unreachable (%v); start one, or run without -redis / REDIS_ADDR for a cap of this process", cfg.Redis, err)
	}
	sem := distsem.New(rdb, cfg.Name, cfg.Cap, distsem.Config{
		Policy:     breaker.FailLocal, // Redis down: this process admits through a local share
		LocalShare: cfg.Share,
		Observer:   examplemetrics.Observer(m, "reports"),
	})
	closeGate = func() {
		sem.Close()
		rdb.Close()
	}
	where = fmt.Sprintf("fleet-wide through Redis at %s as %q; %d in this process while Redis is down", cfg.Redis, cfg.Name, cfg.Share)
	return sem, where, closeGate, nil
}
