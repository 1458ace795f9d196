package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	"github.com/floodgate-go/floodgate/semaphore"
)

// The overload-by-criticality rows of the report: internal/adaptsim's
// StandardOverload (four classes mixed 10/30/30/30 at 3× the downstream's
// capacity for 20 s, half the capacity before and after) through floodgate's
// bulkhead with Classes over a semaphore and over an adaptive.Gate, beside
// failsafe-go's prioritized adaptive limiter (fixed and adaptive limit) and
// its bulkhead. TestShedSim writes a markdown section to the file named by
// SHED_SIM_OUT, which the report puts in RESULTS.md under "Overload:
// shedding by criticality (simulator)". It runs ADAPTIVE_SIM_SEEDS runs per
// limiter, at most 7 (default 7; 3 with -short).
//
//	SHED_SIM_OUT=/tmp/shed.md go test -run 'TestShedSim$' -v

// fsPriorities are failsafe-go's priorities for the scenario's classes, most
// critical first.
var fsPriorities = map[string]priority.Priority{
	adaptsim.Critical:  priority.VeryHigh,
	adaptsim.High:      priority.High,
	adaptsim.Default:   priority.Medium,
	adaptsim.Sheddable: priority.Low,
}

// fsPrioritySim admits through failsafe-go's PriorityLimiter: a call waits
// for a permit (AcquirePermitWithPriority) unless the limiter rejects it,
// by its queue (beyond 3× the limit) or its prioritizer's threshold.
type fsPrioritySim struct {
	l adaptivelimiter.PriorityLimiter[any]
}

func (s fsPrioritySim) Do(ctx context.Context, class string, serve func()) error {
	p, err := s.l.AcquirePermitWithPriority(ctx, fsPriorities[class])
	if err != nil {
		return err
	}
	serve()
	p.Record()
	return nil
}

func (s fsPrioritySim) Limit() int { return s.l.Limit() }

// fsBulkheadSim admits through failsafe-go's bulkhead (a FIFO semaphore, no
// classes), each call waiting at most its class's MaxWait (negative: not at
// all).
type fsBulkheadSim struct {
	b     fsbulkhead.Bulkhead[any]
	waits map[string]time.Duration
	limit int
}

func (s fsBulkheadSim) Do(ctx context.Context, class string, serve func()) error {
	if w := s.waits[class]; w < 0 {
		if !s.b.TryAcquirePermit() {
			return fsbulkhead.ErrFull
		}
	} else if err := s.b.AcquirePermitWithMaxWait(ctx, w); err != nil {
		return err
	}
	defer s.b.ReleasePermit()
	serve()
	return nil
}

func (s fsBulkheadSim) Limit() int { return s.limit }

// shedLimiter is one row of the report. build runs inside the run's
// synctest bubble; stop, if not nil, ends what build started (failsafe-go's
// calibrations) before the bubble ends.
type shedLimiter struct {
	name  string
	about string // how it is configured, for the report
	floodgate,
	adaptive bool
	build func(o adaptsim.Overload) (lim adaptsim.ClassLimiter, stop func())
}

func fsPriority(limits [3]uint, every time.Duration) func(adaptsim.Overload) (adaptsim.ClassLimiter, func()) {
	return func(adaptsim.Overload) (adaptsim.ClassLimiter, func()) {
		p := adaptivelimiter.NewPrioritizer()
		stop := p.ScheduleCalibrations(context.Background(), every)
		l := adaptivelimiter.NewBuilder[any]().WithLimits(limits[0], limits[1], limits[2]).BuildPrioritized(p)
		return fsPrioritySim{l}, stop
	}
}

