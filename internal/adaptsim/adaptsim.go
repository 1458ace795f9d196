// Package adaptsim simulates a downstream whose ideal concurrency is known by
// construction, to measure adaptive concurrency limiters on it: floodgate's
// adaptive.Gate in its tests, and beside failsafe-go's adaptivelimiter and an
// AIMD baseline in bench/. Run it inside a testing/synctest bubble: the
// downstream and the load are goroutines sleeping fake time, so a
// ten-minute scenario takes seconds. A seed fixes every random draw
// (arrivals, service times, backoffs), but not the order in which the
// scheduler runs goroutines woken at the same instant, so two runs of one
// seed can differ a little (in one of three runs, by a few tenths of a
// percent in the share of time within ±20%, measured); the report's medians
// over 20 runs are what to read.
//
// The downstream serves Workers calls at once, FIFO beyond; a call's service
// time is lognormal (median Median, σ Sigma) times the scenario's latency
// scale at its start. Its capacity is Workers / mean service time, and the
// concurrency at which throughput stops rising and latency starts to is
// Workers: the ideal limit.
package adaptsim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"
)

// A Limiter is what the simulator drives. Acquire admits one call without
// waiting or refuses it; release reports how the call ended (dropped: the
// downstream timed it out).
type Limiter interface {
	Acquire(ctx context.Context) (release func(dropped bool), ok bool)
	Limit() int
}

// Phase is one stretch of a scenario: from At on, the downstream has Workers
// workers and its service times are scaled by Scale.
type Phase struct {
	At      time.Duration
	Workers int
	Scale   float64
}

// Load is how calls arrive. Open: Poisson arrivals at Rate per second, a
// refused call is lost. Closed: Clients clients each calling back to back
// (Think between calls), a refused client retrying after an exponential
// backoff of mean Backoff.
type Load struct {
	Rate    float64
	Clients int
	Think   time.Duration
	Backoff time.Duration
}

// A Scenario is a downstream's phases and a load over Length.
type Scenario struct {
	Name    string
	Phases  []Phase // the first At 0
	Load    Load
	Length  time.Duration
	Median  time.Duration // service time median at scale 1
	Sigma   float64       // lognormal σ of the service time
	Timeout time.Duration // a call that has not completed after Timeout is dropped (0: none)
}

// Sample is the limiter seen at one instant.
type Sample struct {
	At       time.Duration
	Limit    int
	InFlight int
	Ideal    int // the downstream's workers
}

// Completion is one admitted call's end.
type Completion struct {
	At      time.Duration
	Latency time.Duration // admission to completion
	Dropped bool
}

// Result is what one run observed.
type Result struct {
	Samples     []Sample // every 100ms
	Completions []Completion
	Refused     int
}

// SampleEvery is the sampling period of Result.Samples.
const SampleEvery = 100 * time.Millisecond

// Run runs sc against lim with the given seed and returns what it observed.
// It must run inside a synctest bubble; it returns when every goroutine it
// started has exited.
func Run(sc Scenario, lim Limiter, seed uint64) Result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	d := newDownstream(start, sc.Phases)
	r := &recorder{start: start}
	var wg sync.WaitGroup
	call := func(rng *rand.Rand) bool {
		release, ok := lim.Acquire(ctx)
		if !ok {
			r.refuse()
			return false
		}
		r.inflight(+1)
		t0 := time.Now()
		dropped := d.serve(sc, rng.NormFloat64(), sc.Timeout)
		lat := time.Since(t0)
		r.inflight(-1)
		release(dropped)
		r.complete(time.Since(start), lat, dropped)
		return true
	}
	end := start.Add(sc.Length)
	if sc.Load.Clients > 0 {
		for i := range sc.Load.Clients {
			rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
			wg.Go(func() {
				time.Sleep(time.Duration(rng.Float64() * float64(sc.Median)))
				for time.Now().Before(end) {
					if call(rng) {
						if sc.Load.Think > 0 {
							time.Sleep(time.Duration(rng.ExpFloat64() * float64(sc.Load.Think)))
						}
						continue
					}
					time.Sleep(time.Duration(rng.ExpFloat64()*float64(sc.Load.Backoff)) + time.Microsecond)
				}
			})
		}
	} else {
		rng := rand.New(rand.NewPCG(seed, 0))
		wg.Go(func() {
			for i := uint64(1); ; i++ {
				time.Sleep(time.Duration(rng.ExpFloat64() / sc.Load.Rate * float64(time.Second)))
				if !time.Now().Before(end) {
					return
				}
				crng := rand.New(rand.NewPCG(seed, i<<20))
				wg.Go(func() { call(crng) })
			}
		})
	}
	wg.Go(func() {
		for t := time.Duration(0); t < sc.Length; t += SampleEvery {
			time.Sleep(SampleEvery)
			r.sample(time.Since(start), lim.Limit(), d.workersAt(time.Since(start)))
		}
	})
	wg.Wait()
	return r.result()
}

type downstream struct {
	start  time.Time
	phases []Phase
	pool   Pool // its workers follow the phases
}

