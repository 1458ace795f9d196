package shaper

import (
	"context"
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
