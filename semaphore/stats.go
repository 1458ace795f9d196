package semaphore

import "time"

const (
	reasonQueueFull = iota
	reasonMaxWait
	reasonDeadline
	reasonTooLarge
	numReasons
)

var reasons = [numReasons]error{ErrQueueFull, ErrMaxWait, ErrDeadline, ErrTooLarge}

// estimateLocked estimates how long until weight need, counting what is queued
// ahead plus the caller's own, could be granted: the part of it that is not free
// now, divided by the release rate observed while callers waited. 0 if there is
// no basis yet. Capped at an hour.
func (s *Weighted) estimateLocked(need int64) time.Duration {
	if s.rate <= 0 {
		return 0
	}
	short := need - max(s.limit-s.cur, 0)
	if short <= 0 {
		return 0
	}
	d := float64(short) / s.rate * float64(time.Second)
	if d > float64(time.Hour) {
		return time.Hour
	}
	return time.Duration(d)
}

// observeLocked records n released while callers wait, folding the throughput
// into the rate estimate once a limit's worth has been released.
func (s *Weighted) observeLocked(n int64) {
	s.obsReleased = satAdd(s.obsReleased, n)
	if s.obsReleased < max(s.limit, 1) {
		return
	}
	dt := time.Since(s.obsStart) // reads only the monotonic clock: half of time.Now
	if dt > 0 {
		sample := float64(s.obsReleased) / dt.Seconds()
		if s.rate == 0 {
			s.rate = sample
		} else {
			s.rate += (sample - s.rate) / 4
		}
	}
	s.obsStart, s.obsReleased = s.obsStart.Add(dt), 0
}

// Stats is a snapshot of a Weighted's state and running totals.
type Stats struct {
	Limit         int64 // current limit
	InUse         int64 // weight held; may exceed Limit after SetLimit shrinks it
	Waiting       int   // callers queued in Acquire
	WaitingWeight int64 // total weight they ask for, at most MaxLimit

	// Acquired counts grants by Acquire and TryAcquire (weight 0 included),
	// and Canceled the Acquire calls that returned ctx.Err(); a grant given
	// back because the context was done at the same moment counts in both.
	Acquired uint64
	Canceled uint64

	// Rejections by reason. Failed TryAcquire calls are not counted.
	RejectedQueueFull uint64
	RejectedMaxWait   uint64
	RejectedDeadline  uint64
	RejectedTooLarge  uint64

	// ReleaseRate is the observed release throughput while callers waited, in
	// weight per second (an exponentially weighted average), or 0 if not yet
	// observed. Retry-after estimates derive from it.
	ReleaseRate float64
}

// Stats returns a consistent snapshot of the semaphore.
func (s *Weighted) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Limit:             s.limit,
		InUse:             s.cur,
		Waiting:           s.waiting,
		WaitingWeight:     s.waitingWeight.int64(),
		Acquired:          s.acquired,
		Canceled:          s.canceled,
		RejectedQueueFull: s.rejected[reasonQueueFull],
		RejectedMaxWait:   s.rejected[reasonMaxWait],
		RejectedDeadline:  s.rejected[reasonDeadline],
		RejectedTooLarge:  s.rejected[reasonTooLarge],
		ReleaseRate:       s.rate,
	}
}
