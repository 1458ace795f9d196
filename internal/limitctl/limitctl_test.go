package limitctl

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

var params, _ = Settings{}.Params("test")

// settled returns a state past startup at limit, with a baseline of base
// known to within 1%, and the probe far away.
func settled(limit float64, base time.Duration) State {
	s := New(params, limit, 0)
	s.Startup, s.Descent, s.Baseline, s.BaseSE, s.Latency = false, false, float64(base), 0.01, float64(base)
	s.NextProbe, s.Need = time.Hour, params.MinSamples
	return s
}

// round returns a full round of n samples of mean latency mean and
// coefficient of variation cv, ending at end, steady (both halves alike).
func round(n int64, mean time.Duration, cv float64, end time.Duration) Round {
	m := float64(mean)
	sq := float64(n) * (m*m + cv*cv*m*m)
	half := n / 2
	return Round{
		Start: end - time.Second, End: end, Cut: end, Started: n, Done: n, Full: true,
		Samples: n, Latency: time.Duration(n) * mean, SumSq: sq,
		Late: Sums{Samples: half, Latency: time.Duration(half) * mean, SumSq: sq * float64(half) / float64(n)},
	}
}

func TestQueueingLandsOnTheKnee(t *testing.T) {
	// At 40 with latency twice the baseline, the knee is 20: the limit goes
	// just above it (Tolerance/2) in one round.
	s := settled(40, 10*time.Millisecond)
	if o := s.Step(params, round(400, 20*time.Millisecond, 0.5, time.Second)); o != Decrease {
		t.Fatalf("outcome %v, want decrease", o)
	}
	if got, want := s.Limit, 40*1.05/2; math.Abs(got-want) > 0.01 {
		t.Fatalf("limit %.2f, want %.2f", got, want)
	}
	// Ten times the baseline: at most halved in one round.
	s = settled(40, 10*time.Millisecond)
	s.Step(params, round(400, 100*time.Millisecond, 0.5, time.Second))
	if s.Limit != 20 {
		t.Fatalf("limit %.2f after a tenfold latency, want 20 (halved)", s.Limit)
	}
}

func TestNoGrowthWhileLatencyIsHigh(t *testing.T) {
	// Netflix concurrency-limits PR #134: latency held at 1.08× the baseline
	// (a gradient near 0.9) must never grow the limit, however long.
	s := settled(20, 10*time.Millisecond)
	for i := range 2000 {
		o := s.Step(params, round(200, 10800*time.Microsecond, 0.5, time.Duration(i+1)*time.Second))
		if o == Increase || s.Limit > 20 {
			t.Fatalf("round %d: %v to %.2f with latency 8%% above the baseline", i, o, s.Limit)
		}
	}
	if s.Baseline != float64(10*time.Millisecond) {
		t.Fatalf("baseline drifted to %v", time.Duration(s.Baseline))
	}
}

func TestNoGrowthWhenNotFull(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	r := round(200, 10*time.Millisecond, 0.5, time.Second)
	r.Full, r.MaxInFlight = false, 8
	if o := s.Step(params, r); o == Increase || s.Limit > 20 {
		t.Fatalf("%v to %.2f on a round that never filled the gate", o, s.Limit)
	}
}

func TestGrowthRampsWhileBelowTheBaseline(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	var steps []float64
	for i := range 5 {
		before := s.Limit
		if o := s.Step(params, round(200, 9500*time.Microsecond, 0.3, time.Duration(i+1)*time.Second)); o != Increase {
			t.Fatalf("round %d: %v, want increase", i, o)
		}
		steps = append(steps, s.Limit/before-1)
	}
	for i := 1; i < len(steps); i++ {
		if steps[i] < 1.9*steps[i-1] && steps[i] < 0.99 {
			t.Fatalf("growth steps %.3f: each should double", steps)
		}
	}
}

func TestLatencyStepRebasesAndRestores(t *testing.T) {
	// The downstream got four times slower at 40: the first round reads as
	// queueing and halves the limit; at 20 the latency does not fall, so
	// it was not queueing: the baseline moves to it and the limit returns.
	s := settled(40, 10*time.Millisecond)
	if o := s.Step(params, round(200, 40*time.Millisecond, 0.5, 1*time.Second)); o != Decrease || s.Cap() != 20 {
		t.Fatalf("%v to %d, want a decrease to 20", o, s.Cap())
	}
	if o := s.Step(params, round(200, 40*time.Millisecond, 0.5, 2*time.Second)); o != Rebase {
		t.Fatalf("%v, want rebase", o)
	}
	if math.Abs(s.Baseline/float64(40*time.Millisecond)-1) > 0.01 || s.Limit != 40 {
		t.Fatalf("baseline %v limit %.1f, want 40ms and 40", time.Duration(s.Baseline), s.Limit)
	}
}

