package semaphore

import (
	"context"
	"math"
	"sync"
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// MaxLimit is the largest limit a Weighted can have: every non-negative int64,
// as in golang.org/x/sync/semaphore, where NewWeighted(math.MaxInt64) is the
// usual way to write "no limit". The arithmetic on weights never overflows:
// sums of weights that could exceed it (the weight queued, the weight released
// while callers wait) saturate or are kept in 128 bits.
const MaxLimit = math.MaxInt64

// Config configures a Weighted. The zero value is a valid Config: no bound on the
// number of waiters or on the time they wait beyond their context, early rejection
// of deadlines the queue cannot meet, and no Observer.
type Config struct {
	// MaxWaiters bounds the number of callers waiting in Acquire. A call that would
	// wait while MaxWaiters callers are already waiting is rejected at once with
	// ErrQueueFull. If zero, the queue is unbounded. If negative, no caller ever
	// waits: Acquire fails with ErrQueueFull whenever it cannot be granted at once.
	MaxWaiters int

	// MaxWait bounds how long a call waits in Acquire; after it the call fails with
	// ErrMaxWait. If zero, a call waits until its context is done. If negative, no
	// call waits: Acquire fails at once with ErrMaxWait whenever it cannot be
	// granted at once.
	MaxWait time.Duration

	// NoEarlyReject disables rejecting at once a call whose estimated wait ends
	// after its context deadline (ErrDeadline) or after MaxWait (ErrMaxWait). The
	// estimate comes from the throughput observed while callers waited; with
	// NoEarlyReject such calls queue and fail only when the time is actually up.
	// Default false: fail fast rather than pile up.
	NoEarlyReject bool

	// Observer, if non-nil, is told of every grant (KindAdmit, with the wait:
	// 0 for a grant without queueing, for which the clock is not read), every
	// Release (KindRelease; the hold time is not measured, so Duration is 0),
	// every rejection of an Acquire (KindReject, with the reason, the wait
	// and the *RejectError) and every Acquire that returned ctx.Err()
	// (KindCancel, with the wait). A TryAcquire or TryHold that finds no room
	// is not an event (nor counted in Stats): it is a probe, whose caller
	// reports the outcome.
	// Events have Component floodgate.ComponentSemaphore. Observe is called
	// without any lock held and may call back into the Weighted. If it panics
	// on a KindAdmit, the weight is released before the panic goes on to the
	// caller, so an Observer cannot leak weight.
	Observer floodgate.Observer
}

// Weighted is a weighted semaphore with a FIFO queue: the limit is shared by
// callers that each hold some weight, and a caller that cannot be granted waits
// behind those that came before it. Use New or NewWeighted; a zero Weighted has
// limit 0: it grants only weight 0 and rejects every other Acquire with
// ErrTooLarge. A Weighted is safe for simultaneous use by multiple goroutines.
type Weighted struct {
	cfg     Config                  // read-only after New
	release func(_ string, n int64) // Release, for Hold; nil in a zero Weighted
	pool    sync.Pool               // of *waiter; see getWaiter

	mu sync.Mutex
	// mu guards:
	limit   int64
	cur     int64   // weight held; may exceed limit after SetLimit shrinks it
	head    *waiter // the queue, oldest first, linked through prev and next
	tail    *waiter
	waiting int
	// waitingWeight is the weight the queue asks for: the sum of many weights
	// near MaxLimit does not fit in an int64.
	waitingWeight weightSum
	acquired      uint64
	canceled      uint64
	rejected      [numReasons]uint64
	// Throughput observed while callers wait, for estimates: obsReleased weight
	// released since obsStart, which is the zero time exactly when the queue is
	// empty; rate is an EWMA in weight per second, 0 when unknown.
	obsStart    time.Time
	obsReleased int64
	rate        float64
}

// New returns a Weighted with the given limit. It panics if limit is negative.
func New(limit int64, cfg Config) *Weighted {
	checkLimit(limit)
	s := &Weighted{cfg: cfg, limit: limit}
	s.release = func(_ string, n int64) { s.Release(n) }
	return s
}

// NewWeighted returns a Weighted with limit n and the zero Config: a drop-in
// replacement for golang.org/x/sync/semaphore.NewWeighted. The one difference
// callers can see is that an Acquire of more than n fails at once with
// ErrTooLarge, where x/sync waits until the context is done.
func NewWeighted(n int64) *Weighted { return New(n, Config{}) }

func checkLimit(limit int64) {
	if limit < 0 {
		panic("semaphore: negative limit")
	}
}

func checkWeight(n int64) {
	if n < 0 {
		panic("semaphore: negative weight")
	}
}

// fitsLocked reports whether n can be granted beside the weight in use, without
// overflow (limit-cur cannot overflow: both are non-negative).
func (s *Weighted) fitsLocked(n int64) bool { return n <= s.limit-s.cur }

// Acquire acquires weight n, waiting behind earlier callers until it is granted,
// ctx is done, or Config.MaxWait passes. On success it returns nil. On failure it
// leaves the semaphore unchanged and returns:
//   - ctx.Err() if ctx is done, even when weight is free (it is checked first);
//   - a *RejectError matching ErrTooLarge at once if n exceeds the limit;
//   - a *RejectError matching ErrQueueFull at once if Config.MaxWaiters callers
//     are already waiting;
//   - a *RejectError matching ErrDeadline or ErrMaxWait at once if the estimated
//     wait ends after ctx's deadline or after MaxWait (see Config.NoEarlyReject),
//     or matching ErrMaxWait after waiting MaxWait;
//   - a *RejectError matching ErrTooLarge while waiting, if SetLimit shrinks the
//     limit below n.
//
// If the grant races with ctx being done, the weight is given back and ctx.Err()
// returned. A weight of 0 is allowed, as in x/sync: it takes nothing, but it
// still waits behind the callers queued before it (and, while SetLimit has left
// more weight in use than the limit, until the weight in use is within it).
// Acquire panics if n < 0.
func (s *Weighted) Acquire(ctx context.Context, n int64) error {
	checkWeight(n)
	done := ctx.Done()
	s.mu.Lock()
	if done != nil {
		select {
		case <-done:
			// Checked under mu (x/sync #63615): ctx done before this call
			// got the lock fails it, even if the weight is free.
			s.canceled++
			s.mu.Unlock()
			if s.cfg.Observer != nil {
				report(s.cfg.Observer, floodgate.KindCancel, n, 0)
			}
			return ctx.Err()
		default:
		}
	}
	if s.head == nil && s.fitsLocked(n) {
		s.cur += n
		s.acquired++
		s.mu.Unlock()
		if s.cfg.Observer != nil { // checked here so the hot path makes no call
			s.admitted(n, 0)
		}
		return nil
	}
	return s.acquireSlowLocked(ctx, done, n)
}

// acquireSlowLocked is Acquire for a call that cannot be granted at once:
// it rejects the call or queues it and waits. mu is held on entry and released
// before it returns.
func (s *Weighted) acquireSlowLocked(ctx context.Context, done <-chan struct{}, n int64) error {
	if n > s.limit {
		return s.rejectLocked(n, reasonTooLarge, 0, 0)
	}
	// n must wait. Decide whether it may, before changing anything.
	if m := s.cfg.MaxWaiters; m < 0 || (m > 0 && s.waiting >= m) {
		return s.rejectLocked(n, reasonQueueFull, s.estimateLocked(satAdd(s.waitingWeight.int64(), n)), 0)
	}
	if s.cfg.MaxWait < 0 {
		return s.rejectLocked(n, reasonMaxWait, s.estimateLocked(satAdd(s.waitingWeight.int64(), n)), 0)
	}
	var now time.Time
	if !s.cfg.NoEarlyReject && s.rate > 0 {
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline || s.cfg.MaxWait > 0 { // else there is nothing to estimate against
			est := s.estimateLocked(satAdd(s.waitingWeight.int64(), n))
			if hasDeadline {
				now = time.Now()
				if now.Add(est).After(dl) {
					return s.rejectLocked(n, reasonDeadline, est, 0)
				}
			}
			if s.cfg.MaxWait > 0 && est > s.cfg.MaxWait {
				return s.rejectLocked(n, reasonMaxWait, est, 0)
			}
		}
	}
	if s.head == nil || s.cfg.Observer != nil {
		if now.IsZero() {
			now = time.Now()
		}
	}
	w := s.getWaiter(n)
	s.pushLocked(w, now)
	s.mu.Unlock()
	return s.wait(ctx, done, w, now)
}

// wait blocks a queued waiter until it is granted or failed, ctx is done, or
// MaxWait passes. start is when it was queued if Config.Observer is set.
func (s *Weighted) wait(ctx context.Context, done <-chan struct{}, w *waiter, start time.Time) error {
	var timeout <-chan time.Time
	if s.cfg.MaxWait > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(s.cfg.MaxWait)
		} else {
			w.timer.Reset(s.cfg.MaxWait)
		}
		timeout = w.timer.C
	}
	if done == nil && timeout == nil { // a plain receive is cheaper than a select
		<-w.ready
		return s.woken(ctx, done, w, start)
	}
	select {
	case <-w.ready:
		return s.woken(ctx, done, w, start)
	case <-done:
		return s.abandon(ctx, w, -1, start)
	case <-timeout:
		return s.abandon(ctx, w, reasonMaxWait, start)
	}
}

