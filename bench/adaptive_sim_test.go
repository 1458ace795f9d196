package bench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
)

// The adaptive concurrency simulator's rows of the report: floodgate's
// adaptive.Gate beside failsafe-go's adaptivelimiter and a plain AIMD
// baseline, on internal/adaptsim's scenarios. TestAdaptiveSim runs them and
// writes a markdown section to the file named by ADAPTIVE_SIM_OUT, which
// the report (go run ./report) puts in RESULTS.md under "Adaptive
// concurrency (simulator)". ADAPTIVE_SIM_SEEDS sets the runs per scenario
// and limiter (default 20; 3 with -short).
//
//	ADAPTIVE_SIM_OUT=/tmp/sim.md go test -run 'TestAdaptiveSim$' -v

// fsSim admits through failsafe-go's adaptivelimiter without queueing
// (TryAcquirePermit); a drop releases the permit without recording the
// call's duration (Permit.Drop), as failsafe-go documents for timeouts.
type fsSim struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (s fsSim) Acquire(context.Context) (func(bool), bool) {
	p, ok := s.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return func(dropped bool) {
		if dropped {
			p.Drop()
		} else {
			p.Record()
		}
	}, true
}

func (s fsSim) Limit() int { return s.l.Limit() }

// aimdSim is Netflix concurrency-limits' AIMDLimit (backoff ratio 0.9) behind
// its SimpleLimiter: a call is admitted while fewer than the limit are in
// flight, and each completion updates the limit with aimdNext.
type aimdSim struct {
	timeout time.Duration

	mu       sync.Mutex
	limit    int
	inFlight int
}

const (
	aimdMin, aimdMax, aimdInitial = 1, 1000, 20
)

func newAIMD(timeout time.Duration) *aimdSim {
	return &aimdSim{timeout: timeout, limit: aimdInitial}
}

// aimdNext is AIMDLimit._update: on a drop or a call slower than timeout the
// limit falls to floor(limit × 0.9); on a success while at least half the
// limit was in flight when the call started (inflight counts the call
// itself) it grows by one; the result is bounded to [aimdMin, aimdMax].
func aimdNext(limit, inflight int, rtt, timeout time.Duration, dropped bool) int {
	switch {
	case dropped || rtt > timeout:
		limit = int(float64(limit) * 0.9)
	case inflight*2 >= limit:
		limit++
	}
	return min(aimdMax, max(aimdMin, limit))
}

func (a *aimdSim) Acquire(context.Context) (func(bool), bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlight >= a.limit {
		return nil, false
	}
	a.inFlight++
	inflight, start := a.inFlight, time.Now()
	return func(dropped bool) {
		rtt := time.Since(start)
		a.mu.Lock()
		a.inFlight--
		a.limit = aimdNext(a.limit, inflight, rtt, a.timeout, dropped)
		a.mu.Unlock()
	}, true
}

func (a *aimdSim) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// simLimiter is one column of the report; build runs inside the run's
// synctest bubble, so every limiter reads the bubble's clock.
type simLimiter struct {
	name  string
	build func(sc adaptsim.Scenario) adaptsim.Limiter
}

var simLimiters = []simLimiter{
	{"floodgate", func(adaptsim.Scenario) adaptsim.Limiter {
		return adaptsim.Gate(adaptive.New(adaptive.Config{})) // its defaults
	}},
	{"failsafe-go", func(adaptsim.Scenario) adaptsim.Limiter {
		return fsSim{adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, 20).Build()}
	}},
	{"AIMD", func(sc adaptsim.Scenario) adaptsim.Limiter {
		return newAIMD(2 * sc.NoLoadP99(sc.Phases[0]))
	}},
}

// simRun is what the report keeps of one run.
type simRun struct {
	m       adaptsim.Metrics
	samples []adaptsim.Sample // the first run's only, for the chart
	done    bool
}

