package shaper

import (
	"sync/atomic"
	"time"
)

// An algo is one rate algorithm's pure arithmetic over its per-key state S, with the
// limit's constants precomputed. It is immutable; SetLimit swaps in a new one.
type algo[S any] interface {
	// decide makes the decision for cost n ≥ 0 at time now (Unix µs) on state s,
	// which is the zero S when fresh, and updates s. Every change it makes on a
	// denial or for n = 0 must leave future decisions unchanged (a refill, a window
	// roll). It never fails: costs above max() are refused before it is called.
	decide(s *S, fresh bool, now, n int64) (ok bool)
	// report computes the rest of the Decision from the state decide left and
	// the same now and n. It is separate so that Allow, which needs only ok,
	// skips its divisions.
	report(s *S, now, n int64, ok bool) (remaining, retryUS, resetUS int64)
	// idle reports whether s is equivalent to a fresh state at now, so the key can
	// be forgotten without changing any future decision.
	idle(s *S, now int64) bool
	// stamp returns, after an admission of n > 0 that left s, what a refund
	// needs to find it again (Decision.at): the window or entry time it was
	// recorded under, or 0 for an algorithm that needs nothing.
	stamp(s *S) int64
	// refund gives back, at time now, the cost n of an admission stamped at,
	// as exactly as the algorithm allows and never making s more permissive
	// than a fresh state (see Refund). It reports whether it gave anything
	// back.
	refund(s *S, now, n, at int64) bool
	// max is the largest cost ever admitted at once.
	max() int64
	limit() Limit
}

// Notes for a Redis store (shaperredis, same decisions): each algo's decide and
// report are the whole arithmetic, over int64 only, with every intermediate value
// ≤ 2^54 (Limit.validate bounds Burst·P and Count·P by 2^53), so a Lua script can
// run the same lines with now = TIME[1]·1e6 + TIME[2] and return {ok, remaining,
// retry µs, reset µs}; differential tests then compare Decisions field by field.
// Per-key state and a TTL that never forgets a live key:
//
//	GCRA:            SET tat rem last (3 doubles) TTL ⌈reset⌉ (tat ≤ now + τ/C)
//	token bucket:    SET "tokens last per"        TTL ⌈(K·P − tokens)/C⌉ + 1
//	fixed window:    SET "start count"            TTL start + P − now
//	sliding counter: SET "start prev cur"         TTL start + 2P − now
//	sliding log:     ZSET member=ts:n score=ts    TTL newest + P − now
//
// The GCRA and token bucket states carry units (rem in 1/C µs, tokens in 1/P
// tokens); SetLimit changes them, which decide handles by clamping rem (and the
// debt, with last) and by rescaling tokens with the stored per.

// core is the keyed, concurrency-safe part shared by every meter: a clock, the
// current algo (swapped atomically by SetLimit) and the sharded store.
type core[S any, A any, PA interface {
	*A
	algo[S]
}] struct {
	st       store[S] // first: the meters are allocated 64-byte aligned, and so are its shards
	a        atomic.Pointer[A]
	clock    clock
	tooLarge atomic.Uint64 // calls refused with ErrTooLarge
}

// MeterStats counts a local meter's decisions since it was made. Calls with
// n = 0 (peeks) are not counted.
type MeterStats struct {
	Allowed  uint64 // calls admitted
	Denied   uint64 // calls denied (a Decision with Allowed false)
	TooLarge uint64 // calls refused with ErrTooLarge (n > Burst)
	Refunded uint64 // admissions given back by Refund (still counted in Allowed)
}

// stats sums the shards' counters, taking each shard's lock in turn: the
// snapshot as a whole is not taken at one instant.
func (c *core[S, A, PA]) stats() MeterStats {
	st := MeterStats{TooLarge: c.tooLarge.Load()}
	for i := range c.st.shards {
		sh := &c.st.shards[i]
		sh.mu.Lock()
		st.Allowed += sh.allowed
		st.Denied += sh.denied
		st.Refunded += sh.refunded
		sh.mu.Unlock()
	}
	return st
}

// count records one decision of n > 0 in sh, whose lock is held.
func (sh *shard[S]) countLocked(ok bool) {
	if ok {
		sh.allowed++
	} else {
		sh.denied++
	}
}

func (c *core[S, A, PA]) init(a PA) {
	c.a.Store((*A)(a))
	c.clock = newClock()
	c.st.init()
}