// woken finishes an Acquire whose waiter received from ready: granted, or
// failed by SetLimit.
func (s *Weighted) woken(ctx context.Context, done <-chan struct{}, w *waiter, start time.Time) error {
	n, err := w.n, w.err
	s.putWaiter(w)
	if err != nil {
		if s.cfg.Observer != nil {
			s.reportReject(n, err, time.Since(start))
		}
		return err
	}
	if done != nil {
		select {
		case <-done:
			// The grant raced with cancellation: give it back (x/sync's
			// ordering). The caller never saw it: a KindCancel, no grant.
			s.mu.Lock()
			s.canceled++
			s.releaseLocked(n)
			s.mu.Unlock()
			s.canceledAfter(n, start)
			return ctx.Err()
		default:
		}
	}
	s.waited(n, start)
	return nil
}

// waited reports the grant of n to a call queued at start.
func (s *Weighted) waited(n int64, start time.Time) {
	if s.cfg.Observer != nil {
		s.admitted(n, time.Since(start))
	}
}

// abandon handles a waiter whose context is done (reason < 0) or whose MaxWait
// passed (reason == reasonMaxWait).
func (s *Weighted) abandon(ctx context.Context, w *waiter, reason int, start time.Time) error {
	s.mu.Lock()
	n := w.n
	switch w.state {
	case granted:
		<-w.ready // sent under mu, so already there
		if reason >= 0 {
			// MaxWait passed as the grant came in: keep the grant.
			s.mu.Unlock()
			s.putWaiter(w)
			s.waited(n, start)
			return nil
		}
		// Granted as ctx was done: give the weight back (x/sync's ordering).
		// The caller never saw this grant: a KindCancel, no grant.
		s.canceled++
		s.releaseLocked(n)
		s.mu.Unlock()
		s.putWaiter(w)
		s.canceledAfter(n, start)
		return ctx.Err()
	case failed:
		<-w.ready
		s.mu.Unlock()
		return s.woken(ctx, nil, w, start)
	}
	// Still queued: remove it, and let those behind it go if they now fit
	// (x/sync #37852: a cancelled head must wake the ones behind it).
	var ahead int64
	for p := w.prev; p != nil; p = p.prev {
		ahead = satAdd(ahead, p.n)
	}
	s.removeLocked(w)
	s.grantLocked()
	if reason < 0 {
		s.canceled++
		s.mu.Unlock()
		s.putWaiter(w)
		s.canceledAfter(n, start)
		return ctx.Err()
	}
	delay := s.estimateLocked(satAdd(ahead, n))
	s.putWaiter(w)
	var waited time.Duration
	if s.cfg.Observer != nil {
		waited = time.Since(start)
	}
	return s.rejectLocked(n, reason, delay, waited)
}

