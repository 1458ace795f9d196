package adaptiveredis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/adaptive/adaptiveredis"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// fleet is n Gates of one name, each on its own client, in front of one
// downstream, with closed-loop load: clients callers per gate, each calling
// back to back (Hold, Serve, Release), retrying after a short pause when
// refused.
type fleet struct {
	gates []*adaptiveredis.Gate
	down  *adaptsim.Realtime
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func newClients(t *testing.T, addr string, n int) []*redis.Client {
	out := make([]*redis.Client, n)
	for i := range out {
		out[i] = redis.NewClient(redistest.Options(addr))
	}
	t.Cleanup(func() {
		for _, c := range out {
			c.Close()
		}
	})
	return out
}

func startFleet(t *testing.T, clients []*redis.Client, name string, cfg adaptiveredis.Config, down *adaptsim.Realtime, perGate int) *fleet {
	var gates []*adaptiveredis.Gate
	for _, c := range clients {
		gates = append(gates, adaptiveredis.New(c, name, cfg))
	}
	return loadFleet(t, gates, down, perGate)
}

// loadFleet starts perGate clients on each gate.
func loadFleet(t *testing.T, gates []*adaptiveredis.Gate, down *adaptsim.Realtime, perGate int) *fleet {
	f := &fleet{down: down, gates: gates}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	for gi, g := range f.gates {
		for ci := range perGate {
			rng := rand.New(rand.NewPCG(uint64(gi), uint64(ci)))
			f.wg.Go(func() {
				for ctx.Err() == nil {
					hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
					h, err := g.Hold(hctx, 1)
					if err != nil {
						hcancel()
						if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
							select {
							case <-ctx.Done():
							case <-time.After(5 * time.Millisecond):
							}
						}
						continue
					}
					down.Serve(rng)
					h.Release()
					hcancel()
				}
			})
		}
	}
	t.Cleanup(f.close)
	return f
}

// close stops the load and closes every gate; it fails the test if a Close
// does not return within 10s.
func (f *fleet) close() {
	f.stop()
	f.wg.Wait()
	for _, g := range f.gates {
		done := make(chan struct{})
		go func() { g.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			panic("adaptiveredis: Close did not return within 10s")
		}
	}
	f.gates = nil
}

// sampleInFlight samples the calls inside the downstream every 50ms for d.
func (f *fleet) sampleInFlight(d time.Duration) []int {
	var out []int
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		out = append(out, f.down.Inside())
	}
	return out
}

// patientBreaker is a breaker for a loaded test machine: a call may take
// half a second, and it opens only after many failures.
func patientBreaker() *breaker.Breaker {
	return breaker.New("fleet", breaker.Config{CallTimeout: 500 * time.Millisecond, ConsecutiveFailures: 50})
}

// quantile returns the q-quantile of xs (sorted in place).
func quantile(xs []int, q float64) int {
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

func mean(xs []int) float64 {
	s := 0
	for _, x := range xs {
		s += x
	}
	return float64(s) / float64(len(xs))
}

// TestFleetSharesOneLimit: three Gates of one name (three clients, as three
// processes would have) in front of ONE downstream of c workers, with 3 × 8
// clients calling back to back, share one limit: after it settles, the
// downstream's in-flight (sampled every 50ms for 15s) stays around c, not 3 ×
// c, and every gate's limit is the fleet's.
func TestFleetSharesOneLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("30s of real time")
	}
	db := redistest.Connect(t)
	const c = 8
	down := adaptsim.NewRealtime(c, 10*time.Millisecond, 0.3)
	clients := newClients(t, db.Client.Options().Addr, 3)
	f := startFleet(t, clients, db.Key("fleet"), adaptiveredis.Config{Min: 1, Max: 100, Initial: 2, Breaker: patientBreaker(), WaiterTTL: 2 * time.Second}, down, 8)

	time.Sleep(12 * time.Second) // the load settles: real time the test measures, not synchronisation
	in := f.sampleInFlight(15 * time.Second)
	m, med, p5, p95 := mean(in), quantile(in, 0.5), quantile(in, 0.05), quantile(in, 0.95)
	within := 0
	for _, x := range in {
		if float64(x) >= 0.8*c && float64(x) <= 1.2*c {
			within++
		}
	}
	t.Logf("downstream in-flight over %d samples (c = %d): mean %.2f, median %d, p5 %d, p95 %d; %.0f%% of samples within ±20%% of c",
		len(in), c, m, med, p5, p95, 100*float64(within)/float64(len(in)))
	// ±20% on the mean and the median: this is real time on a loaded
	// machine, and single samples move with each service time.
	if m < 0.8*c || m > 1.2*c || float64(med) < 0.8*c || float64(med) > 1.25*c {
		t.Errorf("fleet in-flight mean %.2f, median %d; want within ±20%% of c = %d", m, med, c)
	}

	// Every gate's limit is the fleet's: the semaphore's stored limit.
	sem := f.gates[0].Semaphore()
	var last string
	agreed := false
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		st, err := sem.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		lims := []int64{st.Limit}
		for _, g := range f.gates {
			lims = append(lims, g.Limit())
		}
		last = fmt.Sprint(lims)
		if lims[1] == st.Limit && lims[2] == st.Limit && lims[3] == st.Limit {
			agreed = true
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	if !agreed {
		t.Errorf("gates' limits never all equal to the semaphore's within 3s: [semaphore gates...] = %s", last)
	}
	for i, g := range f.gates {
		s := g.Stats()
		t.Logf("gate %d: limit %d, processes %d, share %d, decided %d (+%d -%d rebase %d probe %d), lost closes %d, flushes %d, stale %d, healed %d, baseline %v",
			i, s.Limit, s.Processes, s.LocalShare, s.Rounds, s.Increases, s.Decreases, s.Rebases, s.Probes, s.CloseLost, s.Flushes, s.Stale, s.Healed, s.Baseline)
		if s.Processes != 3 {
			t.Errorf("gate %d saw %d processes, want 3", i, s.Processes)
		}
	}
}
