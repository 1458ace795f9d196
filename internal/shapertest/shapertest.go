// Package shapertest holds the property checks that shaper's in-process meters
// and shaperredis's scripts must both pass: exact RetryAfter over random
// histories with limit changes and out-of-order times, a lowered limit, no
// forgiveness for out-of-order calls, and zero-cost peeks that record nothing.
//
// Each check takes a [Subject], one meter that can replay a history from
// scratch; shaper's tests pass the local meters and shaperredis's tests the
// Redis ones, fed the same times through the test assembly of the scripts with a pinned
// clock. The
// package imports shaper, so only shaper's external tests (package
// shaper_test) can use it.
package shapertest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/rateconv"
	"github.com/floodgate-go/floodgate/shaper"
)

// Algo names a metering algorithm.
type Algo uint8

const (
	GCRA Algo = iota
	TokenBucket
	FixedWindow
	SlidingLog
	SlidingCounter
)

// Algos lists every Algo.
var Algos = []Algo{GCRA, TokenBucket, FixedWindow, SlidingLog, SlidingCounter}

var algoNames = [...]string{"gcra", "tokenbucket", "fixedwindow", "slidinglog", "slidingcounter"}

func (a Algo) String() string { return algoNames[a] }

// Window reports whether a is a window algorithm, whose limit has no burst
// beyond its count.
func (a Algo) Window() bool { return a >= FixedWindow }

// T0 is a fixed start time in µs, on the hour.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// Call asks a meter under test for n at time at (µs since the epoch).
type Call func(at, n int64) (shaper.Decision, error)

// A Subject is one meter under test, local or Redis, that can replay a history
// from scratch: Fresh returns a new, empty meter with limit lim, as the function
// that calls it and the function that changes its limit.
type Subject struct {
	Name  string
	Algo  Algo
	Fresh func(t *testing.T, lim shaper.Limit) (call Call, set func(shaper.Limit))
}

// An Op is one step of a history: a limit change (Set) or a call.
type Op struct {
	Set bool
	Lim shaper.Limit
	At  int64 // µs
	N   int64
}

// RandomLimit returns a limit valid for a: periods from 1ms to 10s, counts
// from 1 to 50, bursts from 1 to 20 where the algorithm has one.
func RandomLimit(r *rand.Rand, a Algo) shaper.Limit {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond,
		time.Second, 3 * time.Second, 10 * time.Second, 1234567 * time.Microsecond}
	lim := shaper.Limit{Rate: shaper.Rate{Count: 1 + r.Int64N(50), Period: periods[r.IntN(len(periods))]}}
	if !a.Window() {
		lim.Burst = 1 + r.Int64N(20)
	}
	return lim
}

// BurstOf returns lim's burst, or its count if the burst is zero.
func BurstOf(lim shaper.Limit) int64 { return rateconv.Burst(lim.Rate.Count, lim.Burst) }

// RandomStep returns the next time (µs) and cost of a random sequence: mostly
// short steps around the emission interval, sometimes none, sometimes a long
// idle spell, sometimes a step back in time. Costs run from 0 to maxN.
func RandomStep(r *rand.Rand, now int64, lim shaper.Limit, maxN int64) (int64, int64) {
	p := int64(lim.Rate.Period / time.Microsecond)
	t := max(1, p/lim.Rate.Count)
	switch x := r.IntN(100); {
	case x < 25:
	case x < 70:
		now += r.Int64N(2*t + 1)
	case x < 85:
		now += r.Int64N(3*p + 1)
	case x < 95:
		now += r.Int64N(20 * t)
	default:
		now -= r.Int64N(2*t + 1)
	}
	n := int64(1)
	switch x := r.IntN(10); {
	case x < 1:
		n = 0
	case x < 3:
		n = r.Int64N(maxN + 1)
	}
	return now, n
}