func newDownstream(start time.Time, phases []Phase) *downstream {
	d := &downstream{start: start, phases: phases}
	d.pool.count = func() int { return d.workersAt(time.Since(d.start)) }
	return d
}

func (d *downstream) phaseAt(t time.Duration) Phase {
	p := d.phases[0]
	for _, q := range d.phases {
		if q.At <= t {
			p = q
		}
	}
	return p
}

func (d *downstream) workersAt(t time.Duration) int { return d.phaseAt(t).Workers }

// serve queues for a worker, holds it for the service time and gives it back.
// It reports whether the call was dropped: still not done after timeout.
func (d *downstream) serve(sc Scenario, z float64, timeout time.Duration) (dropped bool) {
	t0 := time.Now()
	d.pool.Serve(func() time.Duration {
		p := d.phaseAt(time.Since(d.start))
		svc := time.Duration(float64(sc.Median) * math.Exp(sc.Sigma*z) * p.Scale)
		if timeout > 0 {
			if left := timeout - time.Since(t0); svc > left {
				svc, dropped = max(left, 0), true
			}
		}
		return svc
	})
	return dropped
}

type recorder struct {
	start time.Time

	mu       sync.Mutex
	inFlight int
	res      Result
}

func (r *recorder) refuse() {
	r.mu.Lock()
	r.res.Refused++
	r.mu.Unlock()
}

func (r *recorder) inflight(d int) {
	r.mu.Lock()
	r.inFlight += d
	r.mu.Unlock()
}

func (r *recorder) complete(at, lat time.Duration, dropped bool) {
	r.mu.Lock()
	r.res.Completions = append(r.res.Completions, Completion{At: at, Latency: lat, Dropped: dropped})
	r.mu.Unlock()
}

func (r *recorder) sample(at time.Duration, limit, ideal int) {
	r.mu.Lock()
	r.res.Samples = append(r.res.Samples, Sample{At: at, Limit: limit, InFlight: r.inFlight, Ideal: ideal})
	r.mu.Unlock()
}

func (r *recorder) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.Slice(r.res.Completions, func(i, j int) bool { return r.res.Completions[i].At < r.res.Completions[j].At })
	return r.res
}

// Capacity is the downstream's throughput in calls per second in phase p.
func (sc Scenario) Capacity(p Phase) float64 {
	mean := float64(sc.Median) * math.Exp(sc.Sigma*sc.Sigma/2) * p.Scale
	return float64(p.Workers) / (mean / float64(time.Second))
}

// NoLoadP99 is the p99 of the service time in phase p: the p99 of a call that
// never queues.
func (sc Scenario) NoLoadP99(p Phase) time.Duration {
	return time.Duration(float64(sc.Median) * math.Exp(sc.Sigma*2.3263) * p.Scale)
}

// Converged returns how long after `from` the limit entered ±10% of the
// ideal concurrency to stay within ±20% of it for the following hold (or
// until the samples end, if sooner); ok is false if it never did.
func (res Result) Converged(from, hold time.Duration) (time.Duration, bool) {
	s := res.Samples
	for i := range s {
		if s[i].At < from || !within(s[i].Limit, s[i].Ideal, 0.10) {
			continue
		}
		ok := true
		for j := i; j < len(s) && s[j].At <= s[i].At+hold; j++ {
			if !within(s[j].Limit, s[j].Ideal, 0.20) {
				ok = false
				break
			}
		}
		if ok {
			return s[i].At - from, true
		}
	}
	return 0, false
}

