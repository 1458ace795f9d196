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
// limitctl learns the baseline only from rounds known not to queue: startup
// rounds, and rounds after the concurrency fell by a tenth or more (a
// decrease, or a probe) in which the latency fell by less than half as much.
// It raises it (a latency step) only when, after a fall of a fifth or more,
// the latency barely moved (by less than a quarter of the fall) at a level the
// baseline cannot explain; it lowers it on two rounds in a row faster beyond
// doubt. Every threshold widens with the round's measured standard error, so
// noise moves nothing. A round counts the holds that began in it (the gates
// tag each with its start), from a settling time after the limit moved, and
// is decided once they have all ended: holds queued under a higher limit
// before a decrease do not skew it (the cause of PR #11579), nor do long
// holds cut off by the round's end. The limit grows only while the latency is
// within Tolerance/2 of the baseline and the gate was full, so it cannot grow
// while latency is high (the runaway of PR #134).
package limitctl

import (
	"context"
	"errors"
	"math"
	"time"
)

// Params are the controller's settings, from the gate's Config with its
// defaults applied.
type Params struct {
	Min, Max      float64       // the limit's bounds, Min ≥ 1
	Tolerance     float64       // latency above the baseline taken as queueing (0.1: 10%)
	Growth        float64       // growth of a first increase after startup (0.05); it doubles with each one in a row
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
		s.MinSamples = 200
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
		Tolerance: s.Tolerance, Growth: 0.05, DropRate: s.DropRate,
		MinSamples: int64(s.MinSamples), MinRound: s.MinRound, MaxRound: s.MaxRound,
		ProbeInterval: s.ProbeInterval,
	}, float64(s.Initial)
}

// A Round is what one round measured: the holds that began at or after Start
// and before Cut. A round counts the holds that begin in it until Cut says it
// has enough, then waits for all of them to end before it is decided, so that
// long holds weigh as much as short ones (a round decided on whatever had
// ended by a given time would see mostly the short ones).
type Round struct {
	Start, End  time.Duration // on the gate's clock
	Cut         time.Duration // when the round stopped counting new holds; 0 while it counts
	Started     int64         // holds begun in [Start, Cut)
	Done        int64         // of those, holds ended (samples, drops and cancelled ones)
	Mid         time.Duration // samples of holds begun from Mid on count in Late too
	Late        Sums          // the samples begun from Mid on (see Unsteady)
	Samples     int64         // holds released normally
	Latency     time.Duration // their summed hold time
	SumSq       float64       // their summed squared hold time, ns²
	Drops       int64         // holds released as dropped or after their deadline
	Full        bool          // the gate was at its limit at some point in the round
	MaxInFlight int64         // the most weight held at once during the round
}

// Sums are the totals of some samples.
type Sums struct {
	Samples int64
	Latency time.Duration
	SumSq   float64
}

// Sample adds the sample of a hold begun at start that lasted lat.
func (r *Round) Sample(start, lat time.Duration) {
	r.Samples++
	r.Latency += lat
	r.SumSq += float64(lat) * float64(lat)
	if start >= r.Mid {
		r.Late.Samples++
		r.Late.Latency += lat
		r.Late.SumSq += float64(lat) * float64(lat)
	}
}

// NewRound returns the round that starts at start (the gate adds Settle
// after a change of the limit), with inFlight held.
func (s *State) NewRound(p Params, start time.Duration, inFlight int64) Round {
	return Round{Start: start, Mid: start + s.RoundLength(p)/2, MaxInFlight: inFlight}
}

// Continue returns r, pooled by the last Step at now, counting on: uncut,
// its halves measured afresh from now.
func (s *State) Continue(p Params, r Round, now time.Duration) Round {
	r.Cut, r.Late, r.Mid = 0, Sums{}, now+s.RoundLength(p)/2
	return r
}

