//go:build !race

// The simulator runs minutes of fake time; under the race detector that is
// minutes of real time, so it runs in make test's pass without -race.

package bulkhead_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	"github.com/floodgate-go/floodgate/semaphore"
)

var shedRuns = flag.Int("shed.runs", 5, "runs per gate in TestShedSimulatorMeetsTargets")

// TestShedSimulatorMeetsTargets offers the simulator's downstream (20
// workers, 1,765 calls/s) four criticality classes mixed 10/30/30/30
// (critical, high, default, sheddable) at half its capacity, then at three
// times it for 20s, then at half again, through one layer with those
// Classes over a semaphore of the downstream's 20 workers and over an
// adaptive.Gate (its defaults), and holds every run to the targets
// over the overload: critical calls served ≥ 99.9% with a p99 (arrival to
// completion, the wait at the layer included) ≤ 2× the no-load p99, goodput
// ≥ 95% of the capacity, shedding from within 1s of the overload's start to
// within 2s of its end. It also checks that the layer's counters tell the
// same story (every refusal of a class after the first is a shed, none of
// the first class is refused), and, for the semaphore, that the downstream
// never held more than its 20.
func TestShedSimulatorMeetsTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the simulator runs minutes of fake time")
	}
	o := adaptsim.StandardOverload()
	for _, gc := range []struct {
		name string
		gate func() floodgate.Gate
		cap  int // the most calls the downstream may hold at once; 0: not checked
	}{
		{"semaphore", func() floodgate.Gate { return semaphore.New(int64(o.Workers), semaphore.Config{}) }, o.Workers},
		{"adaptive", func() floodgate.Gate { return adaptive.New(adaptive.Config{}) }, 0},
	} {
		t.Run(gc.name, func(t *testing.T) {
			t.Parallel()
			var ms []adaptsim.ClassMetrics
			for run := range uint64(*shedRuns) {
				synctest.Test(t, func(t *testing.T) {
					lim, b := o.Bulkhead(gc.gate())
					res := adaptsim.RunClasses(o, lim, run+1)
					m := adaptsim.ClassMeasure(o, res)
					ms = append(ms, m)
					t.Logf("run %d: %s", run+1, shedLine(m))
					crit := m.Classes[0]
					if crit.Success < 0.999 {
						t.Errorf("run %d: critical served %.4f of %d, want ≥ 0.999", run+1, crit.Success, crit.Offered)
					}
					if crit.P99x > 2 {
						t.Errorf("run %d: critical p99 %v, %.2f× the no-load p99 %v, want ≤ 2×", run+1, crit.P99, crit.P99x, o.NoLoadP99())
					}
					if m.Goodput < 0.95 {
						t.Errorf("run %d: goodput %.3f of the capacity, want ≥ 0.95", run+1, m.Goodput)
					}
					if !m.Started || m.ShedStart > time.Second {
						t.Errorf("run %d: shedding started %v after the overload (started: %v), want within 1s", run+1, m.ShedStart, m.Started)
					}
					if !m.Stopped || m.ShedStop > 2*time.Second {
						t.Errorf("run %d: shedding stopped %v after the overload (stopped: %v), want within 2s", run+1, m.ShedStop, m.Stopped)
					}
					if gc.cap > 0 && res.MaxInFlight > gc.cap {
						t.Errorf("run %d: the downstream held %d calls at once, over the gate's %d", run+1, res.MaxInFlight, gc.cap)
					}
					// The layer's counters against the simulator's.
					served, refused := make([]uint64, len(o.Classes)), make([]uint64, len(o.Classes))
					for _, c := range res.Calls {
						if c.OK {
							served[c.Class]++
						} else {
							refused[c.Class]++
						}
					}
					st := b.Stats().Layers[0]
					var shed uint64
					for i, cs := range st.Classes {
						want := uint64(0)
						if i > 0 {
							want = refused[i]
						}
						if cs.Admitted != served[i] || cs.Shed != want || refused[0] != 0 || cs.InFlight != 0 || cs.Waiting != 0 {
							t.Errorf("run %d: class %s: %+v; the simulator saw %d served, %d refused", run+1, cs.Name, cs, served[i], refused[i])
						}
						shed += cs.Shed
					}
					if st.Shed != shed || st.InFlight != 0 {
						t.Errorf("run %d: layer stats %+v, want Shed %d (the classes' sum)", run+1, st, shed)
					}
				})
			}
			t.Logf("median (worst) of %d runs: %s", len(ms), shedSummary(ms))
		})
	}
}

// shedLine is one run's figures, for the log.
func shedLine(m adaptsim.ClassMetrics) string {
	var b strings.Builder
	for _, c := range m.Classes {
		fmt.Fprintf(&b, "%s %.2f%% p99 %.2f×; ", c.Name, 100*c.Success, c.P99x)
	}
	fmt.Fprintf(&b, "goodput %.3f; shedding from +%v to +%v (started %v, stopped %v); base load: %.2f%% refused, p99 %v",
		m.Goodput, m.ShedStart, m.ShedStop, m.Started, m.Stopped, 100*m.BaseRefused, m.BaseP99.Round(100*time.Microsecond))
	return b.String()
}

// shedSummary is the median and worst over runs of the targets' figures.
func shedSummary(ms []adaptsim.ClassMetrics) string {
	of := func(f func(adaptsim.ClassMetrics) float64, lowerBetter bool) (median, worst float64) {
		var v []float64
		for _, m := range ms {
			v = append(v, f(m))
		}
		slices.Sort(v)
		median, worst = v[len(v)/2], v[0]
		if lowerBetter {
			worst = v[len(v)-1]
		}
		return median, worst
	}
	var b strings.Builder
	for i, c := range ms[0].Classes {
		sm, sw := of(func(m adaptsim.ClassMetrics) float64 { return 100 * m.Classes[i].Success }, false)
		pm, pw := of(func(m adaptsim.ClassMetrics) float64 { return m.Classes[i].P99x }, true)
		fmt.Fprintf(&b, "%s %.2f%% (%.2f%%) p99 %.2f× (%.2f×); ", c.Name, sm, sw, pm, pw)
	}
	gm, gw := of(func(m adaptsim.ClassMetrics) float64 { return m.Goodput }, false)
	am, aw := of(func(m adaptsim.ClassMetrics) float64 { return m.ShedStart.Seconds() }, true)
	zm, zw := of(func(m adaptsim.ClassMetrics) float64 { return m.ShedStop.Seconds() }, true)
	fmt.Fprintf(&b, "goodput %.3f (%.3f); shedding starts +%.1fs (%.1fs), stops +%.1fs (%.1fs)", gm, gw, am, aw, zm, zw)
	return b.String()
}
