package floodgatetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
)

// A BalanceCheck configures [PermitsBalance]. Limit is required; the other
// fields have defaults.
type BalanceCheck struct {
	// Limit is the gate's capacity. Required.
	Limit int64

	// InUse, if non-nil, returns the weight the gate says is held
	// (semaphore.Weighted's Stats().InUse, distsem.Semaphore's
	// LocalStats().Held); it must be 0 at the end.
	InUse func() int64

	// Callers is the number of goroutines holding and cancelling at once. If
	// zero, 8.
	Callers int

	// Ops is the number of operations each caller does. If zero, 100.
	Ops int

	// MaxN is the largest weight one call asks for (each asks for 1 to MaxN).
	// If zero, 1. It must not be above Limit.
	MaxN int64

	// MaxDelay bounds the random waits: how long a hold lasts, and how long
	// after its start a waiting call is cancelled. If zero, 2ms.
	MaxDelay time.Duration

	// Rand is the number the random choices derive from: the same Rand
	// makes the same choices (the timing of real goroutines aside). If zero,
	// one is drawn at random; the report gives it, so that a failure can be
	// replayed.
	Rand uint64
}

// A BalanceReport is what [PermitsBalance] saw.
type BalanceReport struct {
	Rand                 uint64 // the number the random choices derived from
	Held, Canceled, Busy int64  // calls granted, cancelled or refused for want of room
	Failed               int64  // calls that failed otherwise (FirstFailure is the first)
	MaxHeld              int64  // the most weight seen held at once
	FirstFailure         error
}

func (r BalanceReport) String() string {
	s := fmt.Sprintf("rand %d: %d granted, %d canceled, %d refused, %d failed; at most %d held at once",
		r.Rand, r.Held, r.Canceled, r.Busy, r.Failed, r.MaxHeld)
	if r.FirstFailure != nil {
		s += fmt.Sprintf("; first failure: %v", r.FirstFailure)
	}
	return s
}

// PermitsBalance checks that a gate loses and leaks nothing under random
// cancellation. Callers goroutines each do Ops random operations on g: a
// Hold whose context is cancelled at a random moment (before or after the
// grant), a Hold with a context already done, a TryHold, and a Hold whose
// context ends while the weight is held; whatever is granted is released.
// Meanwhile the weight held must never exceed Limit. At the end InUse (if
// set) must be 0, and a TryHold of the whole Limit must succeed. It returns
// what it saw, and a *[Violation] for each of these that fails (joined).
//
// It runs inside a testing/synctest bubble as well as outside (real time,
// for a gate in Redis). It panics if cfg.Limit is not positive or cfg.MaxN
// is above it.
func PermitsBalance(ctx context.Context, g floodgate.Gate, cfg BalanceCheck) (BalanceReport, error) {
	const check = "PermitsBalance"
	if cfg.Limit <= 0 {
		panic("floodgatetest: PermitsBalance: Limit must be positive")
	}
	maxN := cmp.Or(cfg.MaxN, 1)
	if maxN > cfg.Limit || maxN < 0 {
		panic("floodgatetest: PermitsBalance: MaxN out of 1..Limit")
	}
	callers, ops := cmp.Or(cfg.Callers, 8), cmp.Or(cfg.Ops, 100)
	maxDelay := cmp.Or(cfg.MaxDelay, 2*time.Millisecond)
	rep := BalanceReport{Rand: cfg.Rand}
	if rep.Rand == 0 {
		rep.Rand = rand.Uint64() | 1
	}

	var (
		held, maxHeld              atomic.Int64
		granted, cancels, busy, nf atomic.Int64
		mu                         sync.Mutex
		wg                         sync.WaitGroup
	)
	fail := func(err error) {
		nf.Add(1)
		mu.Lock()
		if rep.FirstFailure == nil {
			rep.FirstFailure = err
		}
		mu.Unlock()
	}
	// use holds h for d (or until stop is closed, when stop is not nil),
	// and releases it.
	use := func(h floodgate.Held, d time.Duration, stop <-chan struct{}) {
		granted.Add(1)
		n := held.Add(h.N())
		for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-stop:
		}
		t.Stop()
		held.Add(-h.N())
		h.Release()
	}
	// refusal counts a call that got nothing.
	refusal := func(callCtx context.Context, err error) {
		switch o, err := classify(callCtx, false, err); o {
		case canceled:
			cancels.Add(1)
		case refused:
			busy.Add(1)
		default:
			fail(err)
		}
	}
	for c := range callers {
		rng := rand.New(rand.NewPCG(rep.Rand, uint64(c)))
		wg.Go(func() {
			delay := func() time.Duration { return time.Duration(rng.Int64N(int64(maxDelay) + 1)) }
			for range ops {
				if ctx.Err() != nil {
					return
				}
				n := 1 + rng.Int64N(maxN)
				switch rng.IntN(4) {
				case 0: // a Hold cancelled at a random moment
					callCtx, cancel := context.WithTimeout(ctx, delay())
					h, err := g.Hold(callCtx, n)
					if err == nil {
						use(h, delay(), nil)
					} else {
						refusal(callCtx, err)
					}
					cancel()
				case 1: // a Hold whose context is already done
					callCtx, cancel := context.WithCancel(ctx)
					cancel()
					h, err := g.Hold(callCtx, n)
					if err == nil {
						use(h, 0, nil)
					} else {
						refusal(callCtx, err)
					}
				case 2: // a TryHold
					h, err := g.TryHold(ctx, n)
					if err == nil {
						use(h, delay(), nil)
					} else {
						refusal(ctx, err)
					}
				case 3: // a Hold whose context ends while the weight is held
					callCtx, cancel := context.WithTimeout(ctx, 4*maxDelay)
					h, err := g.Hold(callCtx, n)
					if err == nil {
						t := time.AfterFunc(delay(), cancel)
						use(h, 8*maxDelay, h.Context().Done()) // the work stops when its context ends
						t.Stop()
					} else {
						refusal(callCtx, err)
					}
					cancel()
				}
			}
		})
	}
	wg.Wait()
	rep.Held, rep.Canceled, rep.Busy, rep.Failed = granted.Load(), cancels.Load(), busy.Load(), nf.Load()
	rep.MaxHeld = maxHeld.Load()

	var errs []error
	if rep.Held == 0 {
		errs = append(errs, violation(check, "nothing was granted (%v): the check tested nothing", rep))
	}
	if rep.MaxHeld > cfg.Limit {
		errs = append(errs, violation(check, "rand %d: %d held at once, limit %d", rep.Rand, rep.MaxHeld, cfg.Limit))
	}
	if cfg.InUse != nil {
		if n := cfg.InUse(); n != 0 {
			errs = append(errs, violation(check, "rand %d: after every release the gate says %d is in use, want 0", rep.Rand, n))
		}
	}
	if h, err := g.TryHold(ctx, cfg.Limit); err != nil {
		errs = append(errs, violation(check, "rand %d: after every release, TryHold(%d) (the whole limit) = %v; want it granted (weight lost or leaked)", rep.Rand, cfg.Limit, err))
	} else {
		h.Release()
	}
	return rep, errors.Join(errs...)
}

// CheckPermitsBalance runs [PermitsBalance] under t's context, logs the
// report and fails t (t.Error) on a violation.
func CheckPermitsBalance(t testing.TB, g floodgate.Gate, cfg BalanceCheck) BalanceReport {
	t.Helper()
	rep, err := PermitsBalance(t.Context(), g, cfg)
	t.Logf("PermitsBalance: %v", rep)
	if err != nil {
		t.Error(err)
	}
	return rep
}
