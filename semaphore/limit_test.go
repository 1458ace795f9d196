package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/semaphore"
)

func TestSetLimitGrowWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		s.Acquire(t.Context(), 1)
		a := acquireAsync(t.Context(), s, 2)
		b := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.SetLimit(4)
		synctest.Wait()
		if a.err != nil || b.err != nil || !a.done.Load() || !b.done.Load() {
			t.Fatalf("after growing: a=(%v,%v) b=(%v,%v), want both granted", a.done.Load(), a.err, b.done.Load(), b.err)
		}
		if st := s.Stats(); st.InUse != 4 || st.Limit != 4 {
			t.Fatalf("Stats = %+v", st)
		}
	})
}

func TestSetLimitShrinkNeverRevokes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(4, semaphore.Config{})
		s.Acquire(t.Context(), 3)
		s.SetLimit(2)
		if st := s.Stats(); st.InUse != 3 || st.Limit != 2 {
			t.Fatalf("after shrinking: %+v, want InUse 3 kept, Limit 2", st)
		}
		if s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded with 3 held of 2")
		}
		w := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.Release(1) // 2 held of 2: still no room
		synctest.Wait()
		if w.done.Load() {
			t.Fatal("granted while the weight in use was at the new limit")
		}
		s.Release(1) // 1 held: fits
		synctest.Wait()
		if !w.done.Load() || w.err != nil {
			t.Fatalf("waiter after draining below the new limit: done=%v err=%v", w.done.Load(), w.err)
		}
	})
}

func TestSetLimitFailsWaitersLargerThanLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rejected atomic.Int32
		s := semaphore.New(4, semaphore.Config{Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind == floodgate.KindReject && e.N == 3 && errors.Is(e.Err, semaphore.ErrTooLarge) && e.Reason == floodgate.ReasonTooLarge {
				rejected.Add(1)
			}
		})})
		s.Acquire(t.Context(), 4)
		big := acquireAsync(t.Context(), s, 3)
		small := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		s.SetLimit(2)
		synctest.Wait()
		if !big.done.Load() || !errors.Is(big.err, semaphore.ErrTooLarge) {
			t.Fatalf("waiter of 3 after shrinking to 2: done=%v err=%v, want ErrTooLarge at once", big.done.Load(), big.err)
		}
		if small.done.Load() {
			t.Fatal("waiter of 1 granted while 4 of 2 are held")
		}
		if rejected.Load() != 1 {
			t.Fatalf("KindReject of 3 with ErrTooLarge reported %d times, want 1", rejected.Load())
		}
		if st := s.Stats(); st.RejectedTooLarge != 1 || st.Waiting != 1 {
			t.Fatalf("Stats = %+v", st)
		}
		s.Release(3)
		synctest.Wait()
		if !small.done.Load() || small.err != nil {
			t.Fatalf("small waiter: done=%v err=%v", small.done.Load(), small.err)
		}
	})
}

// SetLimit failing a waiter in the same instant as its cancellation: the caller
// gets ErrTooLarge or ctx.Err(), and nothing is held or queued.
func TestSetLimitRacesCancel(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(4, semaphore.Config{})
			s.Acquire(t.Context(), 4)
			ctx, cancel := context.WithCancel(t.Context())
			w := acquireAsync(ctx, s, 3)
			synctest.Wait()
			cancel()
			s.SetLimit(2)
			synctest.Wait()
			if !errors.Is(w.err, semaphore.ErrTooLarge) && !errors.Is(w.err, context.Canceled) {
				t.Fatalf("iteration %d: err = %v", i, w.err)
			}
			if st := s.Stats(); st.InUse != 4 || st.Waiting != 0 || st.WaitingWeight != 0 {
				t.Fatalf("iteration %d: %+v", i, st)
			}
		})
	}
}
