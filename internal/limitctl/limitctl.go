// Package limitctl is the adaptive gates' controller: it moves a concurrency
// limit from the latency of successive rounds of holds. It is pure: no clock,
// no goroutines, no locks. adaptive.Gate feeds it the rounds of one process;
// adaptiveredis.Gate the rounds of a fleet, with the State kept in Redis.
//
// The model is the one the downstream obeys by construction in the simulator
// and roughly in life: it serves c calls at once, each in S; beyond c calls
// queue. Below c the latency W stays S whatever the concurrency; above it
// W = concurrency × S / c (Little's law). So with a baseline B = S,
// r = W / B tells the concurrency apart from the knee c, and a limit set to
// concurrency / r lands on c in one round.
//
// The baseline is the hard part, and where the field's controllers fail:
//   - it must follow a downstream that got slower (a latency step), or the
//     limit collapses and stays down;
//   - it must not follow queueing, or it drifts up with the queue and the
//     limit never comes back down (Envoy PR #11579) or runs away upward
//     (Netflix concurrency-limits PR #134, where a long-term average
//     baseline catches up with a latency raised by queueing).
//
// limitctl therefore lowers the baseline to any faster round, and raises it
// only on evidence that a higher latency is not queueing: after the
// concurrency fell by a fifth or more (a decrease, or a probe round), the
// latency did not fall with it (it stayed above 90% of what it was). Only
// holds that began in the round count (the gates tag each hold with its start),
// so a round after a decrease is not measured on holds queued under the
// higher limit before it (the cause of PR #11579). The limit grows only while
// the latency is within Tolerance/2 of the baseline and the gate was full, so
// it cannot grow while latency is high (the runaway of PR #134).
package limitctl

import (
	"math"
	"time"
)

// Params are the controller's settings, from the gate's Config with its
// defaults applied.
type Params struct {
	Min, Max      float64       // the limit's bounds, Min ≥ 1
	Tolerance     float64       // latency above the baseline taken as queueing (0.1: 10%)
	Growth        float64       // growth per round at the baseline, after startup (0.1)
	DropRate      float64       // share of drops in a round that decreases the limit (0.05)
	MinSamples    int64         // samples a round needs for a decision
	MinRound      time.Duration // shortest round
	MaxRound      time.Duration // a round with fewer samples ends here, without a decision
	ProbeInterval time.Duration // time between probe rounds; ≤ 0: none
}

// Settings are a gate's settings as its Config gives them, zero meaning the
// default (see adaptive.Config, which documents them).
type Settings struct {
	Min, Max, Initial                 int64
	Tolerance, DropRate               float64
	MinSamples                        int
	MinRound, MaxRound, ProbeInterval time.Duration
}

// maxLimit bounds Max: semaphore.MaxLimit and distsem.MaxLimit are larger.
const maxLimit = 1 << 40

// Params applies the defaults to s and returns the controller's settings and
// the initial limit. It panics, with a message starting pkg+": ", on a
// programmer error: Min < 1, Max < Min or above 2^40, Initial outside
// [Min, Max], Tolerance or DropRate outside [0, 1], MinSamples, MinRound or
// MaxRound negative, or MaxRound < MinRound.
func (s Settings) Params(pkg string) (Params, float64) {
	if s.Min == 0 {
		s.Min = 1
	}
	if s.Max == 0 {
		s.Max = max(1000, s.Min)
	}
	if s.Initial == 0 {
		s.Initial = s.Min
	}
	if s.Tolerance == 0 {
		s.Tolerance = 0.1
	}
	if s.MinSamples == 0 {
		s.MinSamples = 100
	}
	if s.MinRound == 0 {
		s.MinRound = 100 * time.Millisecond
	}
	if s.MaxRound == 0 {
		s.MaxRound = max(10*time.Second, s.MinRound)
	}
	if s.ProbeInterval == 0 {
		s.ProbeInterval = 10 * time.Second
	}
	if s.DropRate == 0 {
		s.DropRate = 0.05
	}
	switch {
	case s.Min < 1:
		panic(pkg + ": Min < 1")
	case s.Max < s.Min || s.Max > maxLimit:
		panic(pkg + ": Max < Min or above 2^40")
	case s.Initial < s.Min || s.Initial > s.Max:
		panic(pkg + ": Initial outside [Min, Max]")
	case !(s.Tolerance >= 0 && s.Tolerance <= 1):
		panic(pkg + ": Tolerance outside [0, 1]")
	case !(s.DropRate >= 0 && s.DropRate <= 1):
		panic(pkg + ": DropRate outside [0, 1]")
	case s.MinSamples < 0 || s.MinRound < 0 || s.MaxRound < s.MinRound:
		panic(pkg + ": negative MinSamples or MinRound, or MaxRound < MinRound")
	}
	return Params{
		Min: float64(s.Min), Max: float64(s.Max),
		Tolerance: s.Tolerance, Growth: 0.1, DropRate: s.DropRate,
		MinSamples: int64(s.MinSamples), MinRound: s.MinRound, MaxRound: s.MaxRound,
		ProbeInterval: s.ProbeInterval,
	}, float64(s.Initial)
}