func (c *core[S, A, PA]) allowN(key string, now, n int64) (Decision, error) {
	a := PA(c.a.Load())
	if a == nil {
		c.tooLarge.Add(1)
		return Decision{}, tooLarge()
	}
	if n < 0 {
		panic("shaper: negative cost")
	}
	if max := a.max(); n > max {
		c.tooLarge.Add(1)
		return Decision{Limit: a.limit()}, tooLarge()
	}
	if !validTime(now) {
		return Decision{Limit: a.limit()}, ErrTimeRange
	}
	sh, tag := c.st.locate(key)
	sh.mu.Lock()
	var (
		ok                          bool
		remaining, retryUS, resetUS int64
		at                          int64
	)
	if s := sh.lookupLocked(key, tag); s != nil && n == 0 {
		// A peek decides on a copy: it records nothing, not even its time.
		// (A copy of a sliding log's state shares its ring, which decide
		// only reads for n = 0.)
		cp := *s
		ok = a.decide(&cp, false, now, 0)
		remaining, retryUS, resetUS = a.report(&cp, now, 0, ok)
	} else if s != nil {
		ok = a.decide(s, false, now, n)
		remaining, retryUS, resetUS = a.report(s, now, n, ok)
		if ok {
			at = a.stamp(s)
		}
		sh.countLocked(ok)
	} else if n == 0 {
		var zero S
		ok = a.decide(&zero, true, now, 0)
		remaining, retryUS, resetUS = a.report(&zero, now, 0, ok)
	} else {
		s := c.insertLocked(sh, a, key, tag, now)
		ok = a.decide(s, true, now, n)
		remaining, retryUS, resetUS = a.report(s, now, n, ok)
		if ok {
			at = a.stamp(s)
		}
		sh.countLocked(ok)
	}
	sh.mu.Unlock()
	return Decision{
		Allowed:    ok,
		Remaining:  remaining,
		RetryAfter: micros(retryUS),
		ResetAfter: micros(resetUS),
		Limit:      a.limit(),
		at:         at,
	}, nil
}

// refund gives back the cost n of d, an admission for key, at time now. A
// denial, a peek (n = 0) and a key no longer stored (forgotten as idle, which
// is a fresh state) have nothing to give back.
func (c *core[S, A, PA]) refund(key string, now, n int64, d Decision) {
	if n < 0 {
		panic("shaper: negative cost")
	}
	a := PA(c.a.Load())
	if !d.Allowed || n == 0 || a == nil || n > a.max() || !validTime(now) {
		return
	}
	sh, tag := c.st.locate(key)
	sh.mu.Lock()
	if s := sh.lookupLocked(key, tag); s != nil {
		if a.refund(s, now, n, d.at) {
			sh.refunded++
		}
	}
	sh.mu.Unlock()
}

// allow1 is allowN for n = 1 when only the verdict is wanted.
func (c *core[S, A, PA]) allow1(key string) bool {
	a := PA(c.a.Load())
	if a == nil || a.max() < 1 {
		c.tooLarge.Add(1)
		return false
	}
	now := c.clock.nowUS()
	sh, tag := c.st.locate(key)
	sh.mu.Lock()
	var ok bool
	if s := sh.lookupLocked(key, tag); s != nil {
		ok = a.decide(s, false, now, 1)
	} else {
		ok = a.decide(c.insertLocked(sh, a, key, tag, now), true, now, 1)
	}
	sh.countLocked(ok)
	sh.mu.Unlock()
	return ok
}

// insertLocked adds a fresh state for key, which is absent, first rebuilding the
// shard's table without its idle keys if it is full.
func (c *core[S, A, PA]) insertLocked(sh *shard[S], a PA, key string, tag uint64, now int64) *S {
	if sh.fullLocked() {
		// Idle is judged at the earlier of now and the meter's clock: a caller
		// of AllowNAt with a time in the future must not make other keys'
		// live state look idle (dropping it would give back what they used).
		at := min(now, c.clock.nowUS())
		sh.rebuildLocked(func(s *S) bool { return a.idle(s, at) })
	}
	return sh.insertLocked(key, tag)
}

func (c *core[S, A, PA]) setLimit(a PA) { c.a.Store((*A)(a)) }

func (c *core[S, A, PA]) getLimit() Limit {
	if a := PA(c.a.Load()); a != nil {
		return a.limit()
	}
	return Limit{}
}

// The exported meters below share one method set:
//
//	Allow(key string) bool
//	AllowN(key string, n int64) (Decision, error)
//	AllowNAt(key string, t time.Time, n int64) (Decision, error)
//	SetLimit(lim Limit)
//	Limit() Limit
//
// AllowN and AllowNAt return an error only for a cost no call can ever get
// (ErrTooLarge) or, for AllowNAt, a time outside [0, 2^53) µs since the Unix
// epoch (ErrTimeRange); a denial is a Decision with Allowed false. A negative
// cost panics; a zero cost reports the state without recording anything, not
// even its time.
//
// Every denial's RetryAfter is exact for the meter's own decision function: the
// same call is admitted at the call's time plus RetryAfter and denied 1µs
// sooner, if nothing else is admitted meanwhile, including after a limit change
// and for a call dated before earlier ones (its wait is counted from its own
// time).

