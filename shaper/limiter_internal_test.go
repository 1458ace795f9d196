package shaper

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLimiterMatchesMeter: a Limiter and a Meter's single key make the same
// decisions, field by field, over random (time, cost) sequences with limit
// changes between whole-µs and fractional intervals, times that step back, costs
// above the burst, zero-cost peeks, and Allow's lock-free path.
func TestLimiterMatchesMeter(t *testing.T) {
	limits := []Limit{
		{Rate: PerSecond(10), Burst: 3},                                 // T = 100ms
		{Rate: PerSecond(3), Burst: 2},                                  // T = 333333⅓ µs
		{Rate: PerMinute(7), Burst: 5},                                  // T = 8571428⁴⁄₇ µs
		{Rate: Every(250 * time.Millisecond)},                           // T = 250ms, burst 1
		{Rate: PerSecond(1000), Burst: 50},                              // T = 1ms
		{Rate: Rate{Count: 7, Period: 10 * time.Microsecond}, Burst: 4}, // T = 1³⁄₇ µs
	}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		lim := limits[r.IntN(len(limits))]
		m, l := NewMeter(lim), NewLimiter(lim)
		now := t0US + r.Int64N(1e6)
		for i := range 400 {
			switch k := r.IntN(100); {
			case k < 3:
				lim = limits[r.IntN(len(limits))]
				m.SetLimit(lim)
				l.SetLimit(lim)
				continue
			case k < 8:
				now -= r.Int64N(int64(lim.Rate.Interval()/time.Microsecond) + 1) // back in time
			default:
				now += r.Int64N(2*int64(lim.Rate.Interval()/time.Microsecond) + 1)
			}
			n := r.Int64N(lim.burst() + 2) // sometimes above the burst
			if r.IntN(4) == 0 {
				n = 1
				want, _ := m.gcra.allowN("k", now, 1)
				if got := l.allowAt(now); got != want.Allowed {
					t.Fatalf("seed %d step %d (%v, t=%d): Allow = %v, Meter says %v", seed, i, lim, now, got, want.Allowed)
				}
				continue
			}
			want, werr := m.gcra.allowN("k", now, n)
			got, gerr := l.allowN(now, n)
			var wce, gce *RejectError
			if got != want || errors.As(werr, &wce) != errors.As(gerr, &gce) || (wce != nil && *wce != *gce) {
				t.Fatalf("seed %d step %d (%v, t=%d, n=%d): Limiter = %+v, %v; Meter = %+v, %v",
					seed, i, lim, now, n, got, gerr, want, werr)
			}
		}
		if l.Limit() != m.Limit() {
			t.Fatalf("Limit() = %v, Meter's %v", l.Limit(), m.Limit())
		}
	}
}

var t0US = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
