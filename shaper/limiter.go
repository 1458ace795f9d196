package shaper

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter is a single GCRA meter without keys: for a process with one limit (the
// x/time/rate use case) it makes exactly the decisions a [Meter] makes for one key,
// with the same arithmetic, the same [Decision] and the same *[RejectError], but
// without hashing a key or taking a shard lock.
//
// Policy it answers: the same as [Meter]'s, for one stream of events.
//
// Concurrency: when the limit's emission interval T = Period/Count is a whole
// number of microseconds (PerSecond(n) for n dividing 10^6, PerMinute(n) for n
// dividing 6·10^7, Every(d) for whole µs d: most limits), the whole state is one
// theoretical arrival time in µs, held in one atomic int64 and updated by
// compare-and-swap: Allow is lock-free, a failed swap retries with the new state,
// and no call ever fails because of contention. A fractional interval (3/s is
// 333333⅓ µs) needs the fraction too, a second int64 (see [Meter]'s arithmetic),
// and every call under such a limit takes a small mutex. While the state has a
// non-zero fraction it lives behind that mutex and the atomic word holds a marker
// that sends every call there; a decision that leaves the fraction at zero puts the
// state back in the word. Both paths run the same decide lines as Meter.
//
// The zero Limiter rejects every call with ErrTooLarge; use [NewLimiter]. A
// Limiter is safe for concurrent use by multiple goroutines.
type Limiter struct {
	a     atomic.Pointer[gcraAlgo]
	tat   atomic.Int64 // the state's tat when its fraction rem is zero, else fractional
	clock clock

	mu sync.Mutex
	// mu guards:
	s gcraState // the state while tat holds fractional
}

// fractional marks Limiter.tat while the state has a fraction and lives in
// Limiter.s. No time a meter computes is that far in the past.
const fractional = math.MinInt64

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
// than an earlier call's only makes the answer stricter.
func (l *Limiter) AllowNAt(t time.Time, n int64) (Decision, error) {
	return l.allowN(t.UnixMicro(), n)
}

// SetLimit changes the limit. The state is kept and clamped, as [Meter.SetLimit]
// does. It panics on an invalid limit, as NewLimiter does.
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
	if a == nil {
		return false
	}
	if a.tUS > 0 {
		// gcraAlgo.decide's division-free branch for n = 1, inlined.
		for {
			tat := l.tat.Load()
			if tat == fractional {
				break
			}
			nd := min(max(tat-now, 0), a.tauUS) + a.tUS
			if nd > a.tauUS {
				return false
			}
			if l.tat.CompareAndSwap(tat, now+nd) {
				return true
			}
		}
	}
	_, ok := l.decideLocked(a, now, 1)
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
	var (
		s  gcraState
		ok bool
	)
	for {
		tat := l.tat.Load()
		if a.tUS == 0 || tat == fractional {
			s, ok = l.decideLocked(a, now, n)
			break
		}
		s = gcraState{tat: tat}
		ok = a.decide(&s, false, now, n)
		if !ok || n == 0 || l.tat.CompareAndSwap(tat, s.tat) {
			break
		}
	}
	remaining, retryUS, resetUS := a.report(&s, now, n, ok)
	return Decision{
		Allowed:    ok,
		Remaining:  remaining,
		RetryAfter: micros(retryUS),
		ResetAfter: micros(resetUS),
		Limit:      a.lim,
	}, nil
}

// decideLocked decides under mu, for a fractional interval or state. It takes the
// state out of the atomic word (so that no lock-free call can change it meanwhile),
// decides, and puts it back if its fraction is zero. It returns the state after
// the decision, for report.
func (l *Limiter) decideLocked(a *gcraAlgo, now, n int64) (gcraState, bool) {
	l.mu.Lock()
	if tat := l.tat.Swap(fractional); tat != fractional {
		l.s = gcraState{tat: tat}
	}
	ok := a.decide(&l.s, false, now, n)
	s := l.s
	if s.rem == 0 {
		l.tat.Store(s.tat)
	}
	l.mu.Unlock()
	return s, ok
}
