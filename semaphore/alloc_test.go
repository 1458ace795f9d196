//go:build !race

// The race detector makes sync.Pool drop what it is given, on purpose, so the
// pooled waiters allocate under it; allocation budgets are checked without it
// (make test runs the allocation tests again without -race).

package semaphore_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

func TestHotPathsDoNotAllocate(t *testing.T) {
	s := semaphore.New(4, semaphore.Config{})
	k := semaphore.NewKeyed(2, semaphore.KeyedConfig{})
	ctx, cancel := context.WithCancel(t.Context()) // a ctx with a Done channel
	defer cancel()
	for name, f := range map[string]func(){
		"Acquire+Release":           func() { s.Acquire(context.Background(), 1); s.Release(1) },
		"Acquire+Release, ctx":      func() { s.Acquire(ctx, 1); s.Release(1) },
		"TryAcquire+Release":        func() { s.TryAcquire(2); s.Release(2) },
		"TryAcquire full":           func() { s.TryAcquire(5) },
		"Do":                        func() { s.Do(ctx, 1, noop) },
		"Acquire+Release, weight 0": func() { s.Acquire(ctx, 0); s.Release(0) },
		"Hold+Release":              func() { h, _ := s.Hold(ctx, 1); h.Release() },
		"TryHold+Release":           func() { h, _ := s.TryHold(ctx, 2); h.Release() },
		"Keyed Hold+Release":        func() { h, _ := k.Hold(ctx, "a", 1); h.Release() },
		"Keyed TryHold+Release":     func() { h, _ := k.TryHold(ctx, "a", 1); h.Release() },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
}

func noop(context.Context) error { return nil }

// A blocked Acquire, woken by a Release, allocates nothing either: waiters, with
// their channel and MaxWait timer, are pooled. Each run hands one permit back
// and forth between this goroutine and another, and each releases only once
// the other is queued, so every Acquire waits.
func TestBlockedAcquireDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  semaphore.Config
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"ctx=background", semaphore.Config{}, func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}},
		{"ctx=cancel/maxwait=1h", semaphore.Config{MaxWait: time.Hour}, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			s := semaphore.New(1, tc.cfg)
			if err := s.Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got, stop := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					if err := s.Acquire(ctx, 1); err != nil {
						t.Error(err)
						return
					}
					select {
					case got <- struct{}{}:
					case <-stop:
						s.Release(1)
						return
					}
					for s.Stats().Waiting == 0 { // the test's Acquire is queued
						runtime.Gosched()
					}
					s.Release(1)
				}
			})
			a := testing.AllocsPerRun(1000, func() {
				for s.Stats().Waiting == 0 { // the other goroutine is queued
					runtime.Gosched()
				}
				s.Release(1)
				<-got
				if err := s.Acquire(ctx, 1); err != nil {
					t.Fatal(err)
				}
			})
			close(stop)
			s.Release(1)
			wg.Wait()
			if a != 0 {
				t.Errorf("%v allocs per blocked Acquire and its Release, want 0", a)
			}
		})
	}
}
