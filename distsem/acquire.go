package distsem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// acquire is Acquire (wait) or TryAcquire (!wait): the checks that need no
// I/O, then a loop of acquire calls. Each call grants, refuses or queues the
// token; a queued caller waits for a hand-off message, its next heartbeat,
// its context or Close (see attempt). *queued is set if the call queued, in
// Redis or on the local share.
func (s *Semaphore) acquire(ctx context.Context, n int64, wait bool, queued *bool) (*Permit, error) {
	s.mustBeMade()
	if n < 1 {
		panic("distsem: n < 1")
	}
	if n > s.limit {
		return nil, reject.New(ErrTooLarge, 0)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if s.fail.open() && s.fail.policy != breaker.FailClosed {
		return s.fallback(ctx, n, wait, queued, false)
	}
	if s.fail.recovering() {
		// Permits the local share granted during an outage are still held,
		// and Redis does not know them: a grant needs the share's room first,
		// so that the fleet keeps within its limit until they are released.
		if err := s.takeLocal(ctx, n, wait, queued); err != nil {
			return nil, err
		}
		p, err := s.acquireStore(ctx, n, wait, queued, true)
		if err != nil {
			s.fail.local.Release(n)
		}
		return p, err
	}
	return s.acquireStore(ctx, n, wait, queued, false)
}

// acquireStore is acquire's loop of acquire calls. taken is whether n was
// taken from the local share already (recovering from an outage): the
// permit is then counted on it, and a fallback uses it.
func (s *Semaphore) acquireStore(ctx context.Context, n int64, wait bool, queued *bool, taken bool) (*Permit, error) {
	tok := s.newToken()
	a := attempt{s: s, n: n, wait: wait, tok: tok, queued: queued, taken: taken}
	if wait {
		// Registered before the first call, so a hand-off notification that
		// arrives before that call returns is not lost.
		a.wake = s.register(tok)
		defer s.unregister(tok)
		defer a.stopTimer()
	}
	for {
		r, err := a.send(ctx)
		if err != nil {
			if a.rideOut(ctx, err) {
				continue
			}
			return a.failed(ctx, err)
		}
		p, err := a.answer(r)
		if err != errQueued {
			return p, err
		}
		if p, err = a.await(ctx, r); err != errQueued {
			return p, err
		}
	}
}

// errQueued is what attempt.answer and attempt.await return when the caller
// is still queued and must call again; it never leaves the package.
var errQueued = errors.New("distsem: queued")

// An attempt is one Acquire or TryAcquire in progress: its token and what its
// calls so far have told it.
type attempt struct {
	s    *Semaphore
	n    int64
	wait bool
	tok  any        // the token, boxed once for every call with it
	wake chan int64 // hand-off notifications (wait only)
	// taken is whether n was taken from the local share before the first
	// call (recovering from an outage; see acquire).
	taken bool
	// queued is set once a call left the token queued (or the fallback
	// queued on the local share).
	queued *bool

	start time.Time // send time of the call in flight or last made
	sent  bool      // a call with tok was sent: Redis may know tok
	calls int       // calls with tok sent: more than one means its release needs a tombstone
	errs  int       // store failures in a row ridden out (see rideOut)
	timer *time.Timer

	// queuedSent is the send time of the last call that left tok queued, and
	// queuedAt its Redis time (µs). A hand-off grant made after that call
	// lives at least min(WaiterTTL, Lease) after queuedSent, so that is the
	// local deadline of a permit claimed from a hand-off message; and a
	// message whose fence is not above queuedAt is stale: it is for an earlier
	// grant of tok that expired unseen before tok was queued again.
	queuedSent time.Time
	queuedAt   int64
}

// send makes one acquire call for the attempt.
func (a *attempt) send(ctx context.Context) ([]int64, error) {
	s := a.s
	a.start = time.Now()
	// Through the breaker with FailClosed: the policy is applied by failed, so
	// that a queued waiter can ride out a blip before falling back.
	// Numbers: lease, queue or only try, heartbeat TTL, the deadline (set by
	// callBefore) and the weight (see acquire.lua).
	n := s.nums(s.cfg.Lease.Milliseconds(), int64(b2i(a.wait)), s.cfg.WaiterTTL.Milliseconds(), 0, a.n)
	r, _, ran, err := s.callBefore(ctx, breaker.FailClosed, acquireScript, a.tok, n)
	a.sent = a.sent || ran
	if ran {
		a.calls++
	}
	if err == nil {
		a.errs = 0
	}
	return r, err
}

// rideOut reports whether a failed call should be made again: a queued
// waiter survives a blip (at most two failures in a row, not while the
// breaker is open), because the script is idempotent per token, so retrying
// keeps its place in the queue (the entry lives for WaiterTTL without a
// heartbeat). It sleeps before the retry; false if ctx ends meanwhile (failed
// then returns ctx.Err()).
func (a *attempt) rideOut(ctx context.Context, err error) bool {
	var open *breaker.OpenError
	if !a.wait || !a.sent || a.errs >= 2 || ctx.Err() != nil ||
		!errors.Is(err, breaker.ErrUnavailable) || errors.As(err, &open) {
		return false
	}
	a.errs++
	return sleepCtx(ctx, a.s.beat()/8)
}

// failed ends the attempt after a failed call: the token is released in the
// background if Redis may know it; the caller's own cancellation is returned
// as ctx.Err(); a store failure goes to the failure policy.
func (a *attempt) failed(ctx context.Context, err error) (*Permit, error) {
	s := a.s
	if a.sent {
		// The outcome is unknown: the call may still run in Redis.
		s.cleanup(a.tok)
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if errors.Is(err, breaker.ErrUnavailable) && s.fail.policy != breaker.FailClosed {
		return s.fallback(ctx, a.n, a.wait, a.queued, a.taken)
	}
	return nil, fmt.Errorf("distsem: acquire %q: %w", s.name, err)
}

// answer reads the reply of an acquire call: a grant (with the full Lease:
// the call made or extended it), a refusal, or errQueued.
func (a *attempt) answer(r []int64) (*Permit, error) {
	s := a.s
	switch r[0] {
	case stGranted:
		return a.granted(r[1], a.start, s.cfg.Lease)
	case stBusy:
		return nil, reject.New(ErrNoCapacity, s.retryAfter(a.n, r))
	case stTooHeavy:
		return nil, reject.New(ErrTooLarge, 0)
	case stTomb:
		// Only our own cleanup tombstones our token, and we never reuse a
		// token after cleanup: a broken invariant, not a caller error.
		return nil, fmt.Errorf("distsem: acquire %q: token released while acquiring", s.name)
	case stQueued:
		*a.queued = true
		a.queuedSent = a.start
		if len(r) > 6 {
			a.queuedAt = r[6]
		}
		return nil, errQueued
	}
	s.cleanup(a.tok)
	return nil, fmt.Errorf("distsem: acquire %q: unexpected status %d", s.name, r[0])
}

// granted returns the Permit of a grant with fence whose lease, at the
// store, lasts at least lease after sent. A grant seen after Close is given
// back: Close fails waiting callers with ErrClosed.
func (a *attempt) granted(fence int64, sent time.Time, lease time.Duration) (*Permit, error) {
	s := a.s
	if s.isClosed() {
		s.cleanup(a.tok)
		return nil, ErrClosed
	}
	return s.newPermit(a.tok, a.n, fence, sent, lease, a.calls > 1, a.taken), nil
}

// await waits, after a call that left the token queued (reply r), for a
// hand-off message, the next heartbeat, ctx or Close. It returns errQueued
// when the caller must call again.
func (a *attempt) await(ctx context.Context, r []int64) (*Permit, error) {
	s := a.s
	s.listen()
	// Heartbeat every beat. The head of the queue also calls just after the
	// earliest lease expires, so that a crashed holder's permit is reaped and
	// handed on at once rather than at the next heartbeat.
	next := s.beat()
	if len(r) > 5 && r[4] == 0 && r[5] >= 0 {
		next = min(next, time.Duration(r[5])*time.Millisecond+5*time.Millisecond)
	}
	if a.timer == nil {
		a.timer = time.NewTimer(next)
	} else {
		a.timer.Reset(next)
	}
	select {
	case <-ctx.Done():
		s.cleanup(a.tok)
		return nil, ctx.Err()
	case <-s.stopCtx.Done():
		s.cleanup(a.tok) // withdraws the entry, or gives back a grant racing Close
		return nil, ErrClosed
	case fence := <-a.wake:
		// Granted by hand-off after our last queued call: the grant lives
		// until that call's queue entry would have expired, and is claimed
		// for the full Lease by the permit's first renewal. With too little of
		// that left for a renewal call (the message came late), claim it now
		// with a call instead: it finds the token held and extends it.
		claim := min(s.cfg.WaiterTTL, s.cfg.Lease)
		if fence > 0 && fence > a.queuedAt && time.Until(a.queuedSent.Add(claim)) > s.callTimeout() {
			return a.granted(fence, a.queuedSent, claim)
		}
	case <-a.timer.C:
	}
	return nil, errQueued
}

func (a *attempt) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
	}
}

