// Command tour runs floodgate's three jobs in one process and prints what
// happened: capping a database pool, throttling job workers, and guarding an
// HTTP handler; then an adaptive gate finding how many calls a simulated
// backend can take, before and after its capacity halves (about 3 s, in real
// time). It needs nothing installed and builds no Redis client: its limiters
// are the in-process ones (semaphore, shaper, bulkhead, adaptive).
//
// The same tour over several simulated pods sharing one Redis is a command of
// its own, so that this one stays quick to build:
//
//	go -C examples run ./tour
//	go -C examples run ./tour/fleet -redis 127.0.0.1:6379   # or REDIS_ADDR=...
//
// With REDIS_ADDR set this tour says, in one line, that it ignores it and
// where the fleet tour is, then runs locally: the variable is often set for
// the other examples. The flags -redis and -pods, which this command took
// before the fleet tour moved out, are refused with that same pointer, since
// whoever passes them asked for something this command no longer does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/tour"
)

const fleetHint = "go -C examples run ./tour/fleet"

func main() {
	cfg := tour.Config{}
	flag.DurationVar(&cfg.Duration, "d", 3*time.Second, "how long each job runs")
	flag.String("redis", "", "moved: the tour over Redis is "+fleetHint+" -redis ADDR")
	flag.Int("pods", 0, "moved: the tour over several pods is "+fleetHint+" -pods N")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "redis" || f.Name == "pods" {
			fmt.Fprintf(os.Stderr, "tour: -%s is not a flag of this tour any more (it runs in this process only); for several pods sharing Redis run: %s -%s %s\n", f.Name, fleetHint, f.Name, f.Value)
			os.Exit(2)
		}
	})
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		fmt.Fprintf(os.Stderr, "tour: REDIS_ADDR=%s is not used: this tour runs in this process only; for several pods sharing that Redis run: %s\n", addr, fleetHint)
	}
	cfg.Progress = os.Stderr
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.TTY = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := tour.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}