// Meter is a keyed GCRA meter (the generic cell rate algorithm, the leaky bucket
// used as a meter): each call is admitted or denied at once, never queued.
//
// Policy it answers: "at most Rate in the long run, with up to Burst at once after a
// quiet period; over that, reject now with an exact retry-after". Bursts are allowed
// up to Burst and then rejected; admitted traffic is spread at no more than Rate.
// The state per key is one theoretical arrival time (two int64s), so memory is O(1)
// per key and there is no window boundary to exploit. It admits the same sequences
// as [TokenBucket] with capacity Burst; prefer Meter, whose state is a single time
// that is trivially "idle" once it is in the past.
//
// Arithmetic (integer µs, exact; the Redis store runs the same lines in Lua):
//
//	P = Rate.Period in µs, C = Rate.Count, B = Burst; emission interval T = P/C µs.
//	Times are scaled by C so T·C = P is an integer; τ = B·P.
//	state: tat (µs), rem ∈ [0, C): the theoretical arrival time is tat + rem/C;
//	       last (µs): the time of the admission that wrote them.
//	rem = min(rem, C−1);  if (tat − last)·C + rem > τ: tat + rem/C = last + τ/C
//	d  = (tat − now)·C + rem, or 0 if tat < now
//	nd = d + n·P
//	nd > τ: deny;  retry = ⌈(nd−τ)/C⌉, remaining = max(τ−d, 0)/P, reset = ⌈d/C⌉
//	else:   allow; tat = now + ⌊nd/C⌋, rem = nd mod C, last = now,
//	        remaining = ⌊(τ−nd)/P⌋, reset = ⌈nd/C⌉
//
// An admission leaves a debt of at most τ after its time (tat − last ≤ τ/C), so
// the cap in the second line only acts after a limit change: the stored state is
// read as if its debt had been capped to the new burst when it was written. After
// SetLimit from PerHour(1) to PerSecond(10) (burst 10), a key that used its hour
// at t0 has used its whole new burst at t0: it is admitted again at t0 + 100 ms, as
// [TokenBucket] and x/time/rate do, and a denial before that says exactly when.
// The cap is a function of the stored state only, not of now, so every denial's
// retry is exact and stays true as time passes; a denial writes nothing.
//
// d is not capped otherwise: a call dated before the state's time (AllowNAt with
// an earlier time, or a Redis clock that steps back) owes the whole debt and is
// told the whole wait from its own time. Debt is never forgiven: whatever the order
// of the times, no half-open interval of length T holds more than Burst admitted. A call dated far
// ahead of the others is admitted and moves the key's time there: calls at the
// real time then wait for it, and are told so.
//
// The zero Meter rejects every call with ErrTooLarge; use [NewMeter]. A Meter is
// safe for concurrent use by multiple goroutines.
type Meter struct {
	c core[gcraState, gcraAlgo, *gcraAlgo]
}

// NewMeter returns a GCRA meter enforcing lim for every key. It panics if
// lim.Rate.Count ≤ 0, lim.Rate.Period < 1µs, lim.Burst < 0, or if Burst×Period or
// Count×Period exceeds 2^53 µs (about 285 years).
func NewMeter(lim Limit) *Meter {
	m := &Meter{}
	m.c.init(newGCRA("NewMeter", lim))
	return m
}

// Allow reports whether one event for key may happen now.
func (m *Meter) Allow(key string) bool { return m.c.allow1(key) }

// AllowN decides whether an event of cost n for key may happen now, and records
// it if so. It returns a *RejectError (ErrTooLarge) if n > Burst.
func (m *Meter) AllowN(key string, n int64) (Decision, error) {
	return m.c.allowN(key, m.c.clock.nowUS(), n)
}

// AllowNAt is AllowN at time t instead of now, for tests and for callers with their
// own clock. Time is taken at microsecond resolution. A t earlier than an earlier
// call's only makes the answer stricter: the meter never gives back. A t outside
// [0, 2^53) µs since the Unix epoch is refused with ErrTimeRange.
func (m *Meter) AllowNAt(key string, t time.Time, n int64) (Decision, error) {
	return m.c.allowN(key, t.UnixMicro(), n)
}

// SetLimit changes the limit for every key. Stored state is kept, and read as if
// each key's debt had been capped to the new burst when it was last admitted (see
// the arithmetic above). It panics on an invalid limit, as NewMeter does.
func (m *Meter) SetLimit(lim Limit) { m.c.setLimit(newGCRA("SetLimit", lim)) }

