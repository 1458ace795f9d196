// Package classq is the one set of rules for priority classes with reserved
// capacity, shared by bulkhead.Workers (job classes) and bulkhead's layers
// with criticality classes (request classes): who may start next, and who
// waits.
//
// A Set holds ordered classes (highest priority first), each with a FIFO
// queue of waiting entries, a weight it reserves, and the weight it runs;
// the Set has a limit on the weight run by all classes together. Its rules:
//
//   - A class has room for weight n while it runs less than its reservation
//     (running+n <= Reserved), or while, after starting n, the unused
//     reservations of every class are still free: total running + n + the
//     unused reservations (Reserved - running, where positive, over all
//     classes) <= limit. So a flood of a higher class cannot take a lower
//     class's reservation, nor a lower class a higher one's, and running plus
//     the unused reservations never exceeds the limit.
//   - The next to start is the first entry of the highest class that has a
//     queued entry and room: priority is strict between classes, FIFO within
//     one.
//
// A Set has no lock and no clock: its owner holds its own mutex around every
// call. The limit may change between calls (an adaptive gate's); a lower
// limit never takes anything back, it only delays the next start. Where it
// falls to the unused reservations or below (which Check forbids for the
// limit a Set starts with), the reservations still keep every other class
// out, except while nothing runs: then any class may start, so that
// reservations alone never leave the limit idle.
package classq

import "slices"

// A Class is one class's configuration and state.
type Class[E comparable] struct {
	Reserved int64 // weight kept for this class alone
	Queue    []E   // waiting entries, FIFO: Queue[0] is next
	Running  int64 // weight this class runs now
}

// A Set is a priority-ordered set of classes under one limit. The zero Set
// has no classes.
type Set[E comparable] struct {
	Classes []Class[E] // highest priority first
	Running int64      // weight run by all classes
}

// New returns a Set of classes that reserve reserved[i] each, highest
// priority first.
func New[E comparable](reserved []int64) *Set[E] {
	s := &Set[E]{Classes: make([]Class[E], len(reserved))}
	for i, r := range reserved {
		s.Classes[i].Reserved = r
	}
	return s
}

// unused returns the reserved weight no class is using.
func (s *Set[E]) unused() int64 {
	var u int64
	for i := range s.Classes {
		u += max(0, s.Classes[i].Reserved-s.Classes[i].Running)
	}
	return u
}

// Room reports whether class c may start weight n now under limit.
func (s *Set[E]) Room(c int, n, limit int64) bool {
	cl := &s.Classes[c]
	if cl.Running+n <= cl.Reserved {
		return true
	}
	// The unused reservations include c's own: starting n uses
	// min(n, c's unused) of it, which the sum below counts once either way.
	own := max(0, cl.Reserved-cl.Running)
	kept := s.unused() - min(n, own) // still reserved for others after starting n
	if kept >= limit {
		// The reservations alone take the whole limit (a moving limit fell
		// to them): they may not keep it idle, so any class may start while
		// nothing runs. Check makes this impossible for a fixed limit.
		return s.Running == 0
	}
	return s.Running+n+kept <= limit
}

// Next returns the highest class that has a queued entry and room for
// weight n under limit, or -1.
func (s *Set[E]) Next(n, limit int64) int {
	for c := range s.Classes {
		if len(s.Classes[c].Queue) > 0 && s.Room(c, n, limit) {
			return c
		}
	}
	return -1
}

// Ahead reports whether some class at or above c (priority c or higher)
// has a queued entry: an arrival of class c that finds one queues behind
// it rather than passing it.
func (s *Set[E]) Ahead(c int) bool {
	for i := 0; i <= c; i++ {
		if len(s.Classes[i].Queue) > 0 {
			return true
		}
	}
	return false
}

// Waiting returns how many entries are queued at or above class c.
func (s *Set[E]) Waiting(c int) int {
	n := 0
	for i := 0; i <= c; i++ {
		n += len(s.Classes[i].Queue)
	}
	return n
}

// Queued returns how many entries are queued in all classes.
func (s *Set[E]) Queued() int { return s.Waiting(len(s.Classes) - 1) }

// Push queues e at the back of class c.
func (s *Set[E]) Push(c int, e E) { s.Classes[c].Queue = append(s.Classes[c].Queue, e) }

// Pop removes and returns the first entry of class c, which must have one.
func (s *Set[E]) Pop(c int) E {
	q := s.Classes[c].Queue
	e := q[0]
	var zero E
	q[0] = zero
	s.Classes[c].Queue = q[1:]
	return e
}

// Remove removes e from class c's queue and reports whether it was there.
func (s *Set[E]) Remove(c int, e E) bool {
	q := s.Classes[c].Queue
	i := slices.Index(q, e)
	if i < 0 {
		return false
	}
	s.Classes[c].Queue = slices.Delete(q, i, i+1)
	return true
}

// Start records that class c starts weight n.
func (s *Set[E]) Start(c int, n int64) {
	s.Classes[c].Running += n
	s.Running += n
}

// Done records that class c gives back weight n.
func (s *Set[E]) Done(c int, n int64) {
	s.Classes[c].Running -= n
	s.Running -= n
}

// Check returns the first way reserved (the Reserved of each class, highest
// first, none negative) cannot work under limit, or "": the reservations add
// up to more than limit (class -1), or class could never start weight n
// because the others' reservations take the whole limit.
func Check(reserved []int64, n, limit int64) (class int, problem string) {
	var sum int64
	for _, r := range reserved {
		sum += r
	}
	if sum > limit {
		return -1, "Reserved adds up to more than limit"
	}
	for i, r := range reserved {
		if r < n && sum-r+n > limit {
			return i, "the Reserved of the other classes take the whole limit"
		}
	}
	return -1, ""
}
