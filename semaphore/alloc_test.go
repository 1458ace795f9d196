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

	"github.com/floodgate-go/floodgate/semaphore"
)

// A blocked Acquire, woken by a Release, allocates nothing either: waiters and
// their channels are pooled. Each run hands one permit back and forth between
// this goroutine and another, and each releases only once the other is queued,
// so every Acquire waits.
func TestBlockedAcquireDoesNotAllocate(t *testing.T) {
	s := semaphore.New(1, semaphore.Config{})
	ctx := context.Background()
	s.Acquire(ctx, 1)
	got, stop := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			s.Acquire(ctx, 1)
			select {
			case got <- struct{}{}:
			case <-stop:
				s.Release(1)
				return
			}
			for s.Stats().Waiters == 0 { // the test's Acquire is queued
				runtime.Gosched()
			}
			s.Release(1)
		}
	})
	a := testing.AllocsPerRun(1000, func() {
		for s.Stats().Waiters == 0 { // the other goroutine is queued
			runtime.Gosched()
		}
		s.Release(1)
		<-got
		s.Acquire(ctx, 1)
	})
	close(stop)
	s.Release(1)
	wg.Wait()
	if a != 0 {
		t.Errorf("%v allocs per blocked Acquire and its Release, want 0", a)
	}
}