// beat is the waiter heartbeat period: a third of the shorter of WaiterTTL
// and Lease. A waiter granted by hand-off whose message was lost must call
// (and find itself held) before that grant runs out, or it would be reaped
// and queued again at the back, for ever under load.
func (s *Semaphore) beat() time.Duration {
	return min(s.cfg.WaiterTTL, s.cfg.Lease) / 3
}

// observeHold folds the hold time of a released permit into s.hold, an
// exponentially weighted mean (weight 1/8). Concurrent updates may lose one
// another's sample: it is an estimate.
func (s *Semaphore) observeHold(d time.Duration) {
	old := time.Duration(s.hold.Load())
	if old > 0 {
		d = old + (d-old)/8
	}
	s.hold.Store(int64(max(d, 1)))
}

// retryAfter estimates when a TryAcquire of w refused with the busy reply r
// ({2, 0, limit, used, waiters}) could succeed: the weight short (what is held,
// plus one per waiter queued ahead, plus w, minus the limit) divided by the
// rate at which held weight is released, taken as used / the mean hold time
// this Semaphore observed. An estimate from this process's own permits (0
// before it released any), never negative, at most an hour.
func (s *Semaphore) retryAfter(w int64, r []int64) time.Duration {
	hold := time.Duration(s.hold.Load())
	if hold <= 0 || len(r) < 5 {
		return 0
	}
	limit, used, waiters := r[2], r[3], r[4]
	short := max(used+waiters+w-limit, 1)
	d := float64(hold) * float64(short) / float64(max(used, 1))
	return time.Duration(min(d, float64(time.Hour)))
}
