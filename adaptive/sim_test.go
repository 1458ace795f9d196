package adaptive_test

import (
	"context"
	"flag"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
)

var simSeeds = flag.Int("sim.seeds", 3, "seeds per scenario in TestSimulator")

type simGate struct{ g *adaptive.Gate }

func (s simGate) Acquire(ctx context.Context) (func(bool), bool) {
	h, err := s.g.TryHold(ctx, 1)
	if err != nil {
		return nil, false
	}
	return func(dropped bool) {
		if dropped {
			s.g.Drop(h)
		} else {
			h.Release()
		}
	}, true
}

func (s simGate) Limit() int { return int(s.g.Limit()) }

func TestSimulator(t *testing.T) {
	for _, sc := range adaptsim.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			for seed := range uint64(*simSeeds) {
				synctest.Test(t, func(t *testing.T) {
					g := adaptive.New(adaptive.Config{})
					res := adaptsim.Run(sc, simGate{g}, seed+1)
					m := adaptsim.Measure(sc, res)
					st := g.Stats()
					lo, hi := 0, 0
					for _, x := range res.Samples {
						if x.At > 35e9 && float64(x.Limit) < 0.8*float64(x.Ideal)-1e-9 {
							lo++
						}
						if x.At > 35e9 && float64(x.Limit) > 1.2*float64(x.Ideal)+1e-9 {
							hi++
						}
					}
					t.Logf("seed %2d conv %6.1fs(%v) enter %4.1fs in20 %.3f p99 %.2f good %.3f growth %.2f max %.2f out20 -%d/+%d of %d | limit %d B %v rounds %d +%d -%d rebase %d probe %d",
						seed, m.Converge.Seconds(), m.Converged, m.Enter.Seconds(), m.Within20, m.P99, m.Goodput, m.Growth, m.MaxLimit, lo, hi, len(res.Samples), st.Limit, st.Baseline.Round(100*time.Microsecond), st.Rounds, st.Increases, st.Decreases, st.Rebases, st.Probes)
				})
			}
		})
	}
}
