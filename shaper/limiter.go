package shaper

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter is a single GCRA meter without keys: for a process with one limit (the
// x/time/rate use case) it makes exactly the decisions a GCRA [Meter] ([NewMeter])
// makes for one key,
// with the same arithmetic, the same [Decision] and the same *[RejectError], but
// without hashing a key or taking a shard lock.
//
// Policy it answers: the same as [NewMeter]'s, for one stream of events.
//
// Concurrency: the state (three int64s, see [NewMeter]'s arithmetic) is behind one
// small mutex, held only for the decision's arithmetic.
//
// The zero Limiter rejects every call with ErrTooLarge; use [NewLimiter]. A
// Limiter is safe for concurrent use by multiple goroutines.
type Limiter struct {
	a     atomic.Pointer[gcraAlgo]
	clock clock

	mu sync.Mutex
	// mu guards:
	s gcraState
}

// NewLimiter returns a GCRA limiter enforcing lim. It panics on an invalid limit, as
// [NewMeter] does.
func NewLimiter(lim Limit) *Limiter {
	l := &Limiter{clock: newClock()}
	l.a.Store(newGCRA("NewLimiter", lim))
	return l
}

// Allow reports whether one event may happen now, and records it if so.
func (l *Limiter) Allow() bool { return l.allowAt(l.clock.nowUS()) }

// AllowN decides whether an event of cost n may happen now, and records it if so.
// It returns a *RejectError (ErrTooLarge) if n > Burst; a negative n panics, and
// n = 0 reports the state without recording anything.
func (l *Limiter) AllowN(n int64) (Decision, error) { return l.allowN(l.clock.nowUS(), n) }

// AllowNAt is AllowN at time t (microsecond resolution) instead of now. A t earlier
// than an earlier call's only makes the answer stricter; a t outside [0, 2^53) µs
// since the Unix epoch is refused with ErrTimeRange.
func (l *Limiter) AllowNAt(t time.Time, n int64) (Decision, error) {
	return l.allowN(t.UnixMicro(), n)
}

// SetLimit changes the limit. The state is kept and read under the new limit as
// a GCRA [Meter.SetLimit] does. It panics on an invalid limit, as NewLimiter does.
func (l *Limiter) SetLimit(lim Limit) { l.a.Store(newGCRA("SetLimit", lim)) }

// Limit returns the current limit, with Burst made explicit.
func (l *Limiter) Limit() Limit {
	if a := l.a.Load(); a != nil {
		return a.lim
	}
	return Limit{}
}

// allowAt is Allow at now (Unix µs).
func (l *Limiter) allowAt(now int64) bool {
	a := l.a.Load()
	if a == nil || a.b < 1 {
		return false
	}
	l.mu.Lock()
	ok := a.decide(&l.s, false, now, 1)
	l.mu.Unlock()
	return ok
}

func (l *Limiter) allowN(now, n int64) (Decision, error) {
	a := l.a.Load()
	if a == nil {
		return Decision{}, tooLarge()
	}
	if n < 0 {
		panic("shaper: negative cost")
	}
	if n > a.b {
		return Decision{Limit: a.lim}, tooLarge()
	}
	if !validTime(now) {
		return Decision{Limit: a.lim}, ErrTimeRange
	}
	l.mu.Lock()
	s := l.s
	ok := a.decide(&s, false, now, n)
	if n > 0 {
		l.s = s // a peek records nothing
	}
	l.mu.Unlock()
	remaining, retryUS, resetUS := a.report(&s, now, n, ok)
	return Decision{
		Allowed:    ok,
		Remaining:  remaining,
		RetryAfter: micros(retryUS),
		ResetAfter: micros(resetUS),
		Limit:      a.lim,
	}, nil
}

// refund gives back the cost n of d, an admission, at now (see Meter.Refund).
func (l *Limiter) refund(now, n int64, d Decision) {
	if n < 0 {
		panic("shaper: negative cost")
	}
	a := l.a.Load()
	if !d.Allowed || n == 0 || a == nil || n > a.b || !validTime(now) {
		return
	}
	l.mu.Lock()
	a.refund(&l.s, now, n, 0)
	l.mu.Unlock()
}

// Admit decides whether n may be spent now, as AllowN does, and returns a
// denial as an error: see [Meter.Admit]. The key is ignored: a Limiter has one
// stream of events, so it can stand in wherever a keyed meter is expected for a
// single global limit.
func (l *Limiter) Admit(ctx context.Context, _ string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(l.AllowN(n))
}

// Refund gives back the cost n of d, an admission, as [Meter.Refund] does
// (the key is ignored, as in Admit).
func (l *Limiter) Refund(_ context.Context, _ string, n int64, d Decision) error {
	l.refund(l.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now.
func (l *Limiter) RefundAt(t time.Time, n int64, d Decision) { l.refund(t.UnixMicro(), n, d) }