// A Round is what one round measured: the holds that began at or after Start
// and were released before End.
type Round struct {
	Start, End  time.Duration // on the gate's clock
	Samples     int64         // holds released normally
	Latency     time.Duration // their summed hold time
	SumSq       float64       // their summed squared hold time, ns²
	Drops       int64         // holds released as dropped or after their deadline
	Full        bool          // the gate was at its limit at some point in the round
	MaxInFlight int64         // the most weight held at once during the round
}

// Point is one past round: the concurrency it ran at, its limit, its mean
// latency in nanoseconds.
type Point struct {
	Base, Limit, Latency float64
}

// histLen is how many past rounds the baseline evidence looks back over.
const histLen = 8

// State is the controller's state. It is plain data: the fleet gate stores it
// in Redis between rounds (as JSON), any process may take the next step.
type State struct {
	Limit     float64        // the limit, between Min and Max; the gate holds floor(Limit)
	Baseline  float64        // the no-queue latency, ns; 0 before the first round
	BaseSE    float64        // the baseline's relative standard error
	Latency   float64        // the last decided round's mean latency, ns
	Startup   bool           // doubling each round until latency first rises
	Probing   bool           // the current round is a probe
	NextProbe time.Duration  // when the next probe round may start
	Need      int64          // samples the open round needs (MinSamples, more when pooled or probing)
	Decided   time.Duration  // when the last round was decided
	Pool      bool           // the last Step kept the round open (see Pooled)
	Hist      [histLen]Point // past rounds, newest first
	NHist     int
}

// Outcome says what a Step did.
type Outcome uint8

// The outcomes of a Step.
const (
	TooFew   Outcome = iota // too few samples: nothing changed
	Hold                    // limit kept
	Increase                // latency at the baseline and the gate full: limit grown
	Decrease                // latency above the baseline or drops: limit cut
	Rebase                  // latency did not follow a fall in concurrency: baseline raised, limit restored
	Probe                   // the next round runs at four fifths of the concurrency, to test the baseline
)

var outcomeNames = [...]string{"too_few", "hold", "increase", "decrease", "rebase", "probe"}

// String returns the outcome as a word.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// New returns the state of a new gate: limit initial (clamped), in startup.
// The first probe may start one ProbeInterval after now.
func New(p Params, initial float64, now time.Duration) State {
	return State{Limit: clamp(p, initial), Startup: true, NextProbe: now + p.ProbeInterval, Need: p.MinSamples, Decided: now}
}

// Cap returns the integral limit the gate enforces: floor(Limit), at least 1.
func (s *State) Cap() int64 { return max(1, int64(s.Limit)) }

// RoundLength is the shortest the current round may be: MinRound, and four
// times the last round's latency (so that most holds begun in the round end
// in it, and every round is measured alike).
func (s *State) RoundLength(p Params) time.Duration {
	lat := s.Latency
	if lat == 0 {
		lat = s.Baseline
	}
	return max(p.MinRound, time.Duration(min(4*lat, float64(p.MaxRound))))
}

// Due reports whether r, still open at now, is to be decided: it lasted
// RoundLength and has the samples it needs (MinSamples; twice as many as at
// its last decision when it is pooled), or MaxRound passed since the last
// decision.
func (s *State) Due(p Params, r Round, now time.Duration) bool {
	if now-max(r.Start, s.Decided) >= p.MaxRound {
		return true
	}
	return now-r.Start >= s.RoundLength(p) && r.Samples+r.Drops >= max(s.Need, p.MinSamples, 1)
}

// Settle is how long after a decision that moved the limit the next round
// starts counting holds: twice the last mean latency, the time the queue at
// the downstream takes to reach what the new limit makes it. Holds begun
// earlier would measure the queue in transition (after an increase, the
// queue still short; after a decrease, the holds of the old limit ahead).
func (s *State) Settle() time.Duration {
	return time.Duration(2 * s.Latency)
}

// Pooled reports whether the last Step kept the round open: the limit did not
// change, and the gate goes on adding to the same round, so that the next
// decision rests on twice the samples (up to 8 × MinSamples).
func (s *State) Pooled() bool { return s.Pool }

// Step decides on the round r, which has ended at r.End (or, pooled, is
// still open), and moves the limit.
func (s *State) Step(p Params, r Round) Outcome {
	o := s.step(p, r)
	s.Decided = r.End
	pooled := s.Pool
	s.Pool = o == Hold && r.Samples < 8*p.MinSamples && r.Samples > 0
	switch {
	case s.Pool:
		s.Need = 2 * r.Samples
	case o == Probe:
		s.Need = 2 * p.MinSamples
	default:
		s.Need = p.MinSamples
	}
	if !s.Pool && pooled && o == TooFew {
		s.Need = p.MinSamples
	}
	return o
}

