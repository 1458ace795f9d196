package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/adaptive/adaptiveredis"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestAdaptiveFleetReport runs the fleet-wide adaptive gate in real time: 4
// adaptiveredis Gates (4 clients, as 4 processes) in front of one simulated
// downstream of adaptsim.Workers workers (the simulator's standard
// downstream: lognormal service times, median 20ms, σ 0.5), under
// closed-loop load, and the same downstream behind ONE adaptive.Gate as the
// single-process reference. With ADAPTIVE_FLEET_OUT=<file> it writes a
// markdown fragment there for bench/RESULTS.md: the summed in-flight of both
// against the ideal concurrency, the fleet limit over time, Redis calls per
// hold. It takes about 95s; it is skipped with -short or without the
// variable.
func TestAdaptiveFleetReport(t *testing.T) {
	out := os.Getenv("ADAPTIVE_FLEET_OUT")
	if testing.Short() || out == "" {
		t.Skip("set ADAPTIVE_FLEET_OUT=<file> to run (about 95s of real time)")
	}
	const (
		c       = adaptsim.Workers
		procs   = 4
		clients = 10 // per process: 4c in all, as in the simulator's scenarios
		warm    = 15 * time.Second
		length  = 60 * time.Second
	)
	cfg := adaptive.Config{Min: 1, Max: 200, Initial: 2}
	srv := redistest.Start(t)

	// The single-process reference.
	down := adaptsim.NewRealtime(c, adaptsim.Median, adaptsim.Sigma)
	single := adaptive.New(cfg)
	ref := fleetRunLoad(t, []floodgate.Gate{single}, down, procs*clients, 10*time.Second, 30*time.Second,
		func() int64 { return single.Limit() })

	// The fleet.
	down = adaptsim.NewRealtime(c, adaptsim.Median, adaptsim.Sigma)
	var calls atomic.Int64
	var gates []*adaptiveredis.Gate
	var fg []floodgate.Gate
	for range procs {
		cl := redis.NewClient(redistest.Options(srv.Addr))
		cl.AddHook(fleetCountHook{&calls})
		defer cl.Close()
		g := adaptiveredis.New(cl, "adaptive-fleet", adaptiveredis.Config{
			Min: cfg.Min, Max: cfg.Max, Initial: cfg.Initial,
		})
		gates = append(gates, g)
		fg = append(fg, g)
	}
	fleet := fleetRunLoad(t, fg, down, clients, warm, length, func() int64 { return gates[0].Limit() })
	for _, g := range gates {
		g.Close()
	}
	perHold := float64(calls.Load()) / float64(fleet.holds)

	var st adaptiveredis.Stats
	for _, g := range gates {
		s := g.Stats()
		st.Rounds += s.Rounds
		st.CloseLost += s.CloseLost
		st.Flushes += s.Flushes
		st.Stale += s.Stale
		st.Samples += s.Samples
		st.Healed += s.Healed
	}
	ratio := fleet.median / ref.median
	var b strings.Builder
	fmt.Fprintf(&b, "Fleet of %d processes (4 go-redis clients, one Redis) sharing one adaptive limit in front of one simulated downstream of c = %d workers (service lognormal, median %v, σ %.1f), %d closed-loop clients in all; real time, %v, the first %v left out. Reference: the same downstream and load behind one `adaptive.Gate`.\n\n",
		procs, c, adaptsim.Median, adaptsim.Sigma, procs*clients, length, warm)
	b.WriteString("| | in flight at the downstream: median | p5 | p95 | mean | limit (median) | holds/s |\n|---|---|---|---|---|---|---|\n")
	row := func(name string, r fleetLoadResult) {
		fmt.Fprintf(&b, "| %s | %.0f (%.2f c) | %d | %d | %.2f | %d | %.0f |\n", name, r.median, r.median/c, r.p5, r.p95, r.mean, r.limit, r.rate)
	}
	row(fmt.Sprintf("fleet, %d × adaptiveredis.Gate", procs), fleet)
	row("one adaptive.Gate", ref)
	fmt.Fprintf(&b, "\nFleet in-flight median / single-process median: %.2f (target within ±15%%: %s); mean %.2f / %.2f = %.2f.\n\n",
		ratio, map[bool]string{true: "met", false: "not met"}[ratio >= 0.85 && ratio <= 1.15], fleet.mean, ref.mean, fleet.mean/ref.mean)
	fmt.Fprintf(&b, "Fleet limit, one character a second (%d–%d): `%s`\n\n", fleet.lo, fleet.hi, fleet.spark)
	fmt.Fprintf(&b, "Single-process limit (%d–%d): `%s`\n\n", ref.lo, ref.hi, ref.spark)
	fmt.Fprintf(&b, "Redis calls per hold: %.2f (acquire, release, renewals, and the gates' flushes, closes and SetLimits: %d flushes, %d rounds decided, %d closes lost to another process, %d samples discarded as late, %d heals).\n",
		perHold, st.Flushes, st.Rounds, st.CloseLost, st.Stale, st.Healed)
	t.Log("\n" + b.String())
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fleetLoadResult is what fleetRunLoad measured.
type fleetLoadResult struct {
	median, mean float64
	p5, p95      int
	limit        int64 // median limit sampled
	lo, hi       int64
	spark        string
	holds        int64
	rate         float64
}

// fleetRunLoad runs perGate closed-loop clients on each gate for warm + length
// and samples the downstream's in-flight and the limit every 50ms after
// warm (the limit from the start, for the sparkline).
func fleetRunLoad(t *testing.T, gates []floodgate.Gate, down *adaptsim.Realtime, perGate int, warm, length time.Duration, limit func() int64) fleetLoadResult {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var holds atomic.Int64
	for gi, g := range gates {
		for ci := range perGate {
			rng := rand.New(rand.NewPCG(uint64(gi+1), uint64(ci)))
			wg.Go(func() {
				for ctx.Err() == nil {
					hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
					h, err := g.Hold(hctx, 1)
					if err != nil {
						hcancel()
						if ctx.Err() == nil {
							time.Sleep(5 * time.Millisecond) // a refused client's backoff
						}
						continue
					}
					down.Serve(rng)
					h.Release()
					hcancel()
					holds.Add(1)
				}
			})
		}
	}
	var in []int
	var lims []int64
	perSecond := map[int][]int64{}
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	var servedAt int64
	for time.Since(start) < warm+length {
		<-tick.C
		el := time.Since(start)
		l := limit()
		perSecond[int(el/time.Second)] = append(perSecond[int(el/time.Second)], l)
		if el >= warm {
			if servedAt == 0 {
				servedAt = down.Served()
			}
			in = append(in, down.Inside())
			lims = append(lims, l)
		}
	}
	tick.Stop()
	served := down.Served() - servedAt
	cancel()
	wg.Wait()

	var r fleetLoadResult
	r.holds = holds.Load()
	r.rate = float64(served) / length.Seconds()
	slices.Sort(in)
	q := func(p float64) int { return in[min(len(in)-1, int(p*float64(len(in))))] }
	r.p5, r.p95 = q(0.05), q(0.95)
	r.median = float64(q(0.5))
	for _, x := range in {
		r.mean += float64(x)
	}
	r.mean /= float64(len(in))
	slices.Sort(lims)
	r.limit = lims[len(lims)/2]
	var means []float64
	for s := 0; s < int((warm+length)/time.Second); s++ {
		v := perSecond[s]
		if len(v) == 0 {
			continue
		}
		var m float64
		for _, x := range v {
			m += float64(x)
		}
		means = append(means, m/float64(len(v)))
	}
	r.spark, r.lo, r.hi = fleetSparkline(means)
	return r
}

// fleetSparkline draws vs with ▁▂▃▄▅▆▇█ between their minimum and maximum, which
// it returns rounded.
func fleetSparkline(vs []float64) (string, int64, int64) {
	if len(vs) == 0 {
		return "", 0, 0
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	bars := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for _, v := range vs {
		i := 0
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(bars)-1))
		}
		b.WriteRune(bars[i])
	}
	return b.String(), int64(lo + 0.5), int64(hi + 0.5)
}

// fleetCountHook counts the commands a client sends.
type fleetCountHook struct{ n *atomic.Int64 }

func (h fleetCountHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h fleetCountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h fleetCountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
