// Command tour runs floodgate's three jobs in one process and prints what
// happened: capping a database pool, throttling job workers, and guarding an
// HTTP handler. With no flags it needs nothing installed (local backends:
// semaphore, shaper, bulkhead). With -redis ADDR it runs every job twice at
// once over several simulated pods (separate Redis clients): once with a
// limiter per pod, once with the limit shared through Redis, so the report
// shows the fleet total that per-process limits let through beside the one
// the shared limit holds.
//
//	go run ./examples/tour
//	go run ./examples/tour -redis 127.0.0.1:6379   # or REDIS_ADDR=127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/redis/go-redis/v9"
)

// config is what run needs; main fills it from flags.
type config struct {
	Redis    string        // Redis address; "" runs on local backends only
	Pods     int           // simulated pods with Redis (1 without)
	Duration time.Duration // how long each job runs
	Progress io.Writer     // where the progress line goes; nil for none
	TTY      bool          // Progress is a terminal: overwrite the line with \r
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Redis, "redis", os.Getenv("REDIS_ADDR"), `run against the Redis at this address (host:port) with several simulated pods (env REDIS_ADDR; -redis "" for local backends only)`)
	flag.IntVar(&cfg.Pods, "pods", 3, "simulated pods with -redis")
	flag.DurationVar(&cfg.Duration, "d", 3*time.Second, "how long each job runs")
	flag.Parse()
	redis.SetLogger(examplekit.Quiet{}) // errors are reported once, by run
	cfg.Progress = os.Stderr
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.TTY = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

// run runs the three jobs and writes the report to w.
func run(ctx context.Context, cfg config, w io.Writer) error {
	if cfg.Duration <= 0 {
		return fmt.Errorf("duration must be positive, got %v", cfg.Duration)
	}
	cols := []*backend{localBackend("this process")}
	where := "local backends (semaphore, shaper, bulkhead), no servers"
	if cfg.Redis == "" {
		cfg.Pods = 1
	} else {
		if cfg.Pods < 2 {
			return fmt.Errorf("-pods must be at least 2 with -redis, got %d", cfg.Pods)
		}
		shared, err := redisBackend(ctx, cfg.Redis, cfg.Pods)
		if err != nil {
			return err
		}
		defer shared.close()
		cols = []*backend{localBackend("per-process limits"), shared}
		where = fmt.Sprintf("%d simulated pods, each with its own Redis client at %s", cfg.Pods, cfg.Redis)
	}
	start := time.Now()
	fmt.Fprintf(w, "floodgate tour: three jobs on %s, %v each\n", where, cfg.Duration)
	fmt.Fprintf(w, "(queued = waited at least %v for a slot; waits are from asking to starting)\n", queuedAfter)
	for i, job := range jobs {
		prog := startProgress(cfg, i+1, job.title)
		tab, err := job.run(ctx, cfg, cols, prog)
		prog.stop()
		if err != nil {
			return fmt.Errorf("job %d: %w", i+1, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(w, "\n%d. %s\n", i+1, job.title)
		tab.write(w)
	}
	fmt.Fprintf(w, "\ndone in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// quiet drops go-redis's own log lines (dial retries), so that a missing
// server is reported in one line.
