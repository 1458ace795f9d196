package semaphore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// A lock-free acquire that read the state word and the capacity before a
// shrinking Resize must fail its CAS afterwards, even though Resize leaves the
// weight in use and the slow bit as they were: the generation changed.
func TestResizeInvalidatesLockFreeAcquire(t *testing.T) {
	s := New(10, Config{})
	st := s.state.Load() // what tryFast read ...
	if st&curMask+5 > uint64(s.capacity.Load()) {
		t.Fatal("setup: 5 must fit in 10")
	}
	s.Resize(4) // ... before the Resize completed
	if s.state.Load()&^genMask != st&^genMask {
		t.Fatalf("Resize changed more than the generation: %x -> %x", st, s.state.Load())
	}
	if s.state.CompareAndSwap(st, st+5) {
		t.Fatal("a CAS prepared before Resize succeeded: 5 granted above capacity 4")
	}
	if ok, _ := s.tryFast(5); ok {
		t.Fatal("tryFast(5) succeeded with capacity 4")
	}
}

// A waiter pushed onto the inbox after a shrinking Resize checked the queue
// (acquirePushed compares n with the capacity before pushing) fails with
// ErrTooLarge when it is moved to the queue instead of waiting forever.
func TestPushedAfterShrinkFails(t *testing.T) {
	s := New(4, Config{})
	s.Resize(2) // after the pusher read capacity 4
	w := s.getWaiter()
	w.n = 3
	s.inbox.Store(w)
	s.state.Or(slowBit)
	st := s.Stats() // moves w to the queue
	<-w.ready
	if w.state != failed || !errors.Is(w.err, ErrTooLarge) {
		t.Fatalf("state %d, err %v; want failed with ErrTooLarge", w.state, w.err)
	}
	if st.Waiters != 0 || st.RejectedTooLarge != 1 {
		t.Fatalf("Stats = %+v, want no waiters and one rejection", st)
	}
	if !s.TryAcquire(2) {
		t.Fatal("TryAcquire(2) failed on an empty semaphore")
	}
}

// An over-release is caught even while weight released without mu is pending
// (in released) with a waiter that it lets through: a Release that takes mu
// checks before it absorbs that weight, which would grant it to the waiter
// and make the over-release look covered (found in review).
func TestOverReleaseCaughtWithReleasedPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(2, Config{})
		if err := s.Acquire(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		s.lock() // a holder of mu
		res := make(chan error, 1)
		go func() { res <- s.Acquire(context.Background(), 2) }()
		synctest.Wait() // pushed onto the inbox
		s.Release(2)    // mu held: the weight goes to released
		if s.released.Load() != 2 {
			t.Fatalf("released = %d, want 2", s.released.Load())
		}
		s.held.Store(false)
		s.mu.Unlock() // the holder, between its Unlock and its look at released
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("Release(2) with nothing held did not panic")
				}
			}()
			s.Release(2)
		}()
		s.ensureSeen() // the holder's look
		if err := <-res; err != nil {
			t.Fatalf("Acquire = %v, want nil", err)
		}
		if st := s.Stats(); st.InUse != 2 || st.Waiters != 0 {
			t.Fatalf("Stats = %+v, want 2 in use (the waiter's) and no waiters", st)
		}
		s.Release(2)
	})
}