func (s *State) step(p Params, r Round) Outcome {
	n := r.Samples
	if n+r.Drops < p.MinSamples || n+r.Drops == 0 {
		s.Probing = false
		return TooFew
	}
	limit := float64(s.Cap())
	base := limit // the concurrency the round ran at
	if !r.Full {
		base = min(limit, math.Max(1, float64(r.MaxInFlight)))
	}
	probing := s.Probing
	s.Probing = false

	// Drops and timeouts: the downstream says it is overloaded, whatever the
	// latency of the holds that ended normally.
	if float64(r.Drops) > p.DropRate*float64(n+r.Drops) {
		s.Startup = false
		s.Limit = clamp(p, base*0.75)
		return Decrease
	}
	if n == 0 {
		return TooFew
	}
	w := float64(r.Latency) / float64(n)
	// se: the relative standard error of w, from the round's own spread.
	se := math.Sqrt(math.Max(0, r.SumSq/float64(n)-w*w)/float64(n)) / w
	s.Latency = w
	if s.Baseline == 0 {
		s.Baseline, s.BaseSE = w, se
	}
	// seR: the relative standard error of w / Baseline.
	seR := math.Sqrt(se*se + s.BaseSE*s.BaseSE)
	pt := Point{Base: base, Limit: limit, Latency: w}

	// Evidence about the baseline: the latest past round that ran at a
	// concurrency at least a quarter above this one's.
	if j := s.above(base / 0.81); j >= 0 && !s.Pool {
		prev := s.Hist[j]
		if w >= 0.9*prev.Latency {
			// The latency did not follow the concurrency down: neither
			// round queued. w is a no-queue latency, and the limit of
			// that round did not queue either.
			s.learn(w, se)
			s.NextProbe = r.End + p.ProbeInterval
			s.Limit = clamp(p, math.Max(prev.Limit, s.Limit))
			s.NHist = 0
			s.push(pt)
			return Rebase
		}
	}
	if s.Pool && s.NHist > 0 {
		s.Hist[0] = pt // the same round, decided again on more samples
	} else {
		s.push(pt)
	}
	switch {
	case w < s.Baseline*(1-2.5*seR):
		// Faster beyond the noise of both: the downstream got faster.
		s.Baseline, s.BaseSE = w, se
	case s.Startup && math.Abs(w/s.Baseline-1) < 2*seR:
		// Startup rounds run below the knee: each is a no-queue sample.
		s.learn(w, se)
	}

	ratio := w / s.Baseline
	flat := 1 + p.Tolerance/2 // below it the latency is at the baseline
	if s.Startup {
		// Startup doubles until the latency is up beyond doubt.
		flat = 1 + math.Max(p.Tolerance, 3*seR)
	}
	switch {
	case ratio > 1+math.Max(p.Tolerance, 3*seR):
		// Queueing: concurrency / ratio is the knee; aim just above it. At
		// most halve in one round: a wrong baseline costs one round, and
		// the next round's evidence corrects it.
		s.Startup = false
		s.Limit = clamp(p, math.Max(base*(1+p.Tolerance/2)/ratio, base*0.5))
		if s.Cap() < int64(limit) {
			return Decrease
		}
		s.Limit = limit
		return Hold
	case ratio < flat && r.Full:
		if !probing && !s.Startup && p.ProbeInterval > 0 && r.End >= s.NextProbe {
			s.NextProbe = r.End + p.ProbeInterval
			s.Probing = true
			s.Limit = clamp(p, math.Floor(base*0.8))
			return Probe
		}
		grow := s.Limit * p.Growth * math.Min(1, math.Max(0.2, (flat-ratio)/(p.Tolerance/2)))
		if s.Startup {
			grow = s.Limit
		}
		s.Limit = clamp(p, s.Limit+math.Max(grow, 0.2))
		if s.Cap() > int64(limit) {
			return Increase
		}
		return Hold
	default:
		return Hold
	}
}

// learn takes w, a latency measured without queueing with relative standard
// error se, into the baseline: averaged with it (inverse-variance weights)
// when the two agree within 2.5 standard errors, in its place when they do not
// (the downstream changed). The baseline's error is kept at 1% or more, so
// that it goes on following slow changes.
func (s *State) learn(w, se float64) {
	seR := math.Sqrt(se*se + s.BaseSE*s.BaseSE)
	if s.Baseline == 0 || math.Abs(w/s.Baseline-1) > 2.5*seR {
		s.Baseline, s.BaseSE = w, math.Max(se, 0.01)
		return
	}
	a, b := 1/(s.BaseSE*s.BaseSE+1e-12), 1/(se*se+1e-12)
	s.Baseline = (a*s.Baseline + b*w) / (a + b)
	s.BaseSE = math.Max(1/math.Sqrt(a+b), 0.01)
}

// above returns the index of the newest past round whose concurrency was at
// least floor, or -1.
func (s *State) above(floor float64) int {
	for i := 0; i < s.NHist; i++ {
		if s.Hist[i].Base >= floor {
			return i
		}
	}
	return -1
}

func (s *State) push(pt Point) {
	copy(s.Hist[1:], s.Hist[:histLen-1])
	s.Hist[0] = pt
	s.NHist = min(s.NHist+1, histLen)
}

func clamp(p Params, v float64) float64 {
	return math.Min(p.Max, math.Max(p.Min, v))
}