func TestQueueingNeverRaisesTheBaseline(t *testing.T) {
	// Envoy PR #11579's drift: with the capacity halved, latency follows
	// the concurrency down as the limit falls; every reading is queueing,
	// none may become the baseline.
	s := settled(40, 10*time.Millisecond)
	knee := 20.0
	for i := range 50 {
		lat := time.Duration(float64(10*time.Millisecond) * math.Max(1, float64(s.Cap())/knee))
		s.Step(params, round(200, lat, 0.5, time.Duration(i+1)*time.Second))
		if s.Baseline > float64(10*time.Millisecond)*1.03 {
			t.Fatalf("round %d: baseline rose to %v under queueing", i, time.Duration(s.Baseline))
		}
	}
	if c := s.Cap(); c < 20 || c > 23 {
		t.Fatalf("limit %d, want near the knee 20", c)
	}
}

func TestOneFastRoundDoesNotLowerTheBaseline(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	s.Step(params, round(200, 5*time.Millisecond, 0.5, time.Second))
	if s.Baseline != float64(10*time.Millisecond) {
		t.Fatalf("baseline %v after one fast round", time.Duration(s.Baseline))
	}
	s.Step(params, round(200, 5*time.Millisecond, 0.5, 2*time.Second))
	if math.Abs(s.Baseline/float64(5*time.Millisecond)-1) > 0.01 {
		t.Fatalf("baseline %v after two fast rounds, want 5ms", time.Duration(s.Baseline))
	}
}

// straddling returns a round of 200 samples whose first ones (all but late)
// were at 10ms and whose last late ones at 40ms: the downstream changed
// within it.
func straddling(late int64) Round {
	r := round(200, 0, 0.3, time.Second)
	early := 200 - late
	r.Late = Sums{Samples: late, Latency: time.Duration(late) * 40 * time.Millisecond, SumSq: float64(late) * 1.09 * 40e6 * 40e6}
	r.Latency = r.Late.Latency + time.Duration(early)*10*time.Millisecond
	r.SumSq = r.Late.SumSq + float64(early)*1.09*10e6*10e6
	return r
}

func TestUnsteadyRoundIsDiscarded(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	before := s
	if o := s.Step(params, straddling(30)); o != Unsteady {
		t.Fatalf("%v, want unsteady", o)
	}
	if s.Limit != before.Limit || s.Baseline != before.Baseline {
		t.Fatalf("an unsteady round moved the limit to %.1f, the baseline to %v", s.Limit, time.Duration(s.Baseline))
	}
	// With enough of the later half, the round is decided on it alone: 40ms
	// is four times the baseline, a decrease to half.
	if o := s.Step(params, straddling(100)); o != Decrease || s.Limit != 10 {
		t.Fatalf("%v to %.1f, want a decrease to 10 on the later half", o, s.Limit)
	}
}

func TestDropsCutByAQuarter(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	r := round(180, 10*time.Millisecond, 0.5, time.Second)
	r.Drops = 20
	if o := s.Step(params, r); o != Decrease || s.Limit != 15 {
		t.Fatalf("%v to %.1f, want a decrease to 15", o, s.Limit)
	}
}

func TestTooFewChangesNothing(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	before := s
	r := round(10, 50*time.Millisecond, 0.5, time.Second)
	r.Start = r.End - 100*time.Millisecond
	if o := s.Step(params, r); o != TooFew || s.Limit != before.Limit || s.Baseline != before.Baseline {
		t.Fatalf("%v, limit %.1f: a round of 10 samples decided", o, s.Limit)
	}
}

func TestProbeChecksTheBaseline(t *testing.T) {
	s := settled(20, 10*time.Millisecond)
	s.NextProbe = 0
	if o := s.Step(params, round(200, 10*time.Millisecond, 0.5, time.Second)); o != Probe || s.Cap() != 17 {
		t.Fatalf("%v to %d, want a probe at 17", o, s.Cap())
	}
	// At 17 the latency is the same: no queue at 20 either; back to 20.
	if o := s.Step(params, round(400, 10*time.Millisecond, 0.5, 2*time.Second)); o != Rebase || s.Cap() != 20 {
		t.Fatalf("%v to %d, want a rebase back to 20", o, s.Cap())
	}
	if s.NextProbe != 2*time.Second+params.ProbeInterval {
		t.Fatalf("next probe at %v", s.NextProbe)
	}
}

