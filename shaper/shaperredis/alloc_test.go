//go:build !race

// The race detector allocates on its own; allocation budgets are checked
// without it (as x/time does).

package shaperredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestRedisMeterAllocs pins the client allocations of one Redis decision (the
// issue's budget is 8; go-redis's own EvalSha of a trivial script makes 11)
// when the caller's deadline is within the call timeout, so that the breaker
// derives no context. Otherwise (a context with no sooner deadline) the
// breaker's context.WithDeadline adds its own allocations, and only those.
func TestRedisMeterAllocs(t *testing.T) {
	db := redistest.Connect(t)
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: 1_000_000},
		shaperredis.Config{Prefix: db.Prefix, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
	soon, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	withDeadline := testing.AllocsPerRun(200, func() {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Second))
		_ = ctx.Done()
		cancel()
	})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		max  float64
	}{
		{"background", context.Background(), 8 + withDeadline},
		{"deadline within the call timeout", soon, 8},
	} {
		if _, err := m.AllowN(tc.ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(200, func() { m.AllowN(tc.ctx, "k", 1) })
		if got > tc.max {
			t.Errorf("%s: Allow allocates %v times per decision, want <= %v", tc.name, got, tc.max)
		}
		t.Logf("%s: %v allocs per decision", tc.name, got)
	}
}
