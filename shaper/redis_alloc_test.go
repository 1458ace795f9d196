//go:build !race

// The race detector allocates on its own; allocation budgets are checked
// without it (as x/time does).

package shaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
)

// TestRedisMeterAllocs pins the client allocations of one Redis decision (the
// issue's budget is 8; go-redis's own EvalSha of a trivial script makes 11): a
// context that can never be done, or whose deadline is within the call
// timeout, needs no context of its own.
func TestRedisMeterAllocs(t *testing.T) {
	db := redistest.Connect(t)
	m := shaper.NewRedisMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: 1_000_000},
		shaper.RedisConfig{Prefix: db.Prefix, CallTimeout: time.Second})
	soon, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"deadline within the call timeout", soon},
	} {
		if _, err := m.Allow(tc.ctx, "k"); err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(200, func() { m.Allow(tc.ctx, "k") })
		if got > 8 {
			t.Errorf("%s: Allow allocates %v times per decision, want <= 8", tc.name, got)
		}
		t.Logf("%s: %v allocs per decision", tc.name, got)
	}
}
