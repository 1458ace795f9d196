// Package tour is floodgate's tour, shared by its two commands: the three
// jobs of the README (capping a database pool, throttling job workers,
// guarding an HTTP handler), run for a while each, and the report of what
// happened; in one process, then an adaptive gate finding a simulated
// backend's capacity before and after it halves. It builds only the
// standard library and floodgate's in-process packages; the command
// examples/tour/fleet brings the Redis backend.
package tour

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Config is what Run needs.
type Config struct {
	// Shared is a backend whose limits hold for the whole fleet (Redis);
	// nil runs on in-process limiters only, as one pod.
	Shared *Backend
	Where  string // with Shared: what the pods are, for the report's first line
	Pods   int    // simulated pods with Shared, at least 2 (1 without)

	Duration time.Duration // how long each job runs
	Progress io.Writer     // where the progress line goes; nil for none
	TTY      bool          // Progress is a terminal: overwrite the line with \r
}

// Run runs the three jobs and writes the report to w. Without cfg.Shared it
// has one column, this process's limiters, and a fourth section, the
// adaptive gate (about 3.2s, whatever cfg.Duration); with it, two columns: a
// limiter per pod beside the shared one, so the report shows the fleet total
// that per-process limits let through beside the one the shared limit
// holds.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.Duration <= 0 {
		return fmt.Errorf("duration must be positive, got %v", cfg.Duration)
	}
	cols := []*Backend{LocalBackend("this process")}
	where := "local backends (semaphore, shaper, bulkhead), no servers"
	if cfg.Shared == nil {
		cfg.Pods = 1
	} else {
		if cfg.Pods < 2 {
			return fmt.Errorf("a shared backend needs at least 2 pods, got %d", cfg.Pods)
		}
		cols = []*Backend{LocalBackend("per-process limits"), cfg.Shared}
		where = cfg.Where
	}
	start := time.Now()
	then := ""
	if cfg.sections() > len(jobs) {
		then = fmt.Sprintf(", then an adaptive gate for %v", 2*adaptivePhase)
	}
	fmt.Fprintf(w, "floodgate tour: three jobs on %s, %v each%s\n", where, cfg.Duration, then)
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
	if n := cfg.sections(); n > len(jobs) {
		prog := startProgress(cfg, n, adaptiveTitle)
		tab, err := adaptiveJob(ctx)
		prog.stop()
		if err != nil {
			return fmt.Errorf("%d. adaptive gate: %w", n, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(w, "\n%d. %s\n", n, adaptiveTitle)
		tab.write(w)
	}
	fmt.Fprintf(w, "\ndone in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// sections is how many sections the report has: the jobs, and the adaptive
// gate's when the tour runs in one process.
func (cfg Config) sections() int {
	if cfg.Shared == nil {
		return len(jobs) + 1
	}
	return len(jobs)
}