// Point is one past round: the concurrency it ran at, its limit, its mean
// latency in nanoseconds.
type Point struct {
	Base, Limit, Latency float64
	SE                   float64 // the latency's relative standard error
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
	Descent   bool           // halving each round while latency falls with it (a start above the knee)
	Probing   bool           // the current round is a probe
	NextProbe time.Duration  // when the next probe round may start
	Need      int64          // samples the open round needs (MinSamples, more when pooled or probing)
	Decided   time.Duration  // when the last round was decided
	Pool      bool           // the last Step kept the round open (see Pooled)
	Seen      Sums           // a pooled round's totals at its last decision
	Faster    bool           // the last round was faster than the baseline beyond doubt
	Ramp      int            // increases in a row, less one
	Run       Point          // the round a run of decreases started from (Base 0: none)
	AtMin     int            // rounds in a row with latency up and the limit at Min
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
	Probe                   // the next round runs at 85% of the concurrency, to test the baseline
	Unsteady                // the round's two halves disagree (the downstream changed within it), too few in the later one: discarded
)

var outcomeNames = [...]string{"too_few", "hold", "increase", "decrease", "rebase", "probe", "unsteady"}

// Counts counts the rounds decided, by outcome (adaptive.RoundCounts).
type Counts struct {
	Rounds, Increases, Decreases, Rebases, Probes uint64
}

// Add counts o; a TooFew round was not decided and does not count.
func (c *Counts) Add(o Outcome) {
	if o == TooFew {
		return
	}
	c.Rounds++
	switch o {
	case Increase:
		c.Increases++
	case Decrease:
		c.Decreases++
	case Rebase:
		c.Rebases++
	case Probe:
		c.Probes++
	}
}

