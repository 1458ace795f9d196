package shaper

import (
	"context"
	"sync/atomic"
	"time"
)

// Meter is a keyed rate meter: each call for a key is admitted or denied at
// once, never queued, with an exact retry-after. One Meter serves millions of
// keys (tenants, API keys, routes), with state created on first use and
// forgotten once it is idle again. The algorithm is chosen by the constructor,
// each of which documents the policy it answers and its arithmetic:
//
//   - [NewMeter]: GCRA (the generic cell rate algorithm, the leaky bucket used
//     as a meter), the default: Rate in the long run, Burst at once, exact,
//     O(1) memory per key.
//   - [NewTokenBucket]: a token bucket, which admits exactly what GCRA
//     admits, in token vocabulary.
//   - [NewFixedWindow]: Count per window aligned to the epoch; up to 2× Count
//     around a boundary.
//   - [NewSlidingLog]: never more than Count in any rolling window; O(Count)
//     memory per key.
//   - [NewSlidingCounter]: about Count per rolling window in O(1) memory (a
//     weighted estimate).
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
//
// A Meter has no configuration and so no Observer: its decisions cost tens of
// nanoseconds and are observed through the consumer that asks them (bulkhead's
// Observer) or through [Meter.Stats].
//
// The zero Meter rejects every call with ErrTooLarge; use a constructor. A
// Meter is safe for concurrent use by multiple goroutines.
type Meter struct {
	c     meterCore // nil for the zero Meter
	clock *clock    // c's clock

	// c again, typed, for the decision methods: a direct call of a generic
	// method passes its dictionary statically, where a call through c goes
	// through a wrapper that copies the 80-byte result once more (about 10%
	// of a decision). Exactly one is set, the one c holds.
	gcra *core[gcraState, gcraAlgo, *gcraAlgo]
	tb   *core[tbState, tbAlgo, *tbAlgo]
	fw   *core[fwState, fwAlgo, *fwAlgo]
	sc   *core[scState, scAlgo, *scAlgo]
	sl   *core[slState, slAlgo, *slAlgo]
}

// meterCore is one algorithm's keyed store and decisions: a *core[S, A, PA].
type meterCore interface {
	refund(key string, now, n int64, d Decision)
	setLimit(lim Limit)
	getLimit() Limit
	stats() MeterStats
}

// Allow reports whether one event for key may happen now, and records it if so.
func (m *Meter) Allow(key string) bool {
	switch {
	case m.gcra != nil:
		return m.gcra.allow1(key)
	case m.tb != nil:
		return m.tb.allow1(key)
	case m.fw != nil:
		return m.fw.allow1(key)
	case m.sc != nil:
		return m.sc.allow1(key)
	case m.sl != nil:
		return m.sl.allow1(key)
	}
	return false
}

// AllowN decides whether an event of cost n for key may happen now, and records
// it if so. It returns a *RejectError (ErrTooLarge) if n exceeds the most the
// meter ever admits at once (the burst, capacity or window count).
func (m *Meter) AllowN(key string, n int64) (Decision, error) {
	if m.clock == nil {
		return zeroMeter(n)
	}
	now := m.clock.nowUS()
	// The switch is written out here and in AllowNAt: a helper holding it
	// would not be inlined, and its frame would copy the result once more.
	switch {
	case m.gcra != nil:
		return m.gcra.allowN(key, now, n)
	case m.tb != nil:
		return m.tb.allowN(key, now, n)
	case m.fw != nil:
		return m.fw.allowN(key, now, n)
	case m.sc != nil:
		return m.sc.allowN(key, now, n)
	}
	return m.sl.allowN(key, now, n)
}

// AllowNAt is AllowN at time t instead of now, for tests and for callers with their
// own clock. Time is taken at microsecond resolution. A t earlier than an earlier
// call's only makes the answer stricter: the meter never gives back. A t outside
// [0, 2^53) µs since the Unix epoch is refused with ErrTimeRange.
func (m *Meter) AllowNAt(key string, t time.Time, n int64) (Decision, error) {
	now := t.UnixMicro()
	switch {
	case m.gcra != nil:
		return m.gcra.allowN(key, now, n)
	case m.tb != nil:
		return m.tb.allowN(key, now, n)
	case m.fw != nil:
		return m.fw.allowN(key, now, n)
	case m.sc != nil:
		return m.sc.allowN(key, now, n)
	case m.sl != nil:
		return m.sl.allowN(key, now, n)
	}
	return zeroMeter(n)
}

