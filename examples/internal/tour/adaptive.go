package tour

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
)

// The adaptive section: a backend whose capacity nobody told the gate. It
// runs in real time, for adaptivePhase at each capacity, whatever -d says:
// the point is how soon the gate finds each one.
const (
	adaptiveWorkers = 8                       // the backend's workers, halved half-way
	adaptiveService = 5 * time.Millisecond    // a call's mean service time (a timer's jitter on a busy machine is well below it)
	adaptiveCallers = 32                      // callers back to back: 4× the first capacity
	adaptivePhase   = 1600 * time.Millisecond // how long each capacity lasts
	adaptiveEvery   = 50 * time.Millisecond   // the gate is sampled this often
	adaptivePrint   = 5                       // a printed row every 5 samples (250ms)
	adaptiveNear    = 0.25                    // "found": within ±25% of the workers
)

// adaptiveConfig is the gate of the section, as its note prints it. It
// starts below the backend's capacity, at half of it, as a cautious guess
// would; from 1, the default, it takes a few more rounds (those at a
// concurrency of 1 or 2 are the longest).
var adaptiveConfig = adaptive.Config{Initial: 4, MinRound: 20 * time.Millisecond, MinSamples: 50}

const adaptiveConfigText = "adaptive.New(adaptive.Config{Initial: 4, MinRound: 20 * time.Millisecond, MinSamples: 50})"

var adaptiveTitle = fmt.Sprintf("adaptive gate: finds how many a backend can take from its latency (%d workers, then %d)", adaptiveWorkers, adaptiveWorkers/2)

// adaptiveSample is the gate seen at one instant.
type adaptiveSample struct {
	at      time.Duration
	workers int
	st      adaptive.Stats
}

// adaptiveJob is the tour's last section: closed-loop callers through an
// adaptive.Gate in front of a simulated backend (adaptsim.Pool), whose workers are halved half-way.
// It prints what the gate's Stats say a few times a second, and per
// capacity how soon the limit came within ±25% of the workers to stay there
// and where it settled.
func adaptiveJob(ctx context.Context) (*table, error) {
	g := adaptive.New(adaptiveConfig)
	be := adaptsim.NewPool(adaptiveWorkers) // workers, FIFO beyond
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range adaptiveCallers {
		rng := rand.New(rand.NewPCG(uint64(i), 21))
		wg.Go(func() {
			for ctx.Err() == nil {
				h, err := g.Hold(ctx, 1)
				if err != nil {
					examplekit.Sleep(ctx, time.Millisecond) // refused, or ctx done
					continue
				}
				d := time.Duration((0.9 + 0.2*rng.Float64()) * float64(adaptiveService)) // ±10%
				be.Serve(func() time.Duration { return d })
				h.Release()
			}
		})
	}
	var samples []adaptiveSample
	start := time.Now()
	began := map[int]time.Duration{adaptiveWorkers: 0} // when each capacity began
	tick := time.NewTicker(adaptiveEvery)
	for at := time.Duration(0); at < 2*adaptivePhase && ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if at = time.Since(start); at >= adaptivePhase && be.Workers() == adaptiveWorkers {
			be.SetWorkers(adaptiveWorkers / 2)
			began[adaptiveWorkers/2] = time.Since(start)
		}
		samples = append(samples, adaptiveSample{at: time.Since(start), workers: be.Workers(), st: g.Stats()})
	}
	tick.Stop()
	cancel()
	wg.Wait()
	if len(samples) == 0 {
		return nil, ctx.Err()
	}

	var t table
	t.note = fmt.Sprintf("%s; %d callers back to back; calls of %v on average, %d workers, FIFO beyond; %d workers from %.2fs\n"+
		"   the gate's Stats: round latency = the last decided round's mean hold time, baseline = the no-queue latency it judges it against",
		adaptiveConfigText, adaptiveCallers, adaptiveService, adaptiveWorkers, adaptiveWorkers/2, began[adaptiveWorkers/2].Seconds())
	t.add("at", "workers", "limit", "in flight", "round latency", "baseline")
	for i, s := range samples {
		if (i+1)%adaptivePrint == 0 {
			t.add(fmt.Sprintf("%.2fs", s.at.Seconds()), fmt.Sprint(s.workers), fmt.Sprint(s.st.Limit), fmt.Sprint(s.st.InFlight),
				usms(s.st.Latency), usms(s.st.Baseline))
		}
	}
	found := []string{}
	settled := []string{}
	for _, w := range []int{adaptiveWorkers, adaptiveWorkers / 2} {
		var phase []adaptiveSample
		for _, s := range samples {
			if s.workers == w {
				phase = append(phase, s)
			}
		}
		if len(phase) == 0 {
			continue
		}
		from := began[w]
		since := "the start"
		if w != adaptiveWorkers {
			since = "the halving"
		}
		f := fmt.Sprintf("%d workers: not within ±25%%", w)
		for i := range phase {
			if allNear(phase[i:], w) {
				f = fmt.Sprintf("%d workers: within ±25%% from %.2fs after %s", w, (phase[i].at - from).Seconds(), since)
				break
			}
		}
		found = append(found, f)
		var sum, n float64
		for _, s := range phase {
			if s.at-from >= adaptivePhase/2 {
				sum += float64(s.st.Limit)
				n++
			}
		}
		if n > 0 {
			settled = append(settled, fmt.Sprintf("%d workers: %.1f", w, sum/n))
		}
	}
	st := g.Stats()
	label := func(l string) string { return fmt.Sprintf("%-21s", l) }
	t.trailer = append(t.trailer,
		label("limit found")+"  "+strings.Join(found, "  "),
		label("mean limit, last half")+"  "+strings.Join(settled, "  "),
		label("rounds")+"  "+fmt.Sprintf("%d: %d up, %d down, %d rebases, %d probes; %d holds measured, %d calls served",
			st.Rounds, st.Increases, st.Decreases, st.Rebases, st.Probes, st.Samples, st.Queue.Acquired))
	return &t, nil
}

// allNear reports whether every sample's limit is within ±25% of w.
func allNear(ss []adaptiveSample, w int) bool {
	for _, s := range ss {
		if d := float64(s.st.Limit - int64(w)); d > adaptiveNear*float64(w) || -d > adaptiveNear*float64(w) {
			return false
		}
	}
	return true
}

// usms prints a duration of a few milliseconds to 0.01 ms; 0 (nothing
// measured yet) as "-".
func usms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}
