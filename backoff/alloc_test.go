//go:build !race

package backoff_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/backoff"
)

func TestDoAllocs(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for _, cfg := range []backoff.Config{{}, {Observer: floodgate.ObserverFunc(func(floodgate.Event) {})}} {
		c := backoff.New(cfg)
		if n := testing.AllocsPerRun(1000, func() { c.Do(ctx, fn) }); n != 0 {
			t.Errorf("Do (observer %v) on success: %v allocs, want 0", cfg.Observer != nil, n)
		}
	}
}