// RandomHistory returns a random history for a: calls mostly forward in time,
// sometimes back (up to several periods), zero costs, and limit changes.
func RandomHistory(r *rand.Rand, a Algo, lim shaper.Limit, steps int) []Op {
	var hist []Op
	now := int64(1_700_000_000_000_000) + r.Int64N(1e12)
	for range steps {
		if r.IntN(12) == 0 {
			lim = RandomLimit(r, a)
			hist = append(hist, Op{Set: true, Lim: lim})
			continue
		}
		var n int64
		now, n = RandomStep(r, now, lim, BurstOf(lim))
		if r.IntN(10) == 0 { // a larger step back
			now -= r.Int64N(3*int64(lim.Rate.Period/time.Microsecond) + 1)
		}
		hist = append(hist, Op{At: now, N: n})
	}
	return hist
}

// Replay runs hist on a fresh meter of s and returns the last decision.
func Replay(t *testing.T, s Subject, lim shaper.Limit, hist []Op) (shaper.Decision, error) {
	call, set := s.Fresh(t, lim)
	var d shaper.Decision
	var err error
	for _, o := range hist {
		if o.Set {
			set(o.Lim)
			continue
		}
		d, err = call(o.At, o.N)
	}
	return d, err
}

// CheckExact replays seqs random histories of steps steps on s and checks
// every denial's RetryAfter: the same call (same cost, nothing in between) is
// denied 1µs before it and admitted at it. SHAPER_EXACT_SEED fixes the seed.
func CheckExact(t *testing.T, s Subject, seqs, steps int) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHAPER_EXACT_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, uint64(s.Algo)))
	checked := 0
	for q := range seqs {
		lim := RandomLimit(r, s.Algo)
		hist := RandomHistory(r, s.Algo, lim, steps)
		call, set := s.Fresh(t, lim)
		for i, o := range hist {
			if o.Set {
				set(o.Lim)
				continue
			}
			d, err := call(o.At, o.N)
			if err != nil {
				t.Fatalf("seq %d step %d: %v", q, i, err)
			}
			if d.Allowed {
				continue
			}
			checked++
			if d.RetryAfter <= 0 {
				t.Fatalf("seq %d step %d (t=%d n=%d): denied with RetryAfter %v", q, i, o.At, o.N, d.RetryAfter)
			}
			retry := d.RetryAfter.Microseconds()
			for _, c := range []struct {
				dt   int64
				want bool
			}{{retry - 1, false}, {retry, true}} {
				probe := append(hist[:i+1:i+1], Op{At: o.At + c.dt, N: o.N})
				p, err := Replay(t, s, lim, probe)
				if err != nil {
					t.Fatalf("seq %d step %d: probe: %v", q, i, err)
				}
				if p.Allowed != c.want {
					t.Fatalf("seq %d step %d (%v): denied at t=%d n=%d with RetryAfter %v (%+v), but at +%dµs Allowed = %v\nhistory: %v",
						q, i, d.Limit, o.At, o.N, d.RetryAfter, d, c.dt, p.Allowed, fmtHist(hist[:i+1]))
				}
			}
		}
	}
	if checked < seqs {
		t.Errorf("only %d denials checked", checked)
	}
}

func fmtHist(h []Op) string {
	s := ""
	for _, o := range h[max(0, len(h)-12):] {
		if o.Set {
			s += fmt.Sprintf("\n  SetLimit(%v)", o.Lim)
		} else {
			s += fmt.Sprintf("\n  t=%d n=%d", o.At, o.N)
		}
	}
	return s
}

