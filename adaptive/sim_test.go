package adaptive_test

import (
	"context"
	"flag"
	"testing"
	"testing/synctest"

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
					t.Logf("seed %d: converge %v (%v) p99 %.2f goodput %.3f growth %.2f | limit %d baseline %v rounds %d inc %d dec %d rebase %d probe %d",
						seed, m.Converge, m.Converged, m.P99, m.Goodput, m.Growth, st.Limit, st.Baseline, st.Rounds, st.Increases, st.Decreases, st.Rebases, st.Probes)
				})
			}
		})
	}
}
