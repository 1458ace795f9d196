package adaptsim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
)

// A Class is one criticality class of an overload scenario's load: its
// share of the arrivals and how long its calls may wait at the bulkhead
// (bulkhead.Criticality.MaxWait: negative never waits).
type Class struct {
	Name    string
	Share   float64
	MaxWait time.Duration
}

// An Overload is an open load of criticality classes on the standard kind
// of downstream (Workers workers, lognormal service times, FIFO beyond): a
// base load before From and after To, and Peak calls per second between.
type Overload struct {
	Name    string
	Classes []Class // most critical first; the shares sum to 1
	Workers int
	Median  time.Duration
	Sigma   float64
	// Base and Peak are the offered Poisson rates, in calls per second,
	// outside and inside [From, To).
	Base, Peak float64
	From, To   time.Duration
	Length     time.Duration
}

// The classes of the standard overload, most critical first: the issue's
// critical, default and sheddable (also Google's SRE book's words) with
// high between critical and default, so that the classes are four and map
// one to one to failsafe-go's priorities VeryHigh, High, Medium and Low.
const (
	Critical  = "critical"
	High      = "high"
	Default   = "default"
	Sheddable = "sheddable"
)

// StandardOverload is the scenario on the standard downstream (20
// workers, median 10ms, σ 0.5: 1,765 calls/s): critical, high, default and
// sheddable calls mixed 10/30/30/30 at half the capacity for 10s, three
// times the capacity for 20s, then half again for 10s. The critical class
// alone is 0.3× the capacity, critical and high together 1.2×: the high
// class is shed in part, default and sheddable almost wholly.
func StandardOverload() Overload {
	o := Overload{
		Name: "overload x3 by class",
		Classes: []Class{
			{Name: Critical, Share: 0.1, MaxWait: time.Second},
			{Name: High, Share: 0.3, MaxWait: 50 * time.Millisecond},
			{Name: Default, Share: 0.3, MaxWait: 20 * time.Millisecond},
			{Name: Sheddable, Share: 0.3, MaxWait: -1},
		},
		Workers: Workers, Median: Median, Sigma: Sigma,
		From: 10 * time.Second, To: 30 * time.Second, Length: 40 * time.Second,
	}
	o.Base, o.Peak = 0.5*o.Capacity(), 3*o.Capacity()
	return o
}

func (o Overload) scenario() Scenario {
	return Scenario{Median: o.Median, Sigma: o.Sigma, Phases: []Phase{{Workers: o.Workers, Scale: 1}}}
}

// Capacity is the downstream's throughput in calls per second.
func (o Overload) Capacity() float64 { return o.scenario().Capacity(o.scenario().Phases[0]) }

// NoLoadP99 is the p99 of the service time: the p99 of a call that never
// waits.
func (o Overload) NoLoadP99() time.Duration { return o.scenario().NoLoadP99(o.scenario().Phases[0]) }

// rateAt is the offered rate at t.
func (o Overload) rateAt(t time.Duration) float64 {
	if t >= o.From && t < o.To {
		return o.Peak
	}
	return o.Base
}

// A ClassLimiter admits calls of criticality classes. Do admits a call of
// class (a Class's Name), waiting as the limiter does; if admitted it runs
// serve and returns nil, else it returns the refusal without calling
// serve. Limit is the limit now, for the samples.
type ClassLimiter interface {
	Do(ctx context.Context, class string, serve func()) error
	Limit() int
}

// Call is one arrival of a RunClasses run.
type Call struct {
	At      time.Duration // its arrival
	Class   int           // index in Overload.Classes
	Latency time.Duration // arrival to completion (or refusal), the bulkhead's wait included
	OK      bool          // served; false: refused
}

// ClassResult is what one RunClasses run observed.
type ClassResult struct {
	Calls       []Call   // in arrival order
	Samples     []Sample // every SampleEvery: the limit and the calls in the downstream
	MaxInFlight int      // the most calls the downstream held at once (served and queued)
}

