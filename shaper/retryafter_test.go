package shaper_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/rateconv"
	"github.com/floodgate-go/floodgate/internal/shapertest"
	"github.com/floodgate-go/floodgate/shaper"
)

// The tests in this file check the meters' answers after limit changes, at
// out-of-order times, at times outside the valid range and for zero-cost peeks.
// The checks live in internal/shapertest; shaperredis runs them on its scripts.

// A keyedMeter is any of the in-process keyed meters.
type keyedMeter interface {
	AllowNAt(key string, t time.Time, n int64) (shaper.Decision, error)
	SetLimit(shaper.Limit)
}

func newKeyed(a shapertest.Algo, lim shaper.Limit) keyedMeter {
	switch a {
	case shapertest.TokenBucket:
		return shaper.NewTokenBucket(lim)
	case shapertest.FixedWindow:
		return shaper.NewFixedWindow(lim)
	case shapertest.SlidingLog:
		return shaper.NewSlidingLog(lim)
	case shapertest.SlidingCounter:
		return shaper.NewSlidingCounter(lim)
	}
	return shaper.NewMeter(lim)
}

// localSubjects returns every in-process meter, and the Limiter (a GCRA).
func localSubjects() []shapertest.Subject {
	var out []shapertest.Subject
	for _, a := range shapertest.Algos {
		out = append(out, shapertest.Subject{Name: a.String(), Algo: a,
			Fresh: func(_ *testing.T, lim shaper.Limit) (shapertest.Call, func(shaper.Limit)) {
				m := newKeyed(a, lim)
				return func(at, n int64) (shaper.Decision, error) { return m.AllowNAt("k", time.UnixMicro(at), n) }, m.SetLimit
			}})
	}
	out = append(out, shapertest.Subject{Name: "Limiter", Algo: shapertest.GCRA,
		Fresh: func(_ *testing.T, lim shaper.Limit) (shapertest.Call, func(shaper.Limit)) {
			l := shaper.NewLimiter(lim)
			return func(at, n int64) (shaper.Decision, error) { return l.AllowNAt(time.UnixMicro(at), n) }, l.SetLimit
		}})
	return out
}

// TestRetryAfterExactEverywhere: every meter's every denial, over random
// histories with limit changes and out-of-order times, has an exact RetryAfter.
func TestRetryAfterExactEverywhere(t *testing.T) {
	seqs := 150
	if testing.Short() {
		seqs = 30
	}
	for _, s := range localSubjects() {
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckExact(t, s, seqs, 40) })
	}
}

// TestGCRASetLimitLowered: 1/hour, then 10/s (burst 10): the key had used its
// whole old burst, which under the new limit reads as its whole new burst, so it
// is admitted 100 ms later, and a denial before that says exactly when.
func TestGCRASetLimitLowered(t *testing.T) {
	for _, s := range localSubjects() {
		if s.Algo != shapertest.GCRA && s.Algo != shapertest.TokenBucket {
			continue
		}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckSetLimitLowered(t, s) })
	}
}

// TestGCRAOutOfOrderNoForgiveness: with burst 2, a call dated before a later
// admission is told the honest wait, and the debt is never forgiven.
func TestGCRAOutOfOrderNoForgiveness(t *testing.T) {
	for _, s := range localSubjects() {
		if s.Algo != shapertest.GCRA {
			continue
		}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckOutOfOrderNoForgiveness(t, s) })
	}
}

// TestTimeRange: times outside [0, 2^53) µs are refused with ErrTimeRange, and
// change nothing.
func TestTimeRange(t *testing.T) {
	bad := []time.Time{{}, time.Unix(-1, 0), time.UnixMicro(-1), time.UnixMicro(rateconv.MaxExact), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, s := range localSubjects() {
		t.Run(s.Name, func(t *testing.T) {
			call, _ := s.Fresh(t, shaper.Limit{Rate: shaper.PerSecond(10)})
			for _, at := range bad {
				d, err := call(at.UnixMicro(), 1)
				if !errors.Is(err, shaper.ErrTimeRange) || d.Allowed {
					t.Errorf("at %v: %+v, %v; want shaper.ErrTimeRange", at, d, err)
				}
			}
			for i := range 10 {
				if d, err := call(shapertest.T0, 1); err != nil || !d.Allowed {
					t.Fatalf("call %d at t0 after refused times: %+v, %v", i, d, err)
				}
			}
		})
	}
	// The edges are valid.
	for _, us := range []int64{0, rateconv.MaxExact - 1} {
		if d, err := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)}).AllowNAt("k", time.UnixMicro(us), 1); err != nil || !d.Allowed {
			t.Errorf("at %dµs: %+v, %v; want allowed", us, d, err)
		}
	}
}

// TestPeekRecordsNothing: a zero-cost call changes no later decision, for every
// meter.
func TestPeekRecordsNothing(t *testing.T) {
	for _, s := range localSubjects() {
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckPeekRecordsNothing(t, s) })
	}
}