var shedLimiters = []shedLimiter{
	{name: "floodgate, semaphore", floodgate: true,
		about: "one bulkhead layer with the four Classes (MaxWait 1 s, 50 ms, 20 ms, none; nothing reserved) over `semaphore.New(20)`",
		build: func(o adaptsim.Overload) (adaptsim.ClassLimiter, func()) {
			lim, _ := o.Bulkhead(semaphore.New(int64(o.Workers), semaphore.Config{}))
			return lim, nil
		}},
	{name: "floodgate, adaptive", floodgate: true, adaptive: true,
		about: "the same layer over `adaptive.New(adaptive.Config{})` (its defaults: limit 1..1000 starting at 1)",
		build: func(o adaptsim.Overload) (adaptsim.ClassLimiter, func()) {
			lim, _ := o.Bulkhead(adaptive.New(adaptive.Config{}))
			return lim, nil
		}},
	{name: "failsafe-go prioritized, limit 20",
		about: "`adaptivelimiter.NewBuilder().WithLimits(20, 20, 20).BuildPrioritized(p)`, `p := adaptivelimiter.NewPrioritizer()` calibrated every second as its documentation shows (`ScheduleCalibrations(ctx, time.Second)`); the classes are its priorities VeryHigh, High, Medium, Low; a call waits in `AcquirePermitWithPriority` unless rejected (its default queueing: rejections from 2× the limit queued, all at 3×)",
		build: fsPriority([3]uint{20, 20, 20}, time.Second)},
	{name: "failsafe-go prioritized, limit 20, 10 ms",
		about: "the same calibrated every 10 ms (the interval of its own tests)",
		build: fsPriority([3]uint{20, 20, 20}, 10*time.Millisecond)},
	{name: "failsafe-go prioritized, adaptive", adaptive: true,
		about: "the first with `WithLimits(1, 1000, 20)` (the adaptive rows' settings), calibrated every second: its limit adapts",
		build: fsPriority([3]uint{1, 1000, 20}, time.Second)},
	{name: "failsafe-go bulkhead",
		about: "`bulkhead.New(20)`, no classes (FIFO): each call waits at most its class's MaxWait (`AcquirePermitWithMaxWait`; `TryAcquirePermit` for sheddable)",
		build: func(o adaptsim.Overload) (adaptsim.ClassLimiter, func()) {
			waits := make(map[string]time.Duration)
			for _, c := range o.Classes {
				waits[c.Name] = c.MaxWait
			}
			return fsBulkheadSim{b: fsbulkhead.New[any](uint(o.Workers)), waits: waits, limit: o.Workers}, nil
		}},
}

// shedRun is what the report keeps of one run.
type shedRun struct {
	m           adaptsim.ClassMetrics
	maxInFlight int
	done        bool
}

// shedSeeds is the runs per limiter: ADAPTIVE_SIM_SEEDS (3 with -short),
// at most 7, so that the section takes about a minute of CPU.
func shedSeeds(t *testing.T) int {
	return min(simSeeds(t), 7)
}