func TestStartupDoublesThenSettles(t *testing.T) {
	s := New(params, 1, 0)
	knee, base := 20.0, 10*time.Millisecond
	for i := range 30 {
		lat := time.Duration(float64(base) * math.Max(1, float64(s.Cap())/knee))
		r := round(s.Need, lat, 0.5, time.Duration(i+1)*time.Second)
		s.Step(params, r)
	}
	if c := s.Cap(); c < 20 || c > 23 {
		t.Fatalf("limit %d after startup, want near the knee 20", c)
	}
}

func TestStartAboveTheKneeDescends(t *testing.T) {
	// Initial 60 on a knee of 20: the first round queues (30ms for a 10ms
	// baseline); a baseline taken from it would keep the limit up.
	for _, initial := range []float64{60, 15} {
		s := New(params, initial, 0)
		knee, base := 20.0, 10*time.Millisecond
		for i := range 12 {
			lat := time.Duration(float64(base) * math.Max(1, float64(s.Cap())/knee))
			s.Step(params, round(s.Need, lat, 0.3, time.Duration(i+1)*time.Second))
		}
		if c := s.Cap(); c < 20 || c > 23 || math.Abs(s.Baseline/float64(base)-1) > 0.05 {
			t.Fatalf("initial %v: limit %d, baseline %v after 12 rounds, want near 20 and 10ms", initial, c, time.Duration(s.Baseline))
		}
	}
}

func TestSettingsPanics(t *testing.T) {
	for _, tc := range []Settings{
		{Min: -1}, {Min: 5, Max: 4}, {Max: 1 << 41}, {Min: 2, Initial: 1}, {Initial: 2000},
		{Tolerance: 2}, {Tolerance: math.NaN()}, {DropRate: -1}, {MinSamples: -1},
		{MinRound: -1}, {MinRound: time.Minute, MaxRound: time.Second},
	} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.HasPrefix(msg, "pkg: ") {
					t.Errorf("%+v: panic %v, want one starting \"pkg: \"", tc, r)
				}
			}()
			tc.Params("pkg")
		}()
	}
	p, initial := Settings{}.Params("pkg")
	if p.Min != 1 || p.Max != 1000 || initial != 1 || p.MinSamples != 200 || p.Tolerance != 0.1 {
		t.Fatalf("defaults %+v, initial %v", p, initial)
	}
}

func TestAtMinTheLatencyIsTheBaseline(t *testing.T) {
	// One at a time there is no queue of ours: a slower round is the
	// downstream's latency now (PostgreSQL on a busy machine).
	s := settled(1, 10*time.Millisecond)
	if o := s.Step(params, round(200, 14*time.Millisecond, 0.3, time.Second)); o != Rebase || s.Baseline != float64(14*time.Millisecond) {
		t.Fatalf("%v, baseline %v; want a rebase to 14ms", o, time.Duration(s.Baseline))
	}
}

func TestARunOfSmallDecreasesCorrectsALowBaseline(t *testing.T) {
	// The baseline is 10ms but the downstream's no-queue latency is 11.5ms:
	// each round reads 15% up and cuts by 9%, none by a fifth; once the run
	// has fallen by a fifth with the latency flat, the baseline moves.
	s := settled(20, 10*time.Millisecond)
	var o Outcome
	for i := range 10 {
		if o = s.Step(params, round(200, 11500*time.Microsecond, 0.3, time.Duration(i+1)*time.Second)); o == Rebase {
			break
		}
	}
	if o != Rebase || math.Abs(s.Baseline/float64(11500*time.Microsecond)-1) > 0.02 || s.Limit < 20 {
		t.Fatalf("%v, baseline %v, limit %.1f; want a rebase to 11.5ms back at 20", o, time.Duration(s.Baseline), s.Limit)
	}
}

func TestLatencyRisingBetweenRoundsIsNoEvidence(t *testing.T) {
	s := settled(40, 10*time.Millisecond)
	s.Step(params, round(200, 20*time.Millisecond, 0.3, time.Second)) // queueing: to 21
	if o := s.Step(params, round(200, 40*time.Millisecond, 0.3, 2*time.Second)); o == Rebase {
		t.Fatalf("rebase on a round slower than the one before: a stall or a change between them is no evidence")
	}
}

func TestHow(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	stopped, stop := context.WithCancel(context.Background())
	stop()
	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	for _, tc := range []struct {
		name              string
		ctx               context.Context
		timedOut, stopped bool
	}{
		{"deadline passed", past, true, false},
		{"cancelled", stopped, false, true},
		{"deadline ahead", far, false, false},
		{"none", context.Background(), false, false},
		{"nil", nil, false, false},
	} {
		if to, c := How(tc.ctx); to != tc.timedOut || c != tc.stopped {
			t.Errorf("%s: How = %v, %v; want %v, %v", tc.name, to, c, tc.timedOut, tc.stopped)
		}
	}
}
