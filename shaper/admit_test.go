package shaper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/shaper"
)

// admitter is the shape bulkhead consumes (declared there as Rate).
type admitter interface {
	Admit(ctx context.Context, key string, n int64) (shaper.Decision, error)
}

var (
	_ admitter = (*shaper.Meter)(nil)
	_ admitter = (*shaper.Limiter)(nil)
)

// TestAdmit: every local meter and the Limiter admit up to the burst, then deny
// with an error that matches ErrLimited and carries the decision's RetryAfter; a
// done context is refused first with ctx.Err() and records nothing; a cost above
// the burst is the AllowN error.
func TestAdmit(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerMinute(2)}
	for name, newM := range map[string]func() admitter{
		"Meter":          func() admitter { return shaper.NewMeter(lim) },
		"TokenBucket":    func() admitter { return shaper.NewTokenBucket(lim) },
		"FixedWindow":    func() admitter { return shaper.NewFixedWindow(lim) },
		"SlidingLog":     func() admitter { return shaper.NewSlidingLog(lim) },
		"SlidingCounter": func() admitter { return shaper.NewSlidingCounter(lim) },
		"Limiter":        func() admitter { return shaper.NewLimiter(lim) },
	} {
		t.Run(name, func(t *testing.T) {
			m := newM()
			done, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := m.Admit(done, "k", 1); err != context.Canceled {
				t.Fatalf("Admit(done ctx) = %v, want context.Canceled", err)
			}
			ctx := t.Context()
			for i := range 2 {
				d, err := m.Admit(ctx, "k", 1)
				if err != nil || !d.Allowed {
					t.Fatalf("Admit #%d = %+v, %v; want allowed (the done ctx must not have spent)", i, d, err)
				}
			}
			d, err := m.Admit(ctx, "k", 1)
			if d.Allowed || !errors.Is(err, shaper.ErrLimited) {
				t.Fatalf("Admit #3 = %+v, %v; want denied with ErrLimited", d, err)
			}
			var ra interface{ RetryAfter() time.Duration }
			if !errors.As(err, &ra) || ra.RetryAfter() != d.RetryAfter || ra.RetryAfter() <= 0 {
				t.Errorf("RetryAfter of %v = %v, want Decision.RetryAfter %v > 0", err, ra, d.RetryAfter)
			}
			if d.Limit.Rate != lim.Rate {
				t.Errorf("Decision.Limit = %v, want %v", d.Limit, lim)
			}
			if _, err := m.Admit(ctx, "k", 3); err == nil || errors.Is(err, shaper.ErrLimited) {
				t.Errorf("Admit(n=3 > burst) = %v, want the too-large error", err)
			}
		})
	}
}

// TestAdmitAllocs: an admitted call allocates nothing.
func TestAdmitAllocs(t *testing.T) {
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1 << 30), Burst: 1 << 20})
	l := shaper.NewLimiter(shaper.Limit{Rate: shaper.PerSecond(1 << 30), Burst: 1 << 20})
	ctx := context.Background()
	m.Admit(ctx, "k", 1)
	if a := testing.AllocsPerRun(100, func() { m.Admit(ctx, "k", 1) }); a != 0 {
		t.Errorf("Meter.Admit allocs = %v, want 0", a)
	}
	if a := testing.AllocsPerRun(100, func() { l.Admit(ctx, "", 1) }); a != 0 {
		t.Errorf("Limiter.Admit allocs = %v, want 0", a)
	}
}
