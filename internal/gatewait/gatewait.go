// Package gatewait is the one place where a consumer's MaxWait is applied to
// a gate (bulkhead layers, bulkhead.Workers, bulkheadpgx classes): a
// non-waiting TryHold first, and a bounded Hold after it, including the race
// where a grant arrives as the bound passes.
package gatewait

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Keyed returns g as a KeyedGate that ignores the key, or kg when g is nil,
// so that a consumer has one path for both.
func Keyed(g floodgate.Gate, kg floodgate.KeyedGate) floodgate.KeyedGate {
	if g == nil {
		return kg
	}
	return unkeyed{g}
}

type unkeyed struct{ g floodgate.Gate }

func (u unkeyed) Hold(ctx context.Context, _ string, n int64) (floodgate.Held, error) {
	return u.g.Hold(ctx, n)
}

func (u unkeyed) TryHold(ctx context.Context, _ string, n int64) (floodgate.Held, error) {
	return u.g.TryHold(ctx, n)
}

// Waits counts one consumer's waits: how many wait now, how many waited, and
// for how long in all. The zero Waits is ready.
type Waits struct {
	Waiting atomic.Int64
	Count   atomic.Uint64
	Nanos   atomic.Uint64
}

// Take takes n of key from g for a consumer whose bound on the wait is
// maxWait, as every consumer's MaxWait means:
//
//   - maxWait < 0: TryHold only; no room is TryHold's error.
//   - a TryHold refusal other than "no room now" (a *floodgate.RejectError
//     with ReasonNoCapacity) is returned at once, whatever maxWait: waiting
//     cannot change it.
//   - maxWait == 0: TryHold, and if it refuses, Hold, waiting until ctx is
//     done.
//   - maxWait > 0: TryHold, and if it refuses, Hold for at most maxWait.
//
// TryHold comes first in every case so that a call granted at once is not a
// wait: it reads no clock, w does not count it, and the waited it returns
// is 0. (For a fleet gate that is full, that costs one more store call
// before the wait.)
//
// It returns what was held, how long the call waited (0 when it did not
// wait), and on failure: ctx.Err() when ctx ended; when the bound passed (a
// grant that races the bound is given back), a *floodgate.RejectError
// matching errMaxWait (a reject.Sentinel) whose delay is what remains of the
// estimate TryHold refused with (0 when none remains: the consumer's default
// applies); or the gate's error.
// w, if non-nil, counts the wait. The fast path (room at once) reads no clock
// and allocates nothing of its own.
func Take(ctx context.Context, g floodgate.KeyedGate, key string, n int64, maxWait time.Duration, errMaxWait error, w *Waits) (floodgate.Held, time.Duration, error) {
	if maxWait > 0 && errMaxWait == nil {
		panic("gatewait: a positive maxWait without errMaxWait")
	}
	h, err := g.TryHold(ctx, key, n)
	if err == nil || maxWait < 0 || reject.ReasonOf(err) != floodgate.ReasonNoCapacity {
		// Granted; or never to wait; or a refusal that waiting cannot
		// change (too large, too many keys, an invalid key, the store
		// unavailable, closed): only "no room now" is worth a wait.
		return h, 0, err
	}
	if ctx.Err() != nil {
		return floodgate.Held{}, 0, ctx.Err()
	}
	if w != nil {
		w.Waiting.Add(1)
	}
	start := time.Now()
	est := reject.RetryAfter(err)
	h, err = hold(ctx, g, key, n, maxWait, errMaxWait)
	waited := time.Since(start)
	if err == errMaxWait && errMaxWait != nil {
		err = reject.New(errMaxWait, est-waited)
	}
	if w != nil {
		w.Waiting.Add(-1)
		w.Count.Add(1)
		w.Nanos.Add(uint64(waited))
	}
	return h, waited, err
}

// hold is Take's wait: Hold under ctx, bounded by maxWait when positive.
func hold(ctx context.Context, g floodgate.KeyedGate, key string, n int64, maxWait time.Duration, errMaxWait error) (floodgate.Held, error) {
	if maxWait <= 0 {
		h, err := g.Hold(ctx, key, n)
		if err != nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		return h, err
	}
	// The bound cancels the wait, not the work: wctx is cancelled by the
	// timer only while the call still waits (state 0 -> 2), and otherwise
	// lives until the Held is released, since the work's context derives
	// from it.
	wctx, cancel := context.WithCancel(ctx)
	var state atomic.Int32 // 0 waiting, 1 granted, 2 timed out
	t := time.AfterFunc(maxWait, func() {
		if state.CompareAndSwap(0, 2) {
			cancel()
		}
	})
	h, err := g.Hold(wctx, key, n)
	t.Stop()
	if err == nil && state.CompareAndSwap(0, 1) {
		return floodgate.NewHeld(h.Context(), func(string, int64) {
			h.Release()
			cancel()
		}, key, n), nil
	}
	if err == nil {
		h.Release() // granted just as the bound passed: give it back
	}
	cancel()
	switch {
	case ctx.Err() != nil:
		return floodgate.Held{}, ctx.Err()
	case state.Load() == 2:
		return floodgate.Held{}, errMaxWait
	}
	return floodgate.Held{}, err
}