func simSeeds(t *testing.T) int {
	if s := os.Getenv("ADAPTIVE_SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ADAPTIVE_SIM_SEEDS=%q: want a positive integer", s)
		}
		return n
	}
	if testing.Short() {
		return 3
	}
	return 20
}

// TestAdaptiveSim runs every scenario with seeds 1..N through each limiter,
// each run in its own synctest bubble and parallel subtest, and writes the
// report's section to ADAPTIVE_SIM_OUT if set. It fails only when a run is
// broken (nothing completed, a limit out of its bounds), not on a missed
// target: the targets are what the section reports.
func TestAdaptiveSim(t *testing.T) {
	seeds := simSeeds(t)
	scs := adaptsim.Scenarios()
	runs := make([][][]simRun, len(scs)) // [scenario][limiter][seed-1]
	for i := range runs {
		runs[i] = make([][]simRun, len(simLimiters))
		for j := range runs[i] {
			runs[i][j] = make([]simRun, seeds)
		}
	}
	start := time.Now()
	// The longest scenarios start first, so the last runs to finish are short.
	order := make([]int, len(scs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scs[b].Length, scs[a].Length) })
	t.Run("runs", func(t *testing.T) {
		for _, i := range order {
			sc := scs[i]
			for j, lim := range simLimiters {
				for k := range seeds {
					seed := uint64(k + 1)
					t.Run(fmt.Sprintf("%s/%s/seed=%d", sc.Name, lim.name, seed), func(t *testing.T) {
						t.Parallel()
						synctest.Test(t, func(t *testing.T) {
							res := adaptsim.Run(sc, lim.build(sc), seed)
							checkSimRun(t, res)
							r := simRun{m: adaptsim.Measure(sc, res), done: true}
							if k == 0 {
								r.samples = res.Samples
							}
							runs[i][j][k] = r
						})
					})
				}
			}
		}
	})
	wall := time.Since(start)
	if t.Failed() {
		return
	}
	for i := range runs {
		for j := range runs[i] {
			for k := range runs[i][j] {
				if !runs[i][j][k].done {
					t.Skipf("%s/%s/seed=%d did not run (-run?): no section written", scs[i].Name, simLimiters[j].name, k+1)
				}
			}
		}
	}
	var b strings.Builder
	writeSimSection(&b, scs, runs, wall)
	t.Logf("%d scenarios × %d limiters × %d runs in %v", len(scs), len(simLimiters), seeds, wall.Round(time.Second))
	if testing.Verbose() {
		t.Log("\n" + b.String())
	}
	if out := os.Getenv("ADAPTIVE_SIM_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSimRun fails a run that cannot be measured: no completions, no
// samples, or a limit outside 1..1000 (every limiter's bounds here).
func checkSimRun(t *testing.T, res adaptsim.Result) {
	t.Helper()
	if len(res.Completions) == 0 || len(res.Samples) == 0 {
		t.Fatalf("%d completions, %d samples: the limiter admitted nothing", len(res.Completions), len(res.Samples))
	}
	for _, s := range res.Samples {
		if s.Limit < 1 || s.Limit > 1000 {
			t.Fatalf("limit %d at %v: outside 1..1000", s.Limit, s.At)
		}
	}
}

// simMetric is one table of the section.
type simMetric struct {
	title   string
	target  string
	applies func(adaptsim.Scenario) bool
	// value returns the run's figure; +Inf for "never".
	value func(adaptsim.Metrics) float64
	// lowerBetter: the worst run is the highest.
	lowerBetter bool
	met         func(median float64) bool
	format      func(float64) string
}

func hasGrowth(sc adaptsim.Scenario) bool {
	return len(sc.Phases) > 2 || (sc.Load.Clients > 0 && sc.Load.Clients < 2*sc.Phases[0].Workers)
}

var simMetrics = []simMetric{
	{
		title:  "Settling: seconds after the change (overload and runaway: the start) until the limit is within ±10% of the ideal concurrency and stays within ±20% for 10 s",
		target: "< 5 s",
		value: func(m adaptsim.Metrics) float64 {
			if !m.Entered {
				return math.Inf(1)
			}
			return m.Enter.Seconds()
		},
		lowerBetter: true,
		met:         func(v float64) bool { return v < 5 },
		format:      secondsOrNever,
	},
	{
		title:  "Share of the minute after settling with the limit within ±20% of the ideal",
		target: "100%",
		value:  func(m adaptsim.Metrics) float64 { return m.Within20 },
		met:    func(v float64) bool { return v >= 1 },
		format: func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" },
	},
	{
		title:       "Strict convergence: seconds after the change until the limit is within ±10% and then never leaves ±20% for 60 s (a single 100 ms sample outside restarts it)",
		target:      "< 5 s",
		value:       func(m adaptsim.Metrics) float64 { return converged(m) },
		lowerBetter: true,
		met:         func(v float64) bool { return v < 5 },
		format:      secondsOrNever,
	},
	{
		title:       "Admitted p99 latency over the no-load p99 (from 5 s after the change to its end)",
		target:      "≤ 1.5×",
		value:       func(m adaptsim.Metrics) float64 { return m.P99 },
		lowerBetter: true,
		met:         func(v float64) bool { return v <= 1.5 },
		format:      func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" },
	},
	{
		title:  "Goodput over the downstream's capacity (same window)",
		target: "≥ 0.95",
		value:  func(m adaptsim.Metrics) float64 { return m.Goodput },
		met:    func(v float64) bool { return v >= 0.95 },
		format: func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	},
	{
		title:       "Growth: the mean limit over the incident's last minute (runaway: the run's last minute) over the mean limit in the 10 s before it (runaway: 20–30 s); above 1 the limit drifted up (1.05 allows for a limit that moves by one either way)",
		target:      "≤ 1.05",
		applies:     hasGrowth,
		value:       func(m adaptsim.Metrics) float64 { return m.Growth },
		lowerBetter: true,
		met:         func(v float64) bool { return v <= 1.05 },
		format:      func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	},
	{
		title:       "Highest limit over the same stretch, as a multiple of the ideal (a limit above the callers in flight does not bind)",
		target:      "–",
		applies:     hasGrowth,
		value:       func(m adaptsim.Metrics) float64 { return m.MaxLimit },
		lowerBetter: true,
		met:         func(float64) bool { return true },
		format:      func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" },
	},
}

func converged(m adaptsim.Metrics) float64 {
	if !m.Converged {
		return math.Inf(1)
	}
	return m.Converge.Seconds()
}

func secondsOrNever(v float64) string {
	if math.IsInf(v, 1) {
		return "never"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// simSummary is a metric's median and worst over the runs, and how many runs
// were "never" (+Inf).
type simSummary struct {
	median, worst float64
	never, n      int
}

func summarizeSim(xs []float64, lowerBetter bool) simSummary {
	s := slices.Clone(xs)
	slices.Sort(s)
	out := simSummary{n: len(s)}
	if len(s) == 0 {
		return simSummary{median: math.NaN(), worst: math.NaN()}
	}
	for _, x := range s {
		if math.IsInf(x, 1) {
			out.never++
		}
	}
	out.median = s[len(s)/2]
	if len(s)%2 == 0 {
		out.median = (s[len(s)/2-1] + s[len(s)/2]) / 2 // +Inf if either is
	}
	out.worst = s[0]
	if lowerBetter {
		out.worst = s[len(s)-1]
	}
	return out
}

func (m simMetric) cell(s simSummary) string {
	c := m.format(s.median) + " (" + m.format(s.worst)
	if s.never > 0 && s.never < s.n {
		c += fmt.Sprintf(" in %d of %d", s.never, s.n)
	}
	return c + ")"
}

func (m simMetric) summary(runs []simRun) simSummary {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = m.value(r.m)
	}
	return summarizeSim(xs, m.lowerBetter)
}

// writeSimSection writes the markdown of the report's simulator section
// (without its own heading, which the report adds): the setup, one table per
// metric, the comparison with failsafe-go and a chart of the limit per
// scenario.
func writeSimSection(w io.Writer, scs []adaptsim.Scenario, runs [][][]simRun, wall time.Duration) {
	n := len(runs[0][0])
	fmt.Fprintf(w, `floodgate's adaptive.Gate (its defaults, `+"`adaptive.Config{}`"+`: limit 1..1000 starting at 1)
beside failsafe-go v0.9.8's adaptivelimiter (its documented defaults except
`+"`WithLimits(1, 1000, 20)`"+`: min 1 and initial 20 are its defaults, the max is
raised from its default 200 to 1000 like the others') and a plain AIMD baseline
(Netflix concurrency-limits' AIMDLimit: on each completion slower than a
timeout, or dropped, the limit falls to ⌊0.9 × limit⌋; on any other completion
that started with at least half the limit in flight it grows by 1; limit
1..1000 starting at 20, timeout 2 × the no-load p99 of the first phase). All
three admit without queueing (TryHold, TryAcquirePermit): a refused client
backs off and retries. The downstream is internal/adaptsim's: a fixed number
of workers (the ideal concurrency, by construction), FIFO beyond, lognormal
service times. Each scenario runs %d times per limiter, run k of every limiter
drawing from the same random streams (arrivals, service times, backoffs; the
traces diverge once the limiters admit differently). %d runs in all took %s of
wall time on this machine, %d at a time.

A cell is the **median (worst)** over the %d runs; "never" is a run whose limit
never settled. The target column is the issue's; "floodgate" says whether
floodgate's median meets it. Convergence and the charts follow each limiter's
own limit, which binds only while it is below the number of callers: AIMD's
rule lets it grow to twice the calls in flight, failsafe-go's to five times
(its maxLimitFactor), so a limit far above the ideal may still have admitted
no more than the clients sent; the p99 and goodput show what the downstream
got.

`, n, len(scs)*len(simLimiters)*n, wall.Round(time.Second), simParallel(), n)

	fmt.Fprint(w, "| scenario | downstream | load | length | capacity | no-load p99 |\n|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		fmt.Fprintf(w, "| %s | %s | %s | %v | %.0f calls/s | %v |\n", sc.Name, simPhases(sc), simLoad(sc), sc.Length,
			sc.Capacity(sc.Phases[0]), sc.NoLoadP99(sc.Phases[0]).Round(time.Millisecond))
	}
	fmt.Fprintln(w)

	for _, m := range simMetrics {
		fmt.Fprintf(w, "**%s.**\n\n| scenario |", m.title)
		for _, l := range simLimiters {
			fmt.Fprintf(w, " %s |", l.name)
		}
		fmt.Fprint(w, " target | floodgate |\n|---|")
		for range simLimiters {
			fmt.Fprint(w, "---|")
		}
		fmt.Fprint(w, "---|---|\n")
		for i, sc := range scs {
			if m.applies != nil && !m.applies(sc) {
				continue
			}
			name := sc.Name
			if len(sc.Phases) == 1 && m.title == simMetrics[0].title {
				name += " (from the start)"
			}
			fmt.Fprintf(w, "| %s |", name)
			for j := range simLimiters {
				fmt.Fprintf(w, " %s |", m.cell(m.summary(runs[i][j])))
			}
			verdict := "missed"
			switch {
			case m.target == "–":
				verdict = "–"
			case m.met(m.summary(runs[i][0]).median):
				verdict = "met"
			}
			fmt.Fprintf(w, " %s | %s |\n", m.target, verdict)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprint(w, "**floodgate beside failsafe-go** (medians; the issue asks for better convergence and p99 on every scenario):\n\n")
	for i, sc := range scs {
		fmt.Fprintf(w, "- %s: %s; %s.\n", sc.Name,
			simCompare(simMetrics[0], "settling", runs[i][0], runs[i][1]),
			simCompare(simMetrics[3], "p99", runs[i][0], runs[i][1]))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "**The limit over time, run 1.** One column is 1/%d of the scenario's length; "+
		"each block is the mean limit in it over the ideal concurrency then (▁ ¼, ▂ ½, ▃ ¾, **▄ the ideal** ±12.5%%, ▅ 1¼, ▆ 1½, ▇ 1¾, █ 2× or more); "+
		"^ marks the change.\n\n", sparkCols)
	for i, sc := range scs {
		fmt.Fprintf(w, "%s (%s):\n\n```\n", sc.Name, simIdeals(sc))
		for j, l := range simLimiters {
			fmt.Fprintf(w, "%-11s %s\n", l.name, sparkline(runs[i][j][0].samples, sc.Length, sparkCols))
		}
		if marks := changeMarks(sc, sparkCols); marks != "" {
			fmt.Fprintf(w, "%-11s %s\n", "", marks)
		}
		fmt.Fprint(w, "```\n\n")
	}
}

// simParallel is how many runs the test ran at a time: -test.parallel,
// GOMAXPROCS by default.
func simParallel() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return runtime.GOMAXPROCS(0)
}

func simPhases(sc adaptsim.Scenario) string {
	var ps []string
	for i, p := range sc.Phases {
		var what []string
		if i == 0 || p.Workers != sc.Phases[i-1].Workers {
			what = append(what, fmt.Sprintf("%d workers", p.Workers))
		}
		if (i == 0 && p.Scale != 1) || (i > 0 && p.Scale != sc.Phases[i-1].Scale) {
			what = append(what, fmt.Sprintf("latency ×%g", p.Scale))
		}
		s := strings.Join(what, ", ")
		if i > 0 {
			s = "from " + p.At.String() + ": " + s
		}
		ps = append(ps, s)
	}
	return strings.Join(ps, "; ")
}

func simLoad(sc adaptsim.Scenario) string {
	l := sc.Load
	if l.Clients == 0 {
		return fmt.Sprintf("open, Poisson %.0f calls/s", l.Rate)
	}
	s := fmt.Sprintf("%d clients back to back", l.Clients)
	if l.Think > 0 {
		s += fmt.Sprintf(", think %v", l.Think)
	}
	return s + fmt.Sprintf(", backoff %v when refused", l.Backoff)
}

// simIdeals is the ideal concurrency over sc: "ideal 10", or "ideal 10,
// 5 from 30s" when the phases change it.
func simIdeals(sc adaptsim.Scenario) string {
	s := fmt.Sprintf("ideal %d", sc.Phases[0].Workers)
	last := sc.Phases[0].Workers
	for _, p := range sc.Phases[1:] {
		if p.Workers != last {
			s += fmt.Sprintf(", %d from %v", p.Workers, p.At)
			last = p.Workers
		}
	}
	return s
}

// simCompare says whether floodgate's median of m is ahead of, behind or
// even with failsafe-go's, with both numbers.
func simCompare(m simMetric, what string, fg, fs []simRun) string {
	a, b := m.summary(fg).median, m.summary(fs).median
	fa, fb := m.format(a), m.format(b)
	verdict := "ahead"
	switch {
	case fa == fb:
		verdict = "even"
	case a > b:
		verdict = "behind"
	}
	if math.IsInf(a, 1) && math.IsInf(b, 1) {
		verdict = "neither settles"
	}
	unit := ""
	if what == "convergence" && !math.IsInf(a, 1) {
		unit = " s"
	}
	unitB := ""
	if what == "convergence" && !math.IsInf(b, 1) {
		unitB = " s"
	}
	return fmt.Sprintf("%s %s (%s%s vs %s%s)", what, verdict, fa, unit, fb, unitB)
}

const sparkCols = 72

var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws samples' limit over [0, length) in cols columns: each
// column is the mean of limit/ideal over its samples, drawn as one of eight
// blocks, a quarter of the ideal each (▄ the ideal, █ 2× or more). A column
// without samples is a space.
func sparkline(samples []adaptsim.Sample, length time.Duration, cols int) string {
	sum := make([]float64, cols)
	cnt := make([]int, cols)
	for _, s := range samples {
		c := int(int64(s.At) * int64(cols) / int64(length))
		if c < 0 || c >= cols || s.Ideal <= 0 {
			continue
		}
		sum[c] += float64(s.Limit) / float64(s.Ideal)
		cnt[c]++
	}
	var b strings.Builder
	for c := range cols {
		if cnt[c] == 0 {
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(sparkBlock(sum[c] / float64(cnt[c])))
	}
	return b.String()
}

// sparkBlock is the block for a limit of r times the ideal: the nearest
// quarter, from ▁ (¼ or less) to █ (2 or more).
func sparkBlock(r float64) rune {
	i := int(math.Floor(r*4+0.5)) - 1
	return sparkBlocks[min(len(sparkBlocks)-1, max(0, i))]
}

// changeMarks puts ^ under the column of each phase change.
func changeMarks(sc adaptsim.Scenario, cols int) string {
	b := []byte(strings.Repeat(" ", cols))
	for _, p := range sc.Phases[1:] {
		if c := int(int64(p.At) * int64(cols) / int64(sc.Length)); c >= 0 && c < cols {
			b[c] = '^'
		}
	}
	return strings.TrimRight(string(b), " ")
}

func TestAIMDNext(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		limit, inflight int
		rtt             time.Duration
		dropped         bool
		want            int
	}{
		{20, 10, 50 * time.Millisecond, false, 21},  // half the limit in flight: +1
		{20, 9, 50 * time.Millisecond, false, 20},   // less than half: unchanged
		{20, 20, 101 * time.Millisecond, false, 18}, // slower than the timeout: ⌊0.9 × 20⌋
		{20, 20, 100 * time.Millisecond, false, 21}, // at the timeout: a success
		{20, 1, 10 * time.Millisecond, true, 18},    // dropped
		{15, 15, time.Second, false, 13},            // ⌊13.5⌋
		{1, 1, time.Second, false, 1},               // never below the minimum
		{1000, 900, time.Millisecond, false, 1000},  // nor above the maximum
	} {
		if got := aimdNext(tc.limit, tc.inflight, tc.rtt, timeout, tc.dropped); got != tc.want {
			t.Errorf("aimdNext(%d, %d, %v, dropped=%v) = %d, want %d", tc.limit, tc.inflight, tc.rtt, tc.dropped, got, tc.want)
		}
	}
}

// TestAIMDSim checks the semaphore: it admits up to the limit and updates the
// limit with the in-flight count each call started with.
func TestAIMDSim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAIMD(100 * time.Millisecond)
		var rels []func(bool)
		for range aimdInitial {
			rel, ok := a.Acquire(context.Background())
			if !ok {
				t.Fatalf("refused at %d in flight, limit %d", len(rels), a.Limit())
			}
			rels = append(rels, rel)
		}
		if _, ok := a.Acquire(context.Background()); ok {
			t.Fatalf("admitted a call beyond the limit %d", a.Limit())
		}
		time.Sleep(10 * time.Millisecond)
		rels[19](false) // started with 20 in flight: 20*2 >= 20
		if got := a.Limit(); got != 21 {
			t.Fatalf("limit after a fast completion = %d, want 21", got)
		}
		rels[0](false) // started with 1 in flight: unchanged
		if got := a.Limit(); got != 21 {
			t.Fatalf("limit after a completion at low concurrency = %d, want 21", got)
		}
		rels[1](true)
		if got := a.Limit(); got != 18 {
			t.Fatalf("limit after a drop = %d, want 18", got)
		}
		time.Sleep(time.Second)
		for _, rel := range rels[2:19] {
			rel(false) // slow: ×0.9 each, down to 1
		}
		if got := a.Limit(); got != 1 {
			t.Fatalf("limit after 17 slow completions = %d, want 1", got)
		}
	})
}