// CheckSetLimitLowered checks a GCRA or token-bucket subject: 1/hour, then
// 10/s (burst 10): the key had used its whole old burst, which under the new
// limit reads as its whole new burst, so it is admitted 100 ms later (as
// x/time/rate does), and a denial before that says exactly when.
func CheckSetLimitLowered(t *testing.T, s Subject) {
	t.Helper()
	call, set := s.Fresh(t, shaper.Limit{Rate: shaper.PerHour(1)})
	if d, _ := call(T0, 1); !d.Allowed {
		t.Fatalf("first call denied")
	}
	set(shaper.Limit{Rate: shaper.PerSecond(10)})
	d, _ := call(T0+50_000, 1)
	if d.Allowed || d.RetryAfter != 50*time.Millisecond {
		t.Errorf("at +50ms: %+v, want denied with RetryAfter 50ms", d)
	}
	if d, _ := call(T0+100_000, 1); !d.Allowed {
		t.Errorf("at +100ms: %+v, want allowed", d)
	}
}

// CheckOutOfOrderNoForgiveness checks a GCRA subject: with burst 2, a call
// dated before a later admission is told the honest wait, and the debt is
// never forgiven: at most 2 in any emission window, whatever order the times
// come in.
func CheckOutOfOrderNoForgiveness(t *testing.T, s Subject) {
	t.Helper()
	call, _ := s.Fresh(t, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 2})
	// 2 at t0+1s: tat = t0+1.2s.
	for range 2 {
		if d, _ := call(T0+1_000_000, 1); !d.Allowed {
			t.Fatalf("burst denied")
		}
	}
	d, _ := call(T0+900_000, 1) // 100 ms earlier
	if d.Allowed || d.RetryAfter != 200*time.Millisecond {
		t.Errorf("at t0+0.9s: %+v, want denied with RetryAfter 200ms", d)
	}
	admitted := 0
	for _, at := range []int64{0, 500_000, 950_000, 1_000_000, 1_050_000} {
		if d, _ := call(T0+at, 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 0 {
		t.Errorf("%d more admitted before t0+1.1s, want 0", admitted)
	}
}

// CheckPeekRecordsNothing checks that a zero-cost call changes no later
// decision: empty a bucket at t0, peek at t0+5s, ask at t0+2s; the answer is
// the un-peeked meter's.
func CheckPeekRecordsNothing(t *testing.T, s Subject) {
	t.Helper()
	lim := shaper.Limit{Rate: shaper.PerSecond(1), Burst: 10}
	if s.Algo.Window() {
		lim = shaper.Limit{Rate: shaper.Rate{Count: 10, Period: 10 * time.Second}}
	}
	for _, peek := range []bool{false, true} {
		call, _ := s.Fresh(t, lim)
		for range 10 {
			call(T0+1_000_000, 1)
		}
		if peek {
			call(T0+6_000_000, 0)
			call(T0+16_000_000, 0)
		}
		d, err := call(T0+3_000_000, 5)
		want, _ := Replay(t, s, lim, []Op{
			{At: T0 + 1_000_000, N: 10},
			{At: T0 + 3_000_000, N: 5},
		})
		if err != nil || d != want {
			t.Errorf("peek=%v: %+v, %v; un-peeked meter says %+v", peek, d, err, want)
		}
	}
}

// Refund gives back, at time at (µs), the cost n of d, an admission of the
// same meter.
type Refund func(at, n int64, d shaper.Decision) error

// A RefundSubject is a meter under test that can refund: Fresh returns a new,
// empty meter with limit lim, as its Call and its Refund.
type RefundSubject struct {
	Name  string
	Algo  Algo
	Fresh func(t *testing.T, lim shaper.Limit) (Call, Refund)
}

// CheckRefund checks that admit-then-refund leaves a meter as if the call had
// never come: over seqs random histories of steps calls forward in time, a
// meter that is sometimes given an extra call, refunded after a random delay
// (none, part of an emission interval, up to two periods, across windows),
// makes the same decisions, field by field, as a meter that never saw the
// extra calls. For the window algorithms, other calls of the key may come
// between the extra call and its refund (they may roll the window the extra
// call was counted in); a history in which those calls are not decided
// alike on both meters is cut there. For GCRA and the token bucket such
// calls can absorb the extra call's cost (the key falls idle, the bucket
// refills to capacity) and the refund then gives back what is no longer
// owed, up to the cost, never more than a fresh key: those have no calls in
// between. (A call dated before a refund's time would be decided as the
// refund left the key; the histories here only move forward.) It fails if no
// refund mattered: the extra calls must have been admitted and the refunded
// quota used afterwards.
func CheckRefund(t *testing.T, s RefundSubject, seqs, steps int) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHAPER_EXACT_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, uint64(s.Algo)+100))
	refunded, mattered, cuts := 0, 0, 0
	for q := range seqs {
		lim := RandomLimit(r, s.Algo)
		burst := BurstOf(lim)
		p := int64(lim.Rate.Period / time.Microsecond)
		callA, refundA := s.Fresh(t, lim)
		callB, _ := s.Fresh(t, lim)
		now := int64(1_700_000_000_000_000) + r.Int64N(1e12)
		var hist []string
		owed := false // a refund happened since the last admission both agreed on
		for i := range steps {
			next, n := RandomStep(r, now, lim, burst)
			now = max(now, next)
			if r.IntN(3) == 0 {
				m := 1 + r.Int64N(burst)
				d, err := callA(now, m)
				if err != nil {
					t.Fatalf("seq %d step %d: extra call: %v", q, i, err)
				}
				at := now
				switch r.IntN(4) {
				case 1:
					at += r.Int64N(max(1, p/lim.Rate.Count))
				case 2:
					at += r.Int64N(2*p + 1)
				}
				cut := false
				for k := r.IntN(6) - 3; s.Algo.Window() && k > 0; k-- { // calls in between
					bt := now + r.Int64N(at-now+1)
					bn := int64(1)
					now = max(now, bt)
					a, _ := callA(now, bn)
					b, _ := callB(now, bn)
					hist = append(hist, fmt.Sprintf("between t=%d n=%d: %v, %v", now, bn, a.Allowed, b.Allowed))
					if a.Allowed != b.Allowed {
						cut = true
						break
					}
				}
				if cut {
					cuts++
					break
				}
				if err := refundA(at, m, d); err != nil {
					t.Fatalf("seq %d step %d: refund: %v", q, i, err)
				}
				hist = append(hist, fmt.Sprintf("extra t=%d n=%d allowed=%v, refund t=%d", now, m, d.Allowed, at))
				if d.Allowed {
					refunded++
					owed = true
				}
				now = at
			}
			hist = append(hist, fmt.Sprintf("t=%d n=%d", now, n))
			a, aerr := callA(now, n)
			b, berr := callB(now, n)
			if aerr != nil || berr != nil {
				t.Fatalf("seq %d step %d: errors %v, %v", q, i, aerr, berr)
			}
			if !Same(a, b) {
				t.Fatalf("seq %d step %d (%v, t=%d, n=%d):\nrefunded meter %+v\nfresh meter    %+v\nlast steps: %v",
					q, i, lim, now, n, a, b, hist[len(hist)-min(len(hist), 10):])
			}
			if owed && b.Allowed && n > 0 && b.Remaining < burst {
				mattered++
				owed = false
			}
		}
	}
	t.Logf("%d refunds, %d followed by an admission, %d histories cut", refunded, mattered, cuts)
	if refunded == 0 || mattered == 0 || 4*cuts > 3*seqs {
		t.Errorf("%d refunds, %d of them followed by admissions, %d of %d histories cut: the histories prove nothing", refunded, mattered, cuts, seqs)
	}
}

// Same reports whether two decisions say the same, field by field (every
// exported field: a Decision also carries what its meter's Refund needs,
// which a Redis meter and an in-process one keep differently).
func Same(a, b shaper.Decision) bool {
	return a.Allowed == b.Allowed && a.Degraded == b.Degraded && a.Remaining == b.Remaining &&
		a.RetryAfter == b.RetryAfter && a.ResetAfter == b.ResetAfter && a.Limit == b.Limit
}
