package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

func TestHooksRunWithoutLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s *semaphore.Weighted
		var acquired, released, rejected atomic.Int64
		s = semaphore.New(2, semaphore.Config{
			MaxWaiters: 1,
			// Each hook calls back into the semaphore: it would deadlock if the
			// hook ran with the lock held.
			OnAcquire: func(n int64, _ time.Duration) { s.Stats(); acquired.Add(n) },
			OnRelease: func(n int64) { s.Stats(); released.Add(n) },
			OnReject:  func(n int64, _ error) { s.TryAcquire(1); rejected.Add(1) },
		})
		s.Acquire(t.Context(), 2)
		w := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		if err := s.Acquire(t.Context(), 1); !errors.Is(err, semaphore.ErrQueueFull) {
			t.Fatalf("Acquire on a full queue = %v", err)
		}
		s.Release(2)
		synctest.Wait()
		if w.err != nil {
			t.Fatal(w.err)
		}
		s.Release(1)
		if acquired.Load() != 3 || released.Load() != 3 || rejected.Load() != 1 {
			t.Fatalf("hooks saw acquired=%d released=%d rejected=%d, want 3, 3, 1", acquired.Load(), released.Load(), rejected.Load())
		}
	})
}

func TestAcquireHookReportsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waited []time.Duration
		s := semaphore.New(1, semaphore.Config{OnAcquire: func(_ int64, d time.Duration) { waited = append(waited, d) }})
		s.Acquire(t.Context(), 1)
		w := acquireAsync(t.Context(), s, 1)
		time.Sleep(3 * time.Second)
		s.Release(1)
		synctest.Wait()
		if w.err != nil || len(waited) != 2 || waited[0] != 0 || waited[1] != 3*time.Second {
			t.Fatalf("waits = %v (err %v), want [0 3s]", waited, w.err)
		}
	})
}

func TestDoReleasesOnErrorAndPanic(t *testing.T) {
	s := semaphore.New(1, semaphore.Config{})
	boom := errors.New("boom")
	if err := s.Do(t.Context(), 1, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "fn panicked" {
				t.Fatalf("recover() = %v, want fn's panic", r)
			}
		}()
		s.Do(t.Context(), 1, func(context.Context) error { panic("fn panicked") })
	}()
	if st := s.Stats(); st.InUse != 0 {
		t.Fatalf("InUse = %d after Do returned and panicked, want 0", st.InUse)
	}
	called := false
	err := s.Do(t.Context(), 2, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, semaphore.ErrTooLarge) || called {
		t.Fatalf("Do over limit = %v, fn called %v; want ErrTooLarge without calling fn", err, called)
	}
}

func TestPanickingAcquireHookDoesNotLeak(t *testing.T) {
	s := semaphore.New(2, semaphore.Config{OnAcquire: func(int64, time.Duration) { panic("hook") }})
	for name, f := range map[string]func(){
		"Do":         func() { s.Do(t.Context(), 1, func(context.Context) error { return nil }) },
		"Acquire":    func() { s.Acquire(t.Context(), 2) },
		"TryAcquire": func() { s.TryAcquire(1) },
	} {
		func() {
			defer func() {
				if r := recover(); r != "hook" {
					t.Fatalf("%s: recover() = %v, want the hook's panic", name, r)
				}
			}()
			f()
		}()
		if st := s.Stats(); st.InUse != 0 {
			t.Fatalf("%s: InUse = %d after the OnAcquire hook panicked, want 0", name, st.InUse)
		}
	}
}