func TestSummarizeSim(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		xs          []float64
		lowerBetter bool
		want        simSummary
	}{
		{[]float64{3, 1, 2}, true, simSummary{median: 2, worst: 3, n: 3}},
		{[]float64{3, 1, 2}, false, simSummary{median: 2, worst: 1, n: 3}},
		{[]float64{4, 1, 2, 3}, true, simSummary{median: 2.5, worst: 4, n: 4}},
		{[]float64{1, inf, 2}, true, simSummary{median: 2, worst: inf, never: 1, n: 3}},
		{[]float64{1, inf, 2, inf}, true, simSummary{median: inf, worst: inf, never: 2, n: 4}},
	} {
		if got := summarizeSim(tc.xs, tc.lowerBetter); got != tc.want {
			t.Errorf("summarizeSim(%v, %v) = %+v, want %+v", tc.xs, tc.lowerBetter, got, tc.want)
		}
	}
	conv := simMetrics[0]
	for _, tc := range []struct {
		s    simSummary
		want string
	}{
		{simSummary{median: 1.25, worst: 4, n: 20}, "1.2 (4.0)"},
		{simSummary{median: 2, worst: inf, never: 3, n: 20}, "2.0 (never in 3 of 20)"},
		{simSummary{median: inf, worst: inf, never: 20, n: 20}, "never (never)"},
	} {
		if got := conv.cell(tc.s); got != tc.want {
			t.Errorf("cell(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestSparkline(t *testing.T) {
	for r, want := range map[float64]rune{0: '▁', 0.3: '▁', 0.4: '▂', 0.9: '▄', 1: '▄', 1.1: '▄', 1.13: '▅', 1.9: '█', 5: '█'} {
		if got := sparkBlock(r); got != want {
			t.Errorf("sparkBlock(%v) = %c, want %c", r, got, want)
		}
	}
	// 4 s in 4 columns: the limit is the ideal, then half, then double the
	// ideal of a phase that doubled it; no sample in the last column.
	var samples []adaptsim.Sample
	for at := time.Duration(0); at < 3*time.Second; at += adaptsim.SampleEvery {
		s := adaptsim.Sample{At: at, Limit: 10, Ideal: 10}
		switch {
		case at >= 2*time.Second:
			s.Limit, s.Ideal = 40, 20
		case at >= time.Second:
			s.Limit = 5
		}
		samples = append(samples, s)
	}
	if got, want := sparkline(samples, 4*time.Second, 4), "▄▂█ "; got != want {
		t.Errorf("sparkline = %q, want %q", got, want)
	}
	sc := adaptsim.Scenario{Length: 100 * time.Second, Phases: []adaptsim.Phase{{}, {At: 30 * time.Second}}}
	if got, want := changeMarks(sc, 10), "   ^"; got != want {
		t.Errorf("changeMarks = %q, want %q", got, want)
	}
}

func TestSimPhases(t *testing.T) {
	want := map[string]string{
		"latency x4":   "20 workers; from 30s: latency ×4",
		"capacity /2":  "20 workers; from 30s: 10 workers",
		"incident x10": "20 workers; from 30s: latency ×10; from 10m30s: latency ×1",
		"runaway #134": "20 workers",
	}
	for _, sc := range adaptsim.Scenarios() {
		if w, ok := want[sc.Name]; ok {
			if got := simPhases(sc); got != w {
				t.Errorf("simPhases(%s) = %q, want %q", sc.Name, got, w)
			}
		}
	}
}