func zeroMeter(n int64) (Decision, error) {
	if n < 0 {
		panic("shaper: negative cost")
	}
	return Decision{}, tooLarge()
}

// Admit gives every meter, local or Redis-backed, and [Limiter] one shape, so
// that a consumer such as bulkhead declares one small interface for all of
// them and needs no adapter:
//
//	Admit(ctx context.Context, key string, n int64) (Decision, error)
//
// Admit returns (d, nil) when the call is admitted; (d, err) with err =
// d.Err() (ErrLimited, with RetryAfter) when it is denied; and (d, err) when it
// cannot be decided: ctx.Err() if ctx is already done (checked first, nothing
// recorded), or the error of AllowN (a cost above the burst). A negative n
// panics, as AllowN does. ctx is only checked.
func (m *Meter) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
}

// admit turns AllowN's answer into Admit's: a denial travels as d.Err().
func admit(d Decision, err error) (Decision, error) {
	if err == nil && !d.Allowed {
		err = d.Err()
	}
	return d, err
}

// Refund gives back what an admission charged, for a caller whose request
// was refused by a later step (another limit, a full gate) and so never
// served: bulkhead calls it on every refusal after a rate admitted. Every
// meter has it, with the same contract (shaperredis's too), and so does
// [Limiter] (key ignored), as GCRA.
//
// d is the Decision the admission of cost n for key returned; a denial and a
// peek (n = 0) charged nothing and give nothing back. The key's state then
// decides as if the admission had never happened, as exactly as each
// algorithm allows:
//
//   - GCRA ([NewMeter]): the theoretical arrival time moves back by n·T, but
//     never before now: never more than a fresh key.
//   - Token bucket: n tokens go back into the bucket, up to its capacity.
//   - Fixed window: n is uncounted if the admission's window is still the
//     current one; after it, the window's count no longer matters.
//   - Sliding counter: n is uncounted from the admission's window, current or
//     previous (its weight in the estimate); older, it no longer counts.
//   - Sliding log: n is taken off the admission's entry; once that entry has
//     left the rolling window, it no longer counts.
//
// For every algorithm this is exact (the later decisions are those of a meter
// that never saw the call, a property test checks it) when no other call of
// the key came between the admission and the refund; for the window meters,
// also when others did. For GCRA and the token bucket, other admissions in
// between may have absorbed the cost already (the key fell idle, the bucket
// refilled to capacity, so the charge no longer weighed on them): the refund
// then gives back up to n that was no longer owed, never beyond a fresh
// key's state. A later call dated before the refund's time is decided as the
// refund left the key (as for any call dated before an earlier one). Only a Decision of
// the same meter is meaningful: a Decision of another meter refunds wrongly.
// An in-process meter never fails and never waits (ctx is ignored: a refund
// is owed even to a cancelled request), so its Refund returns nil. A
// negative n panics.
func (m *Meter) Refund(_ context.Context, key string, n int64, d Decision) error {
	if m.c != nil {
		m.c.refund(key, m.clock.nowUS(), n, d)
	}
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see the Refund contract above. A t
// outside AllowNAt's range gives nothing back.
func (m *Meter) RefundAt(key string, t time.Time, n int64, d Decision) {
	if m.c != nil {
		m.c.refund(key, t.UnixMicro(), n, d)
	}
}

// SetLimit changes the limit for every key. Stored state is kept and read under
// the new limit as each constructor documents (GCRA: as if each key's debt had
// been capped to the new burst when it was last admitted). It panics on an
// invalid limit, as the meter's constructor does. On the zero Meter it does
// nothing.
func (m *Meter) SetLimit(lim Limit) {
	if m.c != nil {
		m.c.setLimit(lim)
	}
}

// Limit returns the current limit, with Burst made explicit.
func (m *Meter) Limit() Limit {
	if m.c == nil {
		return Limit{}
	}
	return m.c.getLimit()
}

// Stats returns the meter's decision counters. It takes each shard's lock in
// turn and allocates nothing.
func (m *Meter) Stats() MeterStats {
	if m.c == nil {
		return MeterStats{}
	}
	return m.c.stats()
}

// MeterStats counts a meter's decisions since it was made, in this process:
// a local [Meter]'s, and a store-backed meter's (shaperredis.Meter, whose
// fleet-wide counts are the sums over its processes). Calls with n = 0
// (peeks) are not counted.
type MeterStats struct {
	Allowed  uint64 // calls admitted, from every source
	Denied   uint64 // rate denials (a Decision with Allowed false), from every source
	TooLarge uint64 // calls refused with ErrTooLarge (n above the burst)
	Refunded uint64 // Refunds that gave something back (still counted in Allowed)

	// The fields below count what only a store-backed meter does; they are
	// zero for a local meter.

	// Decisions by source (the floodgate.Source words): Store counts those
	// the store made (admitted or denied); while the store could not answer,
	// FailOpen counts the calls admitted under FailOpen, FailLocal the
	// decisions of the FailLocal meter (admitted or denied), FailClosed the
	// calls refused under FailClosed (an error matching
	// breaker.ErrUnavailable).
	Store, FailOpen, FailLocal, FailClosed uint64

	InvalidKey   uint64 // keys refused before any round trip (ErrInvalidKey)
	Canceled     uint64 // calls whose context ended first
	Errors       uint64 // any other error (an unexpected reply, a Redis error reply)
	RefundErrors uint64 // Refunds that could not reach the store (the cost stays spent)
	// Carried is the cost a store-backed meter under FailLocal charged its
	// store after an outage for what its local share admitted meanwhile
	// (shaperredis: the GCRA's, token bucket's and fixed window's debt).
	Carried uint64
}

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
// run the same lines with now = TIME[1]·1e6 + TIME[2] and return ok, remaining,
// retry µs, reset µs; differential tests then compare Decisions field by field.
// Per-key state and a TTL that never forgets a live key:
//
//	GCRA:            SET tat rem last (3 doubles)    TTL ⌈reset⌉ (tat ≤ now + τ/C)
//	token bucket:    SET tokens last per (3 doubles) TTL max(60 s, 2·fill time)
//	fixed window:    SET start count (2 doubles)     TTL start + P − now
//	sliding counter: SET start prev cur (3 doubles)  TTL start + 2P − now
//	sliding log:     LIST of ts n (2 doubles each)   TTL newest + P − now
//
// The GCRA and token bucket states carry units (rem in 1/C µs, tokens in 1/P
// tokens); SetLimit changes them, which decide handles by clamping rem (and the
// debt, with last) and by rescaling tokens with the stored per.

// core is the keyed, concurrency-safe part of a Meter for one algorithm: a
// clock, the current algo (swapped atomically by SetLimit) and the sharded
// store. It implements meterCore.
type core[S any, A any, PA interface {
	*A
	algo[S]
}] struct {
	st       store[S] // first: a core is allocated 64-byte aligned, and so are its shards
	a        atomic.Pointer[A]
	clock    clock
	mk       func(what string, lim Limit) PA // the algorithm's constructor, for SetLimit
	tooLarge atomic.Uint64                   // calls refused with ErrTooLarge
}

// newCore returns the core of the algorithm mk makes, enforcing lim; what
// names the constructor for a panic's message.
func newCore[S any, A any, PA interface {
	*A
	algo[S]
}](what string, lim Limit, mk func(string, Limit) PA) *core[S, A, PA] {
	c := &core[S, A, PA]{mk: mk}
	c.a.Store((*A)(mk(what, lim)))
	c.clock = newClock()
	c.st.init()
	return c
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

func (c *core[S, A, PA]) allowN(key string, now, n int64) (Decision, error) {
	a := PA(c.a.Load())
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
	if !d.Allowed || n == 0 || n > a.max() || !validTime(now) {
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
	if a.max() < 1 {
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

func (c *core[S, A, PA]) setLimit(lim Limit) { c.a.Store((*A)(c.mk("SetLimit", lim))) }

func (c *core[S, A, PA]) getLimit() Limit { return PA(c.a.Load()).limit() }
