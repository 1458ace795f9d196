package shaper

import (
	"context"
	"time"
)

// Admit methods give every local meter and [Limiter] one shape, so that a
// consumer such as bulkhead declares one small interface for all of them (and
// for the Redis-backed meters) and needs no adapter:
//
//	Admit(ctx context.Context, key string, n int64) (Decision, error)
//
// Admit returns (d, nil) when the call is admitted; (d, err) with err =
// d.Err() (ErrLimited, with RetryAfter) when it is denied; and (d, err) when it
// cannot be decided: ctx.Err() if ctx is already done (checked first, nothing
// recorded), or the error of AllowN (a cost above the burst). A negative n
// panics, as AllowN does.

// admit turns AllowN's answer into Admit's: a denial travels as d.Err().
func admit(d Decision, err error) (Decision, error) {
	if err == nil && !d.Allowed {
		err = d.Err()
	}
	return d, err
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error: see the Admit contract above. ctx is only checked.
func (m *Meter) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error: see [Meter.Admit].
func (m *TokenBucket) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error: see [Meter.Admit].
func (m *FixedWindow) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error: see [Meter.Admit].
func (m *SlidingLog) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error: see [Meter.Admit].
func (m *SlidingCounter) Admit(ctx context.Context, key string, n int64) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	return admit(m.AllowN(key, n))
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

// Refund gives back what an admission charged, for a caller whose request
// was refused by a later step (another limit, a full gate) and so never
// served: bulkhead calls it on every refusal after a rate admitted. Every
// keyed meter has it, with the same contract, and so does [Limiter] (key
// ignored), as GCRA.
//
// d is the Decision the admission of cost n for key returned; a denial and a
// peek (n = 0) charged nothing and give nothing back. The key's state then
// decides as if the admission had never happened, as exactly as each
// algorithm allows:
//
//   - Meter (GCRA): the theoretical arrival time moves back by n·T, but never
//     before now: never more than a fresh key.
//   - TokenBucket: n tokens go back into the bucket, up to its capacity.
//   - FixedWindow: n is uncounted if the admission's window is still the
//     current one; after it, the window's count no longer matters.
//   - SlidingCounter: n is uncounted from the admission's window, current or
//     previous (its weight in the estimate); older, it no longer counts.
//   - SlidingLog: n is taken off the admission's entry; once that entry has
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
// The in-process meters never fail and never wait (ctx is ignored: a refund
// is owed even to a cancelled request), so their Refund returns nil. A
// negative n panics.
func (m *Meter) Refund(_ context.Context, key string, n int64, d Decision) error {
	m.c.refund(key, m.c.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see the Refund contract above. A t
// outside AllowNAt's range gives nothing back.
func (m *Meter) RefundAt(key string, t time.Time, n int64, d Decision) {
	m.c.refund(key, t.UnixMicro(), n, d)
}

// Refund gives back the cost n of d, an admission for key, as [Meter.Refund] does.
func (m *TokenBucket) Refund(_ context.Context, key string, n int64, d Decision) error {
	m.c.refund(key, m.c.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see [Meter.RefundAt].
func (m *TokenBucket) RefundAt(key string, t time.Time, n int64, d Decision) {
	m.c.refund(key, t.UnixMicro(), n, d)
}

// Refund gives back the cost n of d, an admission for key, as [Meter.Refund] does.
func (m *FixedWindow) Refund(_ context.Context, key string, n int64, d Decision) error {
	m.c.refund(key, m.c.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see [Meter.RefundAt].
func (m *FixedWindow) RefundAt(key string, t time.Time, n int64, d Decision) {
	m.c.refund(key, t.UnixMicro(), n, d)
}

// Refund gives back the cost n of d, an admission for key, as [Meter.Refund] does.
func (m *SlidingLog) Refund(_ context.Context, key string, n int64, d Decision) error {
	m.c.refund(key, m.c.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see [Meter.RefundAt].
func (m *SlidingLog) RefundAt(key string, t time.Time, n int64, d Decision) {
	m.c.refund(key, t.UnixMicro(), n, d)
}

// Refund gives back the cost n of d, an admission for key, as [Meter.Refund] does.
func (m *SlidingCounter) Refund(_ context.Context, key string, n int64, d Decision) error {
	m.c.refund(key, m.c.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now, for
// tests and for callers of AllowNAt: see [Meter.RefundAt].
func (m *SlidingCounter) RefundAt(key string, t time.Time, n int64, d Decision) {
	m.c.refund(key, t.UnixMicro(), n, d)
}

// Refund gives back the cost n of d, an admission, as [Meter.Refund] does
// (the key is ignored, as in Admit).
func (l *Limiter) Refund(_ context.Context, _ string, n int64, d Decision) error {
	l.refund(l.clock.nowUS(), n, d)
	return nil
}

// RefundAt is Refund at time t (microsecond resolution) instead of now.
func (l *Limiter) RefundAt(t time.Time, n int64, d Decision) { l.refund(t.UnixMicro(), n, d) }