// RunClasses runs o against lim with the given seed. It must run inside a
// synctest bubble; it returns when every goroutine it started has exited.
func RunClasses(o Overload, lim ClassLimiter, seed uint64) ClassResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	pool := NewPool(o.Workers)
	var (
		mu       sync.Mutex
		res      ClassResult
		inFlight int
	)
	var wg sync.WaitGroup
	call := func(at time.Duration, class int, z float64) {
		served := false
		err := lim.Do(ctx, o.Classes[class].Name, func() {
			mu.Lock()
			inFlight++
			res.MaxInFlight = max(res.MaxInFlight, inFlight)
			mu.Unlock()
			pool.Serve(func() time.Duration {
				return time.Duration(float64(o.Median) * math.Exp(o.Sigma*z))
			})
			mu.Lock()
			inFlight--
			mu.Unlock()
			served = true
		})
		c := Call{At: at, Class: class, Latency: time.Since(start) - at, OK: err == nil && served}
		mu.Lock()
		res.Calls = append(res.Calls, c)
		mu.Unlock()
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	wg.Go(func() {
		t := time.Duration(0)
		for {
			rate := o.rateAt(t)
			next := t + time.Duration(rng.ExpFloat64()/rate*float64(time.Second))
			// Arrivals are memoryless: at a change of rate, draw again.
			if b := o.From; t < b && next >= b {
				t = b
				continue
			}
			if b := o.To; t < b && next >= b {
				t = b
				continue
			}
			t = next
			if t >= o.Length {
				return
			}
			class := pick(o.Classes, rng.Float64())
			z := rng.NormFloat64()
			at := t
			time.Sleep(time.Until(start.Add(at)))
			wg.Go(func() { call(at, class, z) })
		}
	})
	wg.Go(func() {
		for t := SampleEvery; t <= o.Length; t += SampleEvery {
			time.Sleep(time.Until(start.Add(t)))
			s := Sample{At: t, Limit: lim.Limit(), Ideal: o.Workers}
			mu.Lock()
			s.InFlight = inFlight
			res.Samples = append(res.Samples, s)
			mu.Unlock()
		}
	})
	wg.Wait()
	sort.SliceStable(res.Calls, func(i, j int) bool { return res.Calls[i].At < res.Calls[j].At })
	return res
}

// pick returns the class that u (in [0, 1)) falls in, by the shares.
func pick(classes []Class, u float64) int {
	for i, c := range classes {
		if u < c.Share {
			return i
		}
		u -= c.Share
	}
	return len(classes) - 1
}

// ClassMetric is one class's figures over the overload [From, To): its
// calls that arrived then.
type ClassMetric struct {
	Name    string
	Offered int
	Success float64 // share served
	// P99 is the served calls' p99 latency (arrival to completion), and
	// P99x that over the no-load p99.
	P99  time.Duration
	P99x float64
}

// ShedBin is the width of the bins in which ClassMeasure looks for
// shedding, and ShedShare the share of a bin's arrivals that must be
// refused for the bin to count as shedding.
const (
	ShedBin   = 100 * time.Millisecond
	ShedShare = 0.05
)

// ClassMetrics are a RunClasses run's numbers against the targets.
type ClassMetrics struct {
	Classes []ClassMetric
	// Goodput is the calls served per second over the overload (by their
	// completion) over the capacity.
	Goodput float64
	// ShedStart is how long after From the first bin that sheds ends (a
	// bin sheds when at least ShedShare of the calls that arrived in it
	// were refused); Started is false if none did before To. ShedStop is
	// how long after To the last bin that sheds ends (0 if none after To);
	// Stopped is false if the run's last second still shed.
	ShedStart, ShedStop time.Duration
	Started, Stopped    bool
	// BaseRefused is the share of the calls refused at the base load before
	// the overload (from From/2 to From: the first half is the limiter's
	// warm-up); BaseP99 the served calls' p99 then.
	BaseRefused float64
	BaseP99     time.Duration
}

