//go:build !race

// Allocation budgets are checked without the race detector, which makes
// sync.Pool drop what it is given (make test runs them without -race).

package adaptive_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/adaptive"
)

func TestHoldDoesNotAllocate(t *testing.T) {
	g := adaptive.New(adaptive.Config{Initial: 4})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for name, f := range map[string]func(){
		"Hold+Release":    func() { h, _ := g.Hold(ctx, 1); h.Release() },
		"TryHold+Release": func() { h, _ := g.TryHold(ctx, 1); h.Release() },
		"TryHold+Drop":    func() { h, _ := g.TryHold(ctx, 1); g.Drop(h) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
}
