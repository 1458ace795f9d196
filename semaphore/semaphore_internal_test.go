package semaphore

import (
	"errors"
	"testing"
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