// Limit returns the current limit, with Burst made explicit.
func (m *Meter) Limit() Limit { return m.c.getLimit() }

// Stats returns the meter's decision counters. It takes each shard's lock in
// turn and allocates nothing.
func (m *Meter) Stats() MeterStats { return m.c.stats() }

type gcraState struct {
	tat  int64 // µs
	rem  int64 // in units of 1/C µs
	last int64 // µs: the time of the admission that wrote tat and rem
}

type gcraAlgo struct {
	lim       Limit
	p, c, b   int64
	tau       int64 // B·P
	tauMicros int64 // ⌊τ/C⌋ + 1: a (tat − now) at least this is a debt d > τ
	tUS       int64 // T = P/C when C divides P (most limits), else 0
	tauUS     int64 // B·T when tUS > 0
}

func newGCRA(what string, lim Limit) *gcraAlgo {
	p, c, b := lim.validate(what, false)
	lim.Burst = b // explicit in Decision.Limit and Limit()
	a := &gcraAlgo{lim: lim, p: p, c: c, b: b, tau: b * p, tauMicros: b*p/c + 1}
	if p%c == 0 {
		a.tUS, a.tauUS = p/c, b*(p/c)
	}
	return a
}

func (a *gcraAlgo) max() int64   { return a.b }
func (a *gcraAlgo) limit() Limit { return a.lim }

func (a *gcraAlgo) idle(s *gcraState, now int64) bool { return s.tat < now }

func (a *gcraAlgo) stamp(*gcraState) int64 { return 0 }

// refund moves the theoretical arrival time back by n·T, but never before now:
// a key's time in the past is a fresh key, and a refund never gives more.
func (a *gcraAlgo) refund(s *gcraState, now, n, _ int64) bool {
	tat, rem := a.arrival(s)
	if tat < now {
		return false // idle: nothing is owed any more
	}
	np := n * a.p // ≤ B·P
	tat, rem = tat-np/a.c, rem-np%a.c
	if rem < 0 {
		tat, rem = tat-1, rem+a.c
	}
	if tat < now {
		tat, rem = now, 0
	}
	s.tat, s.rem = tat, rem
	return true
}

// arrival returns the state's theoretical arrival time tat + rem/C under the
// current limit: as stored, but at most last + τ/C, as if the debt had been
// capped to the current burst when it was written. Without a limit change since
// that write it is the stored time (an admission leaves at most τ of debt).
func (a *gcraAlgo) arrival(s *gcraState) (tat, rem int64) {
	tat, rem = s.tat, min(s.rem, a.c-1)
	if dt := tat - s.last; dt >= a.tauMicros || dt*a.c+rem > a.tau {
		return s.last + a.tau/a.c, a.tau % a.c
	}
	return tat, rem
}

func (a *gcraAlgo) decide(s *gcraState, _ bool, now, n int64) bool {
	if a.tUS > 0 && s.rem == 0 {
		// The same arithmetic divided through by C, exact when T is a whole
		// number of µs and there is no fraction: no division on the hot path.
		nd := max(min(s.tat, s.last+a.tauUS)-now, 0) + n*a.tUS
		if nd > a.tauUS {
			return false
		}
		if n > 0 {
			s.tat, s.last = now+nd, now
		}
		return true
	}
	tat, rem := a.arrival(s)
	dt := tat - now
	if dt >= a.tauMicros {
		return false // d > τ
	}
	nd := n * a.p
	if dt >= 0 {
		nd += dt*a.c + rem
	}
	if nd > a.tau {
		return false
	}
	if n > 0 {
		s.tat, s.rem, s.last = now+nd/a.c, nd%a.c, now
	}
	return true
}

func (a *gcraAlgo) report(s *gcraState, now, n int64, ok bool) (remaining, retryUS, resetUS int64) {
	tat, rem := a.arrival(s) // after an allowed call, d is nd
	dt := tat - now
	switch {
	case dt < 0:
		return a.b, 0, 0
	case dt >= a.tauMicros:
		// d = dt·C + rem > τ: a call dated before the state's time. The
		// wait is dt + ⌈(rem + n·P − τ)/C⌉, computed without dt·C.
		return 0, dt + ceilDivSigned(rem+n*a.p-a.tau, a.c), dt + ceilDiv(rem, a.c)
	}
	d := dt*a.c + rem
	if !ok {
		retryUS = ceilDiv(d+n*a.p-a.tau, a.c)
	}
	return max(a.tau-d, 0) / a.p, retryUS, ceilDiv(d, a.c)
}

// ceilDivSigned returns ⌈a/b⌉ for any a, b > 0.
func ceilDivSigned(a, b int64) int64 {
	if a < 0 {
		return a / b // truncation toward zero is the ceiling for a < 0
	}
	return ceilDiv(a, b)
}
