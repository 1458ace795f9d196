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

func TestResizeGrowWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		s.Acquire(t.Context(), 1)
		a := acquireAsync(t.Context(), s, 2)
		b := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.Resize(4)
		synctest.Wait()
		if a.err != nil || b.err != nil || !a.done.Load() || !b.done.Load() {
			t.Fatalf("after growing: a=(%v,%v) b=(%v,%v), want both granted", a.done.Load(), a.err, b.done.Load(), b.err)
		}
		if st := s.Stats(); st.InUse != 4 || st.Capacity != 4 {
			t.Fatalf("Stats = %+v", st)
		}
	})
}

func TestResizeShrinkNeverRevokes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(4, semaphore.Config{})
		s.Acquire(t.Context(), 3)
		s.Resize(2)
		if st := s.Stats(); st.InUse != 3 || st.Capacity != 2 {
			t.Fatalf("after shrinking: %+v, want InUse 3 kept, Capacity 2", st)
		}
		if s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded with 3 held of 2")
		}
		w := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.Release(1) // 2 held of 2: still no room
		synctest.Wait()
		if w.done.Load() {
			t.Fatal("granted while the weight in use was at the new capacity")
		}
		s.Release(1) // 1 held: fits
		synctest.Wait()
		if !w.done.Load() || w.err != nil {
			t.Fatalf("waiter after draining below the new capacity: done=%v err=%v", w.done.Load(), w.err)
		}
	})
}

func TestResizeFailsWaitersLargerThanCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rejected atomic.Int32
		s := semaphore.New(4, semaphore.Config{OnReject: func(n int64, err error) {
			if n == 3 && errors.Is(err, semaphore.ErrTooLarge) {
				rejected.Add(1)
			}
		}})
		s.Acquire(t.Context(), 4)
		big := acquireAsync(t.Context(), s, 3)
		small := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.Resize(2)
		synctest.Wait()
		if !big.done.Load() || !errors.Is(big.err, semaphore.ErrTooLarge) {
			t.Fatalf("waiter of 3 after shrinking to 2: done=%v err=%v, want ErrTooLarge at once", big.done.Load(), big.err)
		}
		if small.done.Load() {
			t.Fatal("waiter of 1 granted while 4 of 2 are held")
		}
		if rejected.Load() != 1 {
			t.Fatalf("OnReject(3, ErrTooLarge) called %d times, want 1", rejected.Load())
		}
		if st := s.Stats(); st.RejectedTooLarge != 1 || st.Waiters != 1 {
			t.Fatalf("Stats = %+v", st)
		}
		s.Release(3)
		synctest.Wait()
		if !small.done.Load() || small.err != nil {
			t.Fatalf("small waiter: done=%v err=%v", small.done.Load(), small.err)
		}
	})
}

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
		t.Fatalf("Do over capacity = %v, fn called %v; want ErrTooLarge without calling fn", err, called)
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

// MaxWait firing in the same instant as the grant: either the grant is kept
// (nil, weight held) or the call fails with ErrMaxWait holding nothing.
func TestMaxWaitRacesGrant(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, semaphore.Config{MaxWait: time.Second})
			s.Acquire(t.Context(), 1)
			w := acquireAsync(t.Context(), s, 1)
			synctest.Wait()
			time.Sleep(time.Second) // the waiter's timer fires now too
			s.Release(1)
			synctest.Wait()
			st := s.Stats()
			switch {
			case w.err == nil && st.InUse == 1:
			case errors.Is(w.err, semaphore.ErrMaxWait) && st.InUse == 0:
			default:
				t.Fatalf("iteration %d: err=%v InUse=%d", i, w.err, st.InUse)
			}
			if st.Waiters != 0 {
				t.Fatalf("Waiters = %d", st.Waiters)
			}
		})
	}
}

// Resize failing a waiter in the same instant as its cancellation: the caller
// gets ErrTooLarge or ctx.Err(), and nothing is held or queued.
func TestResizeRacesCancel(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(4, semaphore.Config{})
			s.Acquire(t.Context(), 4)
			ctx, cancel := context.WithCancel(t.Context())
			w := acquireAsync(ctx, s, 3)
			synctest.Wait()
			cancel()
			s.Resize(2)
			synctest.Wait()
			if !errors.Is(w.err, semaphore.ErrTooLarge) && !errors.Is(w.err, context.Canceled) {
				t.Fatalf("iteration %d: err = %v", i, w.err)
			}
			if st := s.Stats(); st.InUse != 4 || st.Waiters != 0 || st.WaitingWeight != 0 {
				t.Fatalf("iteration %d: %+v", i, st)
			}
		})
	}
}