// rejectLocked counts a rejection of n after waiting waited, unlocks mu,
// reports it and returns the error.
func (s *Weighted) rejectLocked(n int64, reason int, delay, waited time.Duration) error {
	s.rejected[reason]++
	s.mu.Unlock()
	err := reject.New(reasons[reason], delay)
	if s.cfg.Observer != nil {
		s.reportReject(n, err, waited)
	}
	return err
}

// TryAcquire acquires weight n without waiting. It reports whether it did; on
// failure the semaphore is unchanged. Like x/sync/semaphore, it fails while
// other callers are queued, so it cannot overtake them. A weight of 0 is
// allowed. It panics if n < 0.
func (s *Weighted) TryAcquire(n int64) bool {
	checkWeight(n)
	s.mu.Lock()
	ok := s.tryAcquireLocked(n)
	s.mu.Unlock()
	if ok {
		s.acquiredObserved(n)
	}
	return ok
}

// tryAcquireLocked takes n if it is free and no one is queued.
func (s *Weighted) tryAcquireLocked(n int64) bool {
	if s.head != nil || !s.fitsLocked(n) {
		return false
	}
	s.cur += n
	s.acquired++
	return true
}

// acquiredObserved reports a grant without a wait to the Observer, if any.
func (s *Weighted) acquiredObserved(n int64) {
	if s.cfg.Observer != nil {
		s.admitted(n, 0)
	}
}