// TestShedSim runs StandardOverload with seeds 1..N through each limiter,
// each run in its own synctest bubble and parallel subtest, and writes the
// report's section to SHED_SIM_OUT if set. It fails only when a run is
// broken (nothing served), not on a missed target: the targets are what the
// section reports (bulkhead's TestShedSimulatorMeetsTargets holds floodgate
// to them).
func TestShedSim(t *testing.T) {
	seeds := shedSeeds(t)
	o := adaptsim.StandardOverload()
	runs := make([][]shedRun, len(shedLimiters)) // [limiter][seed-1]
	for i := range runs {
		runs[i] = make([]shedRun, seeds)
	}
	start := time.Now()
	t.Run("runs", func(t *testing.T) {
		for i, lim := range shedLimiters {
			for k := range seeds {
				seed := uint64(k + 1)
				t.Run(fmt.Sprintf("%s/seed=%d", lim.name, seed), func(t *testing.T) {
					t.Parallel()
					synctest.Test(t, func(t *testing.T) {
						l, stop := lim.build(o)
						res := adaptsim.RunClasses(o, l, seed)
						if stop != nil {
							stop()
						}
						served := 0
						for _, c := range res.Calls {
							if c.OK {
								served++
							}
						}
						if served == 0 {
							t.Fatalf("%d calls, none served", len(res.Calls))
						}
						runs[i][k] = shedRun{m: adaptsim.ClassMeasure(o, res), maxInFlight: res.MaxInFlight, done: true}
					})
				})
			}
		}
	})
	wall := time.Since(start)
	if t.Failed() {
		return
	}
	for i := range runs {
		for k := range runs[i] {
			if !runs[i][k].done {
				t.Skipf("%s/seed=%d did not run (-run?): no section written", shedLimiters[i].name, k+1)
			}
		}
	}
	var b strings.Builder
	writeShedSection(&b, o, runs, wall)
	t.Logf("%d limiters × %d runs in %v", len(shedLimiters), seeds, wall.Round(time.Second))
	if testing.Verbose() {
		t.Log("\n" + b.String())
	}
	if out := os.Getenv("SHED_SIM_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// shedCell is the median (worst) of f over runs, formatted by format.
func shedCell(runs []shedRun, f func(shedRun) float64, lowerBetter bool, format func(float64) string) (string, float64) {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	s := summarizeSim(xs, lowerBetter)
	return format(s.median) + " (" + format(s.worst) + ")", s.median
}

func pct(v float64) string {
	switch {
	case v >= 0.9995 && v < 1:
		return strconv.FormatFloat(100*v, 'f', 2, 64) + "%"
	case v < 0.01 && v > 0:
		return strconv.FormatFloat(100*v, 'f', 2, 64) + "%"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
}

func times(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }

func secs(v float64) string {
	if math.IsInf(v, 1) {
		return "never"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " s"
}

// writeShedSection writes the markdown of the report's section (without its
// heading, which the report adds).
func writeShedSection(w io.Writer, o adaptsim.Overload, runs [][]shedRun, wall time.Duration) {
	n := len(runs[0])
	fmt.Fprintf(w, `The issue's overload: four criticality classes, %s, mixed %s,
offered as an open Poisson load at %.0f calls/s (half the downstream's capacity)
for %v, at %.0f calls/s (3×) from %v to %v, then at %.0f calls/s again until
%v. A refused call is lost (no retry). The downstream is internal/adaptsim's:
%d workers, lognormal service times of median %v (σ %.1f), FIFO beyond: a
capacity of %.0f calls/s and a no-load p99 of %v. A call's latency runs from
its arrival to its completion, the wait at the limiter included. Each limiter
runs %d times, run k of every limiter drawing the same arrivals, classes and
service times; %d runs took %s of wall time, %d at a time. A cell is the
**median (worst)** over the runs. Success, p99 and goodput are over the
overload (calls that arrived in it; goodput: calls served in it per second
over the capacity). Shedding is measured in %v bins: a bin sheds when at least
%.0f%% of the calls that arrived in it were refused; "starts" is when the
first bin that sheds from the overload's start ends, "stops" when the last
that sheds after its end ends (0 if none; "never" if the run's last second
still sheds).

`, classNames(o), classMix(o), o.Base, o.From, o.Peak, o.From, o.To, o.Base, o.Length,
		o.Workers, o.Median, o.Sigma, o.Capacity(), o.NoLoadP99().Round(time.Millisecond),
		n, n*len(shedLimiters), wall.Round(time.Second), simParallel(), adaptsim.ShedBin, 100*adaptsim.ShedShare)
	fmt.Fprint(w, "| limiter | configuration |\n|---|---|\n")
	for _, l := range shedLimiters {
		fmt.Fprintf(w, "| %s | %s |\n", l.name, l.about)
	}
	fmt.Fprintln(w)

	perClass := func(title, target string, f func(adaptsim.ClassMetric) float64, lowerBetter bool, format func(float64) string, met func(float64) bool) {
		fmt.Fprintf(w, "**%s.**\n\n", title)
		head := []string{"limiter"}
		for _, c := range o.Classes {
			head = append(head, c.Name)
		}
		tableHead(w, append(head, "target (critical)"))
		for i, l := range shedLimiters {
			fmt.Fprintf(w, "| %s |", l.name)
			verdict := "missed"
			for c := range o.Classes {
				cell, med := shedCell(runs[i], func(r shedRun) float64 { return f(r.m.Classes[c]) }, lowerBetter, format)
				fmt.Fprintf(w, " %s |", cell)
				if c == 0 && met(med) {
					verdict = "met"
				}
			}
			fmt.Fprintf(w, " %s: %s |\n", target, verdict)
		}
		fmt.Fprintln(w)
	}
	perClass("Success: share of each class's calls served during the overload", "≥ 99.9%",
		func(c adaptsim.ClassMetric) float64 { return c.Success }, false, pct,
		func(v float64) bool { return v >= 0.999 })
	perClass("p99 latency of each class's served calls over the no-load p99", "≤ 2×",
		func(c adaptsim.ClassMetric) float64 { return c.P99x }, true, times,
		func(v float64) bool { return v <= 2 })

	type col struct {
		title, target string
		f             func(shedRun) float64
		lowerBetter   bool
		format        func(float64) string
		met           func(float64) bool
	}
	cols := []col{
		{"goodput", "≥ 0.95", func(r shedRun) float64 { return r.m.Goodput }, false,
			func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }, func(v float64) bool { return v >= 0.95 }},
		{"shedding starts", "≤ 1 s", func(r shedRun) float64 {
			if !r.m.Started {
				return math.Inf(1)
			}
			return r.m.ShedStart.Seconds()
		}, true, secs, func(v float64) bool { return v <= 1 }},
		{"shedding stops", "≤ 2 s", func(r shedRun) float64 {
			if !r.m.Stopped {
				return math.Inf(1)
			}
			return r.m.ShedStop.Seconds()
		}, true, secs, func(v float64) bool { return v <= 2 }},
		{"refused at the base load", "–", func(r shedRun) float64 { return r.m.BaseRefused }, true, pct, nil},
		{"most calls in the downstream at once", "–", func(r shedRun) float64 { return float64(r.maxInFlight) }, true,
			func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }, nil},
	}
	fmt.Fprint(w, "**Goodput (calls served during the overload per second, over the capacity), shedding's start after the overload's start and stop after its end, and, at the base load before it (its second half, after the limiters' warm-up), the share of calls refused.**\n\n")
	head := []string{"limiter"}
	for _, c := range cols {
		head = append(head, c.title)
	}
	tableHead(w, head)
	for i, l := range shedLimiters {
		fmt.Fprintf(w, "| %s |", l.name)
		for _, c := range cols {
			cell, _ := shedCell(runs[i], c.f, c.lowerBetter, c.format)
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprint(w, "\n")
	}
	fmt.Fprint(w, "| target |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.target)
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprint(w, "**floodgate against the targets** (medians):\n\n")
	for i, l := range shedLimiters {
		if !l.floodgate {
			continue
		}
		var missed []string
		crit := func(f func(adaptsim.ClassMetric) float64, lowerBetter bool) float64 {
			_, med := shedCell(runs[i], func(r shedRun) float64 { return f(r.m.Classes[0]) }, lowerBetter, pct)
			return med
		}
		if crit(func(c adaptsim.ClassMetric) float64 { return c.Success }, false) < 0.999 {
			missed = append(missed, "critical success")
		}
		if crit(func(c adaptsim.ClassMetric) float64 { return c.P99x }, true) > 2 {
			missed = append(missed, "critical p99")
		}
		for _, c := range cols {
			if c.met == nil {
				continue
			}
			if _, med := shedCell(runs[i], c.f, c.lowerBetter, c.format); !c.met(med) {
				missed = append(missed, c.title)
			}
		}
		verdict := "every target met"
		if len(missed) > 0 {
			verdict = "missed: " + strings.Join(missed, ", ")
		}
		fmt.Fprintf(w, "- %s: %s.\n", l.name, verdict)
	}
	fmt.Fprintln(w)
}

// tableHead writes a markdown table's header row and rule.
func tableHead(w io.Writer, cols []string) {
	fmt.Fprint(w, "| "+strings.Join(cols, " | ")+" |\n|"+strings.Repeat("---|", len(cols))+"\n")
}

func classNames(o adaptsim.Overload) string {
	var s []string
	for _, c := range o.Classes {
		s = append(s, c.Name)
	}
	return strings.Join(s, ", ")
}

func classMix(o adaptsim.Overload) string {
	var s []string
	for _, c := range o.Classes {
		s = append(s, strconv.FormatFloat(100*c.Share, 'f', 0, 64))
	}
	return strings.Join(s, "/")
}
