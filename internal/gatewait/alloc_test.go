//go:build !race

// Allocation budgets are checked without the race detector, which makes
// sync.Pool drop what it is given (make test runs them again without -race).

package gatewait_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/semaphore"
)

// The fast path (room at once) allocates nothing with a local gate, whatever
// the MaxWait, so a consumer's hot path stays at 0 allocations.
func TestFastPathDoesNotAllocate(t *testing.T) {
	s := semaphore.New(4, semaphore.Config{})
	g := gatewait.Keyed(s, nil)
	k := gatewait.Keyed(nil, semaphore.NewKeyed(4, semaphore.KeyedConfig{}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var w gatewait.Waits
	for _, maxWait := range []time.Duration{-1, 0, time.Second} {
		for name, f := range map[string]func(){
			"Weighted": func() { h, _, _ := gatewait.Take(ctx, g, "", 1, maxWait, errMaxWait, &w); h.Release() },
			"Keyed":    func() { h, _, _ := gatewait.Take(ctx, k, "a", 1, maxWait, errMaxWait, &w); h.Release() },
		} {
			if a := testing.AllocsPerRun(1000, f); a != 0 {
				t.Errorf("%s, MaxWait %v: %v allocs per Take+Release, want 0", name, maxWait, a)
			}
		}
	}
}