// String returns the outcome as a word.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// New returns the state of a new gate: limit initial (clamped), in startup.
// The first probe may start one ProbeInterval after now.
//
// A gate that starts above Min first checks that it does not start above the
// knee, where the first round's latency, queued, would make a wrong
// baseline: its second round runs at half the limit, and it goes on halving
// while the latency falls with the concurrency; once it does not, the
// baseline is that latency and startup goes on from the last limit that did
// not queue.
func New(p Params, initial float64, now time.Duration) State {
	l := clamp(p, initial)
	return State{Limit: l, Startup: true, Descent: l > p.Min, NextProbe: now + p.ProbeInterval, Need: max(1, p.MinSamples/4), Decided: now}
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

// CutNow reports whether r, counting at now, has enough holds: it lasted
// RoundLength and Started the holds it needs (MinSamples; twice as many as at
// its last decision when it is pooled), or MaxRound passed since the last
// decision. The gate then sets r.Cut to now.
func (s *State) CutNow(p Params, r Round, now time.Duration) bool {
	if r.Cut != 0 || now < r.Start {
		return false
	}
	if now-max(r.Start, s.Decided) >= p.MaxRound {
		return true
	}
	return now-r.Start >= s.RoundLength(p) && r.Started >= max(s.Need, 1)
}

// Due reports whether r, cut, is to be decided: every hold it counted has
// ended, or MaxRound passed since the cut (holds still out are left out).
func (s *State) Due(p Params, r Round, now time.Duration) bool {
	return r.Cut != 0 && (r.Done >= r.Started || now-r.Cut >= p.MaxRound)
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
	if o != Increase && o != TooFew {
		s.Ramp = 0
	}
	if o != Decrease && o != TooFew && o != Unsteady {
		s.Run = Point{} // a run of decreases ends
	}
	if o != Hold && o != TooFew {
		s.AtMin = 0
	}
	s.Decided = r.End
	s.Pool = o == Hold && r.Samples < 8*p.MinSamples && r.Samples > 0
	if o == Unsteady {
		s.Probing = false
	}
	s.Seen = Sums{}
	switch {
	case s.Pool:
		s.Need = r.Started + p.MinSamples
		s.Seen = Sums{Samples: r.Samples, Latency: r.Latency, SumSq: r.SumSq}
	case o == Probe && s.Limit >= 10:
		s.Need = 2 * p.MinSamples
	case s.Startup:
		// Startup looks for a latency rise of a doubling: a quarter of
		// the samples see it.
		s.Need = max(1, p.MinSamples/4)
	default:
		s.Need = p.MinSamples
	}
	return o
}

func (s *State) step(p Params, r Round) Outcome {
	n := r.Samples
	// A round decides on MinSamples; one cut at MaxRound (a slow or quiet
	// downstream) on what it has, if that is at least a tenth of it: its
	// noise is measured, and the thresholds widen with it.
	enough := min(p.MinSamples, max(s.Need, 1))
	if r.End-max(r.Start, s.Decided) >= p.MaxRound {
		enough = max(5, p.MinSamples/10)
	}
	if n+r.Drops < enough || n+r.Drops == 0 {
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
	// A round whose later half disagrees with its earlier one beyond three
	// standard errors straddles a change of the downstream: a mean of the
	// two worlds would mislead every rule below (a baseline learnt from it
	// would be wrong in both). Only the samples since the last decision
	// count: a pooled round's older ones were steady when decided on.
	early := Sums{r.Samples - s.Seen.Samples - r.Late.Samples, r.Latency - s.Seen.Latency - r.Late.Latency, r.SumSq - s.Seen.SumSq - r.Late.SumSq}
	if early.Samples >= 20 && r.Late.Samples >= 20 {
		we, see := mean(early.Samples, early.Latency, early.SumSq)
		wl, sel := mean(r.Late.Samples, r.Late.Latency, r.Late.SumSq)
		if math.Abs(wl/we-1) > 3*math.Sqrt(see*see+sel*sel) {
			if r.Late.Samples < max(10, p.MinSamples/4) {
				return Unsteady
			}
			// Enough of the later half to decide on: the downstream as
			// it is now.
			r.Samples, r.Latency, r.SumSq, r.Late, s.Seen = r.Late.Samples, r.Late.Latency, r.Late.SumSq, Sums{}, Sums{}
			n = r.Samples
		}
	}
	w, se := mean(n, r.Latency, r.SumSq)
	if s.Baseline == 0 {
		s.Baseline, s.BaseSE = w, se
	}
	// seR: the relative standard error of w / Baseline.
	seR := math.Sqrt(se*se + s.BaseSE*s.BaseSE)
	if f := r.Samples - s.Seen.Samples; s.Pool && f >= p.MinSamples {
		// A pooled round: the samples since its last decision alone say
		// more when the downstream has just changed (a step within the
		// pool); decide on them when they are beyond doubt.
		wf, sef := mean(f, r.Latency-s.Seen.Latency, r.SumSq-s.Seen.SumSq)
		seRf := math.Sqrt(sef*sef + s.BaseSE*s.BaseSE)
		if d := math.Max(p.Tolerance, 3*seRf); wf > s.Baseline*(1+d) || wf < s.Baseline*(1-d) {
			w, se, seR = wf, sef, seRf
		}
	}
	s.Latency = w
	pt := Point{Base: base, Limit: limit, Latency: w, SE: se}

	if s.Descent {
		return s.descend(p, pt)
	}
	if s.evidence(p, pt, r.End) {
		return Rebase
	}
	if s.Pool && s.NHist > 0 {
		s.Hist[0] = pt // the same round, decided again on more samples
	} else {
		s.push(pt)
	}
	switch {
	case w < s.Baseline*(1-math.Max(p.Tolerance, 3*seR)):
		// Faster beyond Tolerance and the noise of both, twice running:
		// the downstream got faster. (One round that fast is noise now and
		// then; a baseline lowered on it would ratchet down.)
		if s.Faster {
			s.Baseline, s.BaseSE = w, se
		}
		s.Faster = !s.Faster
	case s.Startup && math.Abs(w/s.Baseline-1) < 2*seR:
		// Startup rounds run below the knee: each is a no-queue sample.
		s.learn(w, se)
		s.Faster = false
	default:
		s.Faster = false
	}

	ratio := w / s.Baseline
	flat := 1 + p.Tolerance/2 // below it the latency is at the baseline
	if s.Startup {
		// Startup doubles until the latency is up beyond doubt.
		flat = 1 + math.Max(p.Tolerance, 3*seR)
	}
	up := ratio > 1+math.Max(p.Tolerance, 3*seR)
	switch {
	case up && base <= p.Min:
		// Latency above the baseline with nothing left to cut: at the
		// lowest concurrency there is no queue of ours to drain, so three
		// such rounds in a row are the downstream's own latency now.
		if s.AtMin++; s.AtMin >= 3 || base <= 1 {
			s.Baseline, s.BaseSE, s.AtMin = w, math.Max(se, 0.01), 0
			return Rebase
		}
		return Hold
	case up:
		// Queueing: concurrency / ratio is the knee; aim just above it. At
		// most halve in one round: a wrong baseline costs one round, and
		// the next round's evidence corrects it.
		s.Startup = false
		s.Limit = clamp(p, math.Max(base*(1+p.Tolerance/2)/ratio, base*0.5))
		if s.Cap() < int64(limit) {
			if s.Run.Base == 0 {
				s.Run = pt // a run of decreases starts from this round
			}
			return Decrease
		}
		s.Limit = limit
		return Hold
	case !probing && !s.Startup && r.Full && base >= 3 && p.ProbeInterval > 0 && r.End >= s.NextProbe:
		// A probe round, whenever the latency is not up: at the baseline
		// it confirms it; a little above (where the limit only holds) it
		// shows whether that is a queue or a baseline that was low.
		s.NextProbe = r.End + p.ProbeInterval
		s.Probing = true
		s.Limit = clamp(p, math.Min(base-1, math.Round(base*0.85)))
		return Probe
	case ratio < flat && r.Full:
		// Growth doubles with each increase in a row while the latency is
		// below the baseline (Growth, 2×, 4×, … up to doubling the limit):
		// one increase on a noisy round moves the limit little, a
		// downstream that has grown is found in a few rounds.
		g := p.Growth
		if ratio < 1 {
			g = math.Min(1, p.Growth*math.Exp2(float64(s.Ramp)))
		}
		grow := s.Limit * g * math.Min(1, math.Max(0.2, (flat-ratio)/(p.Tolerance/2)))
		if s.Startup {
			grow = s.Limit
		}
		s.Limit = clamp(p, s.Limit+math.Max(grow, 0.2))
		if s.Cap() > int64(limit) {
			s.Ramp++
			return Increase
		}
		return Hold
	default:
		return Hold
	}
}

// evidence looks for evidence about the baseline in pt beside a round that
// ran at a concurrency at least a tenth above it: the round before (a
// decrease, or pt is a probe), or the round a run of decreases started from.
// Had that round queued, the latency would have fallen in proportion. It
// reports whether it found some (and acted on it).
func (s *State) evidence(p Params, pt Point, now time.Duration) bool {
	if s.Pool {
		return false
	}
	ok := s.NHist > 0 && s.evidenceFrom(p, s.Hist[0], pt)
	if !ok && s.Run.Base > 0 && s.Run != s.Hist[0] {
		ok = s.evidenceFrom(p, s.Run, pt)
	}
	if !ok {
		return false
	}
	s.Limit = clamp(p, s.Limit)
	s.NextProbe = now + p.ProbeInterval
	s.NHist, s.Run = 0, Point{}
	s.push(pt)
	return true
}

func (s *State) evidenceFrom(p Params, ref, pt Point) bool {
	if pt.Base > 0.9*ref.Base {
		return false
	}
	fall, follow := 1-pt.Base/ref.Base, 1-pt.Latency/ref.Latency
	a, b := 1/(ref.SE*ref.SE+1e-12), 1/(pt.SE*pt.SE+1e-12)
	both, bothSE := (a*ref.Latency+b*pt.Latency)/(a+b), 1/math.Sqrt(a+b)
	agrees := math.Abs(both/s.Baseline-1) <= 2.5*math.Sqrt(bothSE*bothSE+s.BaseSE*s.BaseSE)
	switch {
	case follow < 0 && -follow > 2.5*math.Sqrt(ref.SE*ref.SE+pt.SE*pt.SE):
		// The latency rose between the two rounds beyond their noise: the
		// downstream changed between them (or one round met a stall); the
		// next round will tell.
		return false
	case fall >= 0.2 && follow <= fall/4 && !agrees:
		// The concurrency fell by a fifth or more and the latency barely
		// moved, at a level the baseline cannot explain: the downstream
		// changed (a latency step), or the baseline was wrong. Both rounds
		// are its no-queue latency. Go back to the highest limit of the
		// recent rounds: if it queues, the next round's decrease lands on
		// the knee at once, where growth from too low a limit would take
		// many rounds.
		s.Baseline, s.BaseSE = both, math.Max(bothSE, 0.01)
		s.Limit = math.Max(s.Limit, ref.Limit)
		for i := range s.NHist {
			s.Limit = math.Max(s.Limit, s.Hist[i].Limit)
		}
	case follow <= fall/2 && agrees:
		// The latency fell by less than half the concurrency's fall, at
		// the baseline: neither round queued; both sharpen it, and the
		// limit of the other round did not queue either.
		s.learn(both, bothSE)
		s.Limit = math.Max(ref.Limit, s.Limit)
	default:
		return false
	}
	return true
}

// descend takes the rounds of a start above Min (see New): the first one's
// latency is the baseline for now, and the limit halves while the latency
// falls with it.
func (s *State) descend(p Params, pt Point) Outcome {
	prev := s.Hist[0]
	if s.NHist > 0 && prev.Base > pt.Base {
		if fall, follow := 1-pt.Base/prev.Base, 1-pt.Latency/prev.Latency; follow <= fall/2 {
			// Neither round queued: both are the baseline, and startup
			// goes on from the round before.
			a, b := 1/(prev.SE*prev.SE+1e-12), 1/(pt.SE*pt.SE+1e-12)
			s.Baseline, s.BaseSE = (a*prev.Latency+b*pt.Latency)/(a+b), math.Max(1/math.Sqrt(a+b), 0.01)
			s.Descent, s.Limit = false, prev.Limit
			s.push(pt)
			return Rebase
		}
	}
	// The first round, or the latency fell with the concurrency (the round
	// before queued): this one is the baseline until shown otherwise.
	s.Baseline, s.BaseSE = pt.Latency, math.Max(pt.SE, 0.01)
	s.push(pt)
	if pt.Base <= p.Min {
		s.Descent = false
		return Hold
	}
	s.Limit = clamp(p, math.Floor(pt.Base/2))
	return Decrease
}

// mean returns the mean of n latencies of sum sum and sum of squares sq, and
// its relative standard error.
func mean(n int64, sum time.Duration, sq float64) (w, se float64) {
	w = float64(sum) / float64(n)
	return w, math.Sqrt(math.Max(0, sq/float64(n)-w*w)/float64(n)) / w
}

// learn takes w, a no-queue latency with relative standard error se that
// agrees with the baseline, into it (inverse-variance weights). The
// baseline's error is kept at 1% or more, so that it goes on following slow
// changes.
func (s *State) learn(w, se float64) {
	a, b := 1/(s.BaseSE*s.BaseSE+1e-12), 1/(se*se+1e-12)
	s.Baseline = (a*s.Baseline + b*w) / (a + b)
	s.BaseSE = math.Max(1/math.Sqrt(a+b), 0.01)
}

func (s *State) push(pt Point) {
	copy(s.Hist[1:], s.Hist[:histLen-1])
	s.Hist[0] = pt
	s.NHist = min(s.NHist+1, histLen)
}

func clamp(p Params, v float64) float64 {
	return math.Min(p.Max, math.Max(p.Min, v))
}

// How says how a hold whose work ran under ctx ended, at its release: past
// its context's deadline (a timeout: a drop), cancelled by its caller (cut
// short: neither a sample nor a drop), or normally (a sample). The deadline
// is read from ctx itself rather than from ctx.Err, so that a context
// derived from the one whose deadline passed (a gate's own, or a
// consumer's) reads as timed out even before the cancellation has reached it.
func How(ctx context.Context) (timedOut, canceled bool) {
	if ctx == nil {
		return false, false
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return true, false
	}
	err := ctx.Err()
	return errors.Is(err, context.DeadlineExceeded), err != nil
}
