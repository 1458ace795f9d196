// Command fleet runs floodgate's tour (examples/tour) as several simulated
// pods, each with its own Redis client, sharing one Redis: every job runs
// twice at once, once with a limiter per pod and once with the limit shared
// through Redis, so the report shows the fleet total that per-process limits
// let through beside the one the shared limit holds.
//
//	go -C examples run ./tour/fleet -redis 127.0.0.1:6379   # or REDIS_ADDR=127.0.0.1:6379
//
// Every run uses fresh keys under floodgate-tour:, so runs never see each
// other's state; it never flushes anything.
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
	"github.com/floodgate-go/floodgate/examples/internal/tour"
	"github.com/redis/go-redis/v9"
)

// config is what run needs; main fills it from flags.
type config struct {
	Redis    string        // Redis address
	Pods     int           // simulated pods, at least 2
	Duration time.Duration // how long each job runs
	Progress io.Writer     // where the progress line goes; nil for none
	TTY      bool          // Progress is a terminal: overwrite the line with \r
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Redis, "redis", examplekit.EnvOr("REDIS_ADDR", "127.0.0.1:6379"), "Redis address (host:port) the pods share (env REDIS_ADDR)")
	flag.IntVar(&cfg.Pods, "pods", 3, "simulated pods, each with its own Redis client")
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
		fmt.Fprintln(os.Stderr, "fleet tour:", err)
		os.Exit(1)
	}
}

// run runs the tour over cfg.Pods pods sharing the Redis at cfg.Redis and
// writes the report to w.
func run(ctx context.Context, cfg config, w io.Writer) error {
	if cfg.Redis == "" {
		return fmt.Errorf("-redis is empty; give the Redis address, or run the tour without Redis: go -C examples run ./tour")
	}
	if cfg.Pods < 2 {
		return fmt.Errorf("-pods must be at least 2, got %d", cfg.Pods)
	}
	if cfg.Duration <= 0 {
		return fmt.Errorf("duration must be positive, got %v", cfg.Duration)
	}
	shared, closeShared, err := redisBackend(ctx, cfg.Redis, cfg.Pods)
	if err != nil {
		return err
	}
	defer closeShared()
	return tour.Run(ctx, tour.Config{
		Shared:   shared,
		Where:    fmt.Sprintf("%d simulated pods, each with its own Redis client at %s", cfg.Pods, cfg.Redis),
		Pods:     cfg.Pods,
		Duration: cfg.Duration,
		Progress: cfg.Progress,
		TTY:      cfg.TTY,
	}, w)
}