// within20 returns the share of the samples in [from, from+hold] within
// ±20% of the ideal.
func (res Result) within20(from, hold time.Duration) float64 {
	in, all := 0, 0
	for _, x := range res.Samples {
		if x.At >= from && x.At <= from+hold {
			all++
			if within(x.Limit, x.Ideal, 0.20) {
				in++
			}
		}
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

func within(v, ideal int, tol float64) bool {
	return math.Abs(float64(v-ideal)) <= tol*float64(ideal)+1e-9
}

// Window is what the calls that completed in [from, to) saw.
type Window struct {
	P99      time.Duration // of admitted calls' latency
	Goodput  float64       // completions that were not dropped, per second
	MaxLimit int           // the highest limit sampled in the window
	Limit    float64       // the mean limit sampled
}

// In measures the window [from, to).
func (res Result) In(from, to time.Duration) Window {
	var lats []time.Duration
	good := 0
	for _, c := range res.Completions {
		if c.At >= from && c.At < to {
			lats = append(lats, c.Latency)
			if !c.Dropped {
				good++
			}
		}
	}
	var w Window
	if len(lats) > 0 {
		slices.Sort(lats)
		w.P99 = lats[min(len(lats)-1, int(math.Ceil(0.99*float64(len(lats))))-1)]
	}
	w.Goodput = float64(good) / (to - from).Seconds()
	n := 0
	for _, s := range res.Samples {
		if s.At >= from && s.At < to {
			w.MaxLimit = max(w.MaxLimit, s.Limit)
			w.Limit += float64(s.Limit)
			n++
		}
	}
	if n > 0 {
		w.Limit /= float64(n)
	}
	return w
}

// The standard downstream: 20 workers (a database pool's worth), service
// times of median 10ms (mean 11.3ms, p99 32ms), so a capacity of 1,765
// calls/s and an ideal concurrency of 20.
const (
	Workers = 20
	Median  = 10 * time.Millisecond
	Sigma   = 0.5
)

// Step is when the step scenarios change the downstream.
const Step = 30 * time.Second

// Scenarios returns the scenarios of the benchmark report, on the standard
// downstream: a latency ×4 step, capacity halved and doubled, 3× overload of
// an open load, a ten-minute incident at ×10 latency, and the runaway case of
// Netflix concurrency-limits PR #134 (1.25 × the ideal concurrency of clients
// calling back to back, where a limiter that lets them all in sees latency
// 1.25 × the baseline, a gradient of 0.8, for ever).
func Scenarios() []Scenario {
	base := Scenario{Median: Median, Sigma: Sigma, Length: Step + 70*time.Second,
		Load: Load{Clients: 3 * Workers, Backoff: 20 * time.Millisecond}}
	with := func(name string, phases ...Phase) Scenario {
		sc := base
		sc.Name, sc.Phases = name, append([]Phase{{Workers: Workers, Scale: 1}}, phases...)
		return sc
	}
	lat := with("latency x4", Phase{At: Step, Workers: Workers, Scale: 4})
	half := with("capacity /2", Phase{At: Step, Workers: Workers / 2, Scale: 1})
	double := with("capacity x2", Phase{At: Step, Workers: 2 * Workers, Scale: 1})
	over := with("overload x3")
	over.Length = 60 * time.Second
	over.Load = Load{Rate: 3 * over.Capacity(over.Phases[0])}
	inc := with("incident x10", Phase{At: Step, Workers: Workers, Scale: 10}, Phase{At: Step + 10*time.Minute, Workers: Workers, Scale: 1})
	inc.Length = Step + 10*time.Minute + 60*time.Second
	inc.Load.Backoff = 50 * time.Millisecond
	run := with("runaway #134")
	run.Length = 120 * time.Second
	run.Load = Load{Clients: Workers * 5 / 4, Backoff: 5 * time.Millisecond}
	return []Scenario{lat, half, double, over, inc, run}
}

// Metrics are a run's numbers against the report's targets.
type Metrics struct {
	// Converge is how long after the change (the step, or the start) the
	// limit took to enter ±10% of the ideal and stay within ±20% for 60s;
	// Converged is false if it never did.
	Converge  time.Duration
	Converged bool
	// Enter is how long after the change the limit took to come within
	// ±10% of the ideal and stay within ±20% for 10s (Entered false if it
	// never did); Within20 is the share of the minute after that during
	// which it stayed within ±20%.
	Enter    time.Duration
	Entered  bool
	Within20 float64
	// P99 is the admitted calls' p99 latency over the steady window as a
	// multiple of the no-load p99 there; Goodput their completions per
	// second as a share of the capacity.
	P99, Goodput float64
	// Growth is, for the incident, the mean limit over its last minute
	// over the mean limit in the 10s before it; for the runaway case, the
	// mean limit over its last minute over the mean of 20s–30s: above 1,
	// the limit drifted up. 0 for the others. MaxLimit is the highest limit
	// over the same stretch, as a multiple of the ideal.
	Growth, MaxLimit float64
}

// Measure computes res's Metrics for sc.
func Measure(sc Scenario, res Result) Metrics {
	change := time.Duration(0)
	if len(sc.Phases) > 1 {
		change = sc.Phases[1].At
	}
	var m Metrics
	m.Converge, m.Converged = res.Converged(change, 60*time.Second)
	m.Enter, m.Entered = res.Converged(change, 10*time.Second)
	m.Within20 = res.within20(change+m.Enter, 60*time.Second)
	from, to := change+5*time.Second, sc.Length
	if len(sc.Phases) > 2 {
		to = sc.Phases[2].At
	}
	if change == 0 {
		from = 10 * time.Second
	}
	d := newDownstream(time.Time{}, sc.Phases)
	ph := d.phaseAt(from)
	w := res.In(from, to)
	m.P99 = float64(w.P99) / float64(sc.NoLoadP99(ph))
	m.Goodput = w.Goodput / sc.Capacity(ph)
	switch {
	case len(sc.Phases) > 2:
		m.Growth = res.In(to-time.Minute, to).Limit / res.In(change-10*time.Second, change).Limit
		m.MaxLimit = float64(res.In(change, to).MaxLimit) / float64(sc.Phases[1].Workers)
	case sc.Load.Clients > 0 && sc.Load.Clients < 2*sc.Phases[0].Workers:
		m.Growth = res.In(sc.Length-time.Minute, sc.Length).Limit / res.In(20*time.Second, 30*time.Second).Limit
		m.MaxLimit = float64(res.In(30*time.Second, sc.Length).MaxLimit) / float64(sc.Phases[0].Workers)
	}
	return m
}