// Release releases weight n, granting queued callers in order while the head of
// the queue fits. A weight of 0 is allowed and changes nothing. It panics if
// n < 0 or if more weight is released than is held in all (as x/sync/semaphore,
// it cannot tell whose weight is released: a caller releasing more than it
// holds, while others hold enough, frees theirs, and the panic comes at a later
// Release). After a panic the semaphore is unchanged.
func (s *Weighted) Release(n int64) {
	checkWeight(n)
	s.mu.Lock()
	if s.cur < n {
		s.mu.Unlock()
		panic("semaphore: released more than held")
	}
	s.releaseLocked(n)
	s.mu.Unlock()
	if s.cfg.Observer != nil {
		report(s.cfg.Observer, floodgate.KindRelease, n, 0)
	}
}

// releaseLocked takes n, which is held, off the weight in use and grants the
// queued callers that now fit.
func (s *Weighted) releaseLocked(n int64) {
	s.cur -= n
	if s.head != nil {
		s.observeLocked(n)
		s.grantLocked()
	}
}

// SetLimit sets the limit. Growing grants queued callers that now fit.
// Shrinking never revokes weight already held: the weight in use may stay above
// the new limit until enough is released, and no new weight is granted until
// it fits. Queued callers asking for more than the new limit fail at once with
// ErrTooLarge. SetLimit panics if limit is negative.
func (s *Weighted) SetLimit(limit int64) {
	checkLimit(limit)
	s.mu.Lock()
	s.limit = limit
	var tooLarge error
	for w := s.head; w != nil; {
		next := w.next
		if w.n > limit {
			if tooLarge == nil {
				tooLarge = reject.New(ErrTooLarge, 0)
			}
			s.removeLocked(w)
			s.rejected[reasonTooLarge]++
			w.state, w.err = failed, tooLarge // the waiter reports it itself
			w.ready <- struct{}{}
		}
		w = next
	}
	s.grantLocked()
	s.mu.Unlock()
}

// Do acquires weight n, calls fn, and releases the weight when fn returns or
// panics, so the weight cannot leak. It returns Acquire's error without calling
// fn, or fn's error. fn receives ctx.
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if err := s.Acquire(ctx, n); err != nil {
		return err
	}
	defer s.Release(n)
	return fn(ctx)
}
