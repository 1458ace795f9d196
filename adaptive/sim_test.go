//go:build !race

// The simulator runs minutes of fake time; under the race detector that is
// minutes of real time, so it runs in make test's pass without -race.

package adaptive_test

import (
	"flag"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
)

var simRuns = flag.Int("sim.runs", 3, "runs per scenario in TestSimulatorMeetsTargets")

// TestSimulatorMeetsTargets runs the benchmark report's scenarios (bench/
// runs them over 20 runs each, beside failsafe-go's adaptivelimiter) and
// holds each run to the targets, with the default Config: the limit
// within ±10% of the ideal concurrency in under 5s of a change and within
// ±20% for most of the next minute (medians, after a latency or capacity
// step), admitted p99 at most 1.5× the no-load p99, goodput at least 95% of
// the capacity, and no upward drift in the incident and the runaway case
// (every run).
func TestSimulatorMeetsTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the simulator runs minutes of fake time")
	}
	for _, sc := range adaptsim.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			var enter, within []float64
			for run := range uint64(*simRuns) {
				synctest.Test(t, func(t *testing.T) {
					g := adaptive.New(adaptive.Config{})
					m := adaptsim.Measure(sc, adaptsim.Run(sc, adaptsim.Gate(g), run+1))
					st := g.Stats()
					t.Logf("run %d: enter %.1fs, within ±20%% %.3f of the next minute (strictly for 60s: %v after %.1fs), p99 %.2f×, goodput %.3f, growth %.2f (max %.2f× ideal); baseline %v, %d rounds: +%d −%d rebase %d probe %d",
						run, m.Enter.Seconds(), m.Within20, m.Converged, m.Converge.Seconds(), m.P99, m.Goodput, m.Growth, m.MaxLimit,
						st.Baseline.Round(100*time.Microsecond), st.Rounds, st.Increases, st.Decreases, st.Rebases, st.Probes)
					e := m.Enter.Seconds()
					if !m.Entered {
						e = math.Inf(1)
					}
					enter, within = append(enter, e), append(within, m.Within20)
					if m.P99 > 1.5 {
						t.Errorf("run %d: admitted p99 %.2f× the no-load p99, want ≤ 1.5", run, m.P99)
					}
					if m.Goodput < 0.95 {
						t.Errorf("run %d: goodput %.3f of the capacity, want ≥ 0.95", run, m.Goodput)
					}
					if m.Growth > 1.05 {
						t.Errorf("run %d: the limit drifted up %.2f×", run, m.Growth)
					}
				})
			}
			if len(sc.Phases) != 2 {
				return // the convergence targets are for a latency or capacity step
			}
			if e := median(enter); e >= 5 {
				t.Errorf("median %.1fs to within ±10%% of the ideal (and ±20%% for 10s), want < 5s", e)
			}
			if w := median(within); w < 0.9 {
				t.Errorf("median %.3f of the minute within ±20%%, want ≥ 0.9", w)
			}
		})
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
