// Command pgxreplica caps expensive report queries against PostgreSQL with
// bulkheadpgx: at most -cap report queries at once (each caller waits at most
// 2s for a slot, then fails fast), while cheap queries are not limited. It
// runs a burst of both for -d and prints what happened.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/pgxreplica
//	go run ./examples/pgxreplica -metrics 127.0.0.1:9464 -d 1m
//
// With -metrics it serves GET /metrics through OpenTelemetry's Prometheus
// exporter (docs/metrics.md): the DB's classes (floodgate_limiter="db", per
// floodgate_class) and the reports' semaphore (floodgate_limiter="reports").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/examples/internal/examplemetrics"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5/pgxpool"
)

type config struct {
	URL      string
	Cap      int64         // report queries at once
	Callers  int           // goroutines running reports
	Query    time.Duration // how long one report query takes (pg_sleep)
	Duration time.Duration
	Metrics  string // serve GET /metrics on this address; "" for none
}

// Marker is in every report query, to find them in pg_stat_activity.
const Marker = "/* pgxreplica report */"

func main() {
	cfg := config{}
	flag.StringVar(&cfg.URL, "db", examplekit.EnvOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL URL (env DATABASE_URL)")
	flag.Int64Var(&cfg.Cap, "cap", 4, "report queries at once")
	flag.IntVar(&cfg.Callers, "callers", 12, "callers running report queries")
	flag.DurationVar(&cfg.Query, "query", 500*time.Millisecond, "duration of one report query")
	flag.DurationVar(&cfg.Duration, "d", 5*time.Second, "how long to run")
	flag.StringVar(&cfg.Metrics, "metrics", "", "serve GET /metrics (Prometheus) on this address while running, e.g. 127.0.0.1:9464")
	flag.Parse()
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
	scfg := semaphore.Config{}
	if m != nil {
		scfg = m.SemaphoreConfig("reports", scfg)
	}
	sem := semaphore.New(cfg.Cap, scfg)
	dcfg := bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: sem, MaxWait: 2 * time.Second},
	}}
	if m != nil {
		dcfg = m.DBConfig("db", dcfg)
	}
	db := bulkheadpgx.New(pool, dcfg)
	if m != nil {
		_, err1 := m.Semaphore("reports", sem)
		_, err2 := m.DB("db", db)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
	}
	reports := db.Class("reports")
	var inFlight, peak, done, refused, cheap atomic.Int64
	var firstErr error
	var once sync.Once
	fmt.Fprintf(w, "pgxreplica: %d callers run %v report queries for %v, at most %d at once, each waiting at most 2s\n",
		cfg.Callers, cfg.Query, cfg.Duration, cfg.Cap)
	rctx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	for range cfg.Callers {
		wg.Go(func() {
			for rctx.Err() == nil {
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
					refused.Add(1)
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
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	st := reports.Stats()
	fmt.Fprintf(w, "reports: %d done, %d refused after waiting 2s (ErrMaxWait), peak %d / cap %d in flight\n", done.Load(), refused.Load(), peak.Load(), cfg.Cap)
	fmt.Fprintf(w, "reports: %d calls, %d admitted, %d waited for a slot\n", st.Calls, st.Admitted, st.Wait.Count)
	fmt.Fprintf(w, "cheap:   %d queries, never waited for the report cap\n", cheap.Load())
	if ctx.Err() != nil {
		fmt.Fprintln(w, "interrupted: stopped cleanly")
	}
	return nil
}
