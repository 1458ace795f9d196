package semaphore

import "testing"

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
