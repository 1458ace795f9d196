package adaptive_test

import (
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	floodgate "github.com/floodgate-go/floodgate/internal/core"
)

func TestTrace(t *testing.T) {
	name := os.Getenv("SIM_TRACE")
	if name == "" {
		t.Skip("SIM_TRACE unset")
	}
	for _, sc := range adaptsim.Scenarios() {
		if sc.Name != name {
			continue
		}
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var g *adaptive.Gate
			g = adaptive.New(adaptive.Config{Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
				if e.Kind == floodgate.KindLimit {
					st := g.Stats()
					fmt.Printf("%7.2fs limit %3d baseline %6.2fms lat %6.2fms\n", time.Since(start).Seconds(), e.N, float64(e.Duration)/1e6, float64(st.Latency)/1e6)
				}
			})})
			adaptsim.Run(sc, simGate{g}, 1)
		})
	}
}