// ClassMeasure computes res's ClassMetrics for o.
func ClassMeasure(o Overload, res ClassResult) ClassMetrics {
	m := ClassMetrics{Classes: make([]ClassMetric, len(o.Classes))}
	lats := make([][]time.Duration, len(o.Classes))
	var base []time.Duration
	baseN, baseRefused := 0, 0
	good := 0
	nbins := int((o.Length + ShedBin - 1) / ShedBin)
	arrived, refused := make([]int, nbins), make([]int, nbins)
	for _, c := range res.Calls {
		b := int(c.At / ShedBin)
		arrived[b]++
		if !c.OK {
			refused[b]++
		}
		if done := c.At + c.Latency; c.OK && done >= o.From && done < o.To {
			good++
		}
		switch {
		case c.At < o.From/2:
			// The first half of the base load is the limiter's warm-up.
		case c.At < o.From:
			baseN++
			if c.OK {
				base = append(base, c.Latency)
			} else {
				baseRefused++
			}
		case c.At < o.To:
			cm := &m.Classes[c.Class]
			cm.Offered++
			if c.OK {
				lats[c.Class] = append(lats[c.Class], c.Latency)
			}
		}
	}
	for i := range m.Classes {
		cm := &m.Classes[i]
		cm.Name = o.Classes[i].Name
		if cm.Offered > 0 {
			cm.Success = float64(len(lats[i])) / float64(cm.Offered)
		}
		cm.P99 = p99(lats[i])
		cm.P99x = float64(cm.P99) / float64(o.NoLoadP99())
	}
	m.Goodput = float64(good) / (o.To - o.From).Seconds() / o.Capacity()
	if baseN > 0 {
		m.BaseRefused = float64(baseRefused) / float64(baseN)
	}
	m.BaseP99 = p99(base)
	sheds := func(b int) bool {
		return refused[b] > 0 && float64(refused[b]) >= ShedShare*float64(arrived[b])
	}
	for b := int(o.From / ShedBin); b < nbins && time.Duration(b)*ShedBin < o.To; b++ {
		if sheds(b) {
			m.ShedStart, m.Started = time.Duration(b+1)*ShedBin-o.From, true
			break
		}
	}
	m.Stopped = true
	for b := nbins - 1; b >= 0 && time.Duration(b+1)*ShedBin > o.To; b-- {
		if sheds(b) {
			m.ShedStop = time.Duration(b+1)*ShedBin - o.To
			m.Stopped = time.Duration(b+1)*ShedBin <= o.Length-time.Second
			break
		}
	}
	return m
}

func p99(lats []time.Duration) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	lats = slices.Clone(lats)
	slices.Sort(lats)
	return lats[min(len(lats)-1, int(math.Ceil(0.99*float64(len(lats))))-1)]
}

// Bulkhead returns a ClassLimiter that admits through one global layer over
// gate with o's classes (their MaxWait; nothing reserved), a request's class
// its identity's Criticality. The limit sampled is the gate's.
func (o Overload) Bulkhead(gate floodgate.Gate) (ClassLimiter, *bulkhead.Bulkhead) {
	classes := make([]bulkhead.Criticality, len(o.Classes))
	for i, c := range o.Classes {
		classes[i] = bulkhead.Criticality{Name: c.Name, MaxWait: c.MaxWait}
	}
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
		Name: "global", Gate: gate, Classes: classes,
	}}})
	lim, _ := gate.(interface{ Limit() int64 })
	return bulkheadLimiter{b: b, lim: lim}, b
}

type bulkheadLimiter struct {
	b   *bulkhead.Bulkhead
	lim interface{ Limit() int64 }
}

func (l bulkheadLimiter) Do(ctx context.Context, class string, serve func()) error {
	ctx = bulkhead.WithIdentity(ctx, bulkhead.Identity{Tenant: "sim", Criticality: class})
	return l.b.Do(ctx, bulkhead.Request{}, func(context.Context) error { serve(); return nil })
}

func (l bulkheadLimiter) Limit() int {
	if l.lim == nil {
		return 0
	}
	return int(l.lim.Limit())
}
