package semaphore

import (
	"math/bits"
	"time"
)

type waiterState uint8

const (
	queued waiterState = iota
	granted
	failed
)

// A waiter is queued by Acquire. Waiters are pooled with their channel and
// timer, so a blocked Acquire allocates nothing.
type waiter struct {
	n          int64
	prev, next *waiter
	// ready receives one value, sent under mu, when the waiter is granted or
	// failed. It is empty whenever the waiter is in the pool.
	ready chan struct{}
	timer *time.Timer // for Config.MaxWait; created on first use
	// Set under mu before the send on ready:
	state waiterState
	err   error
}

// getWaiter takes a waiter from s's own pool. The pool is per semaphore, not
// global: channels and timers belong to the testing/synctest bubble that made
// them, so sharing them between semaphores could carry one into another bubble.
func (s *Weighted) getWaiter(n int64) *waiter {
	w, ok := s.pool.Get().(*waiter)
	if !ok {
		w = &waiter{ready: make(chan struct{}, 1)}
	}
	w.n, w.state, w.err = n, queued, nil
	return w
}

// putWaiter returns w, no longer queued and with ready drained, to the pool.
func (s *Weighted) putWaiter(w *waiter) {
	if w.timer != nil {
		w.timer.Stop() // Go ≥1.23: no stale value can be received after Stop
	}
	w.err = nil
	s.pool.Put(w)
}

// grantLocked grants queued callers in FIFO order while the head fits. Strict
// FIFO, as x/sync: a heavy head blocks lighter callers behind it, which may
// leave weight idle but never starves a heavy caller (with N readers taking 1
// each and a writer taking N, letting readers pass would starve the writer).
func (s *Weighted) grantLocked() {
	for w := s.head; w != nil && s.fitsLocked(w.n); w = s.head {
		s.cur += w.n
		s.acquired++
		s.removeLocked(w)
		w.state = granted
		w.ready <- struct{}{} // never blocks: buffered, and empty while queued
	}
}

// pushLocked appends w to the queue; now is the current time if the queue is
// empty.
func (s *Weighted) pushLocked(w *waiter, now time.Time) {
	w.prev, w.next = s.tail, nil
	if s.tail == nil {
		s.head = w
		s.obsStart, s.obsReleased = now, 0
	} else {
		s.tail.next = w
	}
	s.tail = w
	s.waiting++
	s.waitingWeight.add(w.n)
}

func (s *Weighted) removeLocked(w *waiter) {
	if w.prev == nil {
		s.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		s.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	s.waiting--
	s.waitingWeight.sub(w.n)
	if s.head == nil {
		s.obsStart = time.Time{}
	}
}

// weightSum is an exact sum of non-negative weights in 128 bits: 2⁶⁴ weights
// of MaxLimit each fit, and no process queues that many callers.
type weightSum struct{ hi, lo uint64 }

func (w *weightSum) add(n int64) {
	var carry uint64
	w.lo, carry = bits.Add64(w.lo, uint64(n), 0)
	w.hi += carry
}

func (w *weightSum) sub(n int64) {
	var borrow uint64
	w.lo, borrow = bits.Sub64(w.lo, uint64(n), 0)
	w.hi -= borrow
}

// int64 returns the sum, or MaxLimit if it is larger.
func (w weightSum) int64() int64 {
	if w.hi != 0 || w.lo > MaxLimit {
		return MaxLimit
	}
	return int64(w.lo)
}

// satAdd returns a+b for non-negative a and b, or MaxLimit if that is larger.
func satAdd(a, b int64) int64 {
	if a > MaxLimit-b {
		return MaxLimit
	}
	return a + b
}
