package shaperredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// The Redis meters and a Lease have the Admit of the local meters, so one
// small interface (bulkhead's Rate) covers them all.
type admitter interface {
	Admit(context.Context, string, int64) (shaper.Decision, error)
}

var (
	_ admitter = (*shaperredis.Meter)(nil)
	_ admitter = (*shaperredis.Lease)(nil)
	_ admitter = (*shaper.Meter)(nil)
)

// TestAllowAdmitDegraded: Allow answers a bool (the policy resolves store
// failures; a done ctx is false), Admit returns a denial as ErrLimited with
// RetryAfter, and decisions the store did not make are Degraded.
func TestAllowAdmitDegraded(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	lim := shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1}
	m := shaperredis.NewMeter(db.Client, lim, shaperredis.Config{Prefix: db.Prefix})
	if !m.Allow(ctx, "k") {
		t.Fatal("first Allow = false")
	}
	if m.Allow(ctx, "k") {
		t.Fatal("second Allow = true, burst 1")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if m.Allow(done, "other") {
		t.Error("Allow with a done ctx = true")
	}
	d, err := m.Admit(ctx, "k", 1)
	if !errors.Is(err, shaperredis.ErrLimited) || d.Allowed || d.RetryAfter <= 0 || d.Degraded {
		t.Errorf("Admit over the limit = %+v, %v; want ErrLimited with RetryAfter", d, err)
	}
	if ra, ok := errors.AsType[*shaperredis.RejectError](err); !ok || ra.RetryAfter() != d.RetryAfter {
		t.Errorf("Admit error %v: RetryAfter does not match %v", err, d.RetryAfter)
	}
	if _, err := m.Admit(ctx, "k", 2); !errors.Is(err, shaperredis.ErrTooLarge) {
		t.Errorf("Admit(2) with burst 1: %v, want ErrTooLarge", err)
	}
	if d, err := m.Admit(ctx, "fresh", 1); err != nil || !d.Allowed || d.Degraded {
		t.Errorf("Admit on a fresh key = %+v, %v", d, err)
	}

	for _, p := range []breaker.Policy{breaker.FailOpen, breaker.FailLocal} {
		dm := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{Policy: p})
		if !dm.Allow(ctx, "k") {
			t.Errorf("%v: Allow with Redis down = false", p)
		}
		d, err := dm.AllowN(ctx, "k2", 1)
		if err != nil || !d.Allowed || !d.Degraded {
			t.Errorf("%v: AllowN with Redis down = %+v, %v; want allowed and Degraded", p, d, err)
		}
	}
	closed := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{})
	if closed.Allow(ctx, "k") {
		t.Error("FailClosed: Allow with Redis down = true")
	}
}
