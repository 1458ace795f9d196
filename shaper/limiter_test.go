package shaper_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/shaper"
)

// TestLimiterContendedExact: goroutines racing on one Limiter at one instant get
// exactly Burst admissions between them, whole-µs and fractional, with a limit
// change racing them, and no errors.
func TestLimiterContendedExact(t *testing.T) {
	for _, lim := range []shaper.Limit{
		{Rate: shaper.PerSecond(1000), Burst: 5000}, // lock-free path
		{Rate: shaper.PerSecond(3), Burst: 5000},    // fractional: the mutex path
	} {
		t.Run(lim.String(), func(t *testing.T) {
			l := shaper.NewLimiter(lim)
			var admitted, errs atomic.Int64
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for range 2000 {
						d, err := l.AllowNAt(t0, 1)
						if err != nil {
							errs.Add(1)
						}
						if d.Allowed {
							admitted.Add(1)
						}
						if g == 0 {
							l.SetLimit(lim) // the same limit: a swap that must not disturb
						}
					}
				})
			}
			wg.Wait()
			if admitted.Load() != 5000 || errs.Load() != 0 {
				t.Errorf("admitted %d with %d errors, want exactly 5000 and none", admitted.Load(), errs.Load())
			}
		})
	}
}

// TestLimiterContendedAllow: Allow with the real clock from several goroutines,
// while the limit flips between a whole-µs and a fractional interval: never more
// than the larger burst + rate·t + 1.
func TestLimiterContendedAllow(t *testing.T) {
	whole := shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 10}
	frac := shaper.Limit{Rate: shaper.Rate{Count: 1000, Period: time.Second + time.Microsecond}, Burst: 10}
	l := shaper.NewLimiter(whole)
	var admitted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := 0; time.Since(start) < 100*ms; i++ {
				if g == 0 && i%64 == 0 {
					l.SetLimit([]shaper.Limit{whole, frac}[i/64%2])
				}
				if l.Allow() {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	// Both limits count in the same units (C = 1000), so a change hands nothing back.
	if bound := 10 + int64(el.Seconds()*1000) + 1; admitted.Load() > bound {
		t.Errorf("admitted %d in %v, bound %d", admitted.Load(), el, bound)
	}
	if admitted.Load() == 0 {
		t.Errorf("nothing admitted")
	}
}

func TestLimiterZeroAllocs(t *testing.T) {
	for _, lim := range []shaper.Limit{
		{Rate: shaper.PerSecond(1e6), Burst: 1e6}, // whole µs
		{Rate: shaper.PerSecond(3e6), Burst: 1e6}, // fractional
	} {
		l := shaper.NewLimiter(lim)
		at := t0
		if got := testing.AllocsPerRun(1000, func() {
			at = at.Add(time.Microsecond)
			l.AllowNAt(at, 1)
			l.AllowN(1)
			l.Allow()
		}); got != 0 {
			t.Errorf("%v: %v allocs per call, want 0", lim, got)
		}
	}
}

func TestLimiterZeroValue(t *testing.T) {
	var l shaper.Limiter
	if l.Allow() {
		t.Errorf("zero Limiter: Allow = true")
	}
	d, err := l.AllowNAt(t0, 1)
	if d.Allowed || !errors.Is(err, shaper.ErrTooLarge) {
		t.Errorf("zero Limiter: AllowNAt = %v, %v; want denied, ErrTooLarge", d.Allowed, err)
	}
	if l.Limit() != (shaper.Limit{}) {
		t.Errorf("zero Limiter: Limit = %v", l.Limit())
	}
}

func TestLimiterSteps(t *testing.T) {
	runSteps(t, limiterAt{shaper.NewLimiter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 3})}, gcraSteps)
}

// limiterAt adapts a Limiter to the keyed allowAt of the step tables.
type limiterAt struct{ l *shaper.Limiter }

func (a limiterAt) AllowNAt(_ string, t time.Time, n int64) (shaper.Decision, error) {
	return a.l.AllowNAt(t, n)
}
