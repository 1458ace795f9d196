package floodgatetest

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"
)

// A RetryCheck configures [HonestRetryAfter]. The zero RetryCheck is valid:
// 5 rounds, no slack, no Tight check.
type RetryCheck struct {
	// Rounds is the number of refusals whose RetryAfter is checked. If zero,
	// 5.
	Rounds int

	// MaxCalls is the most calls admitted in a row, in one round, before the
	// check gives up waiting for a refusal. If zero, 10,000.
	MaxCalls int

	// Slack is added to every RetryAfter before the retry. If zero, none:
	// right for a local meter inside a testing/synctest bubble (the retry
	// comes at exactly the instant promised) and for a Redis meter (Redis
	// decides by its own clock, and the reply and the retry each take a
	// round trip, so the retry reaches Redis after the promised instant).
	Slack time.Duration

	// Tight, if positive, also checks that a RetryAfter is not longer than
	// needed by more than Tight: a retry Tight before the promised instant
	// must still be refused (only for RetryAfters longer than Tight). A
	// refused call must cost nothing for this to hold, as it does with every
	// floodgate meter.
	Tight time.Duration
}

// A RetryReport is what [HonestRetryAfter] saw.
type RetryReport struct {
	Rounds   int           // refusals checked
	Admitted int           // calls admitted, retries included
	Min, Max time.Duration // the shortest and longest RetryAfter seen
}

func (r RetryReport) String() string {
	return fmt.Sprintf("%d refusals checked, %d calls admitted, RetryAfter from %v to %v", r.Rounds, r.Admitted, r.Min, r.Max)
}

// HonestRetryAfter checks that a refusal's RetryAfter can be trusted: it
// calls r (one client, nothing else using the configuration) until it is
// refused, waits the refusal's RetryAfter, and retries, which must be
// admitted; cfg.Rounds times. It returns what it saw, and a *[Violation] for
// a retry refused again, a refusal with no RetryAfter, or (with cfg.Tight) a
// RetryAfter longer than needed; any other error of r ends the check and is
// returned as it is.
//
// It is meant for rates (and compositions whose refusals come from rates): a
// gate with nothing else holding it never refuses. Inside a testing/synctest
// bubble the waits are fake time, and exact.
func HonestRetryAfter(ctx context.Context, r Runner, cfg RetryCheck) (RetryReport, error) {
	const check = "HonestRetryAfter"
	rounds, maxCalls := cmp.Or(cfg.Rounds, 5), cmp.Or(cfg.MaxCalls, 10_000)
	var rep RetryReport
	call := func() (outcome, error) {
		ran := false
		err := r(ctx, func(context.Context) error { ran = true; return nil })
		o, err := classify(ctx, ran, err)
		if o == admitted {
			rep.Admitted++
		}
		return o, err
	}
	for round := range rounds {
		var err error
		calls := 0
		for {
			var o outcome
			o, err = call()
			if o == refused {
				break
			}
			if o != admitted {
				return rep, fmt.Errorf("floodgatetest: %s: round %d: %w", check, round+1, err)
			}
			if calls++; calls >= maxCalls {
				return rep, violation(check, "round %d: %d calls admitted in a row, never refused", round+1, calls)
			}
		}
		d, _ := retryAfterOf(err)
		if d <= 0 {
			return rep, violation(check, "round %d: refused after %d admissions with no RetryAfter (%v)", round+1, calls, err)
		}
		if rep.Rounds == 0 || d < rep.Min {
			rep.Min = d
		}
		rep.Max = max(rep.Max, d)
		waited := time.Duration(0)
		if cfg.Tight > 0 && d > cfg.Tight {
			if !sleepCtx(ctx, d-cfg.Tight) {
				return rep, ctx.Err()
			}
			waited = d - cfg.Tight
			if o, early := call(); o == admitted {
				return rep, violation(check, "round %d: refused with RetryAfter %v, yet admitted %v later, %v before then: the RetryAfter is longer than needed",
					round+1, d, waited, cfg.Tight)
			} else if o != refused {
				return rep, fmt.Errorf("floodgatetest: %s: round %d: %w", check, round+1, early)
			}
		}
		if !sleepCtx(ctx, d+cfg.Slack-waited) {
			return rep, ctx.Err()
		}
		o, again := call()
		switch o {
		case refused:
			d2, _ := retryAfterOf(again)
			return rep, violation(check, "round %d: refused after %d admissions with RetryAfter %v; retried %v later: refused again, RetryAfter %v",
				round+1, calls, d, d+cfg.Slack, d2)
		case admitted:
		default:
			return rep, fmt.Errorf("floodgatetest: %s: round %d: the retry: %w", check, round+1, again)
		}
		rep.Rounds++
	}
	return rep, nil
}

// CheckRetryAfter runs [HonestRetryAfter] under t's context, logs the report
// and fails t (t.Error) on a violation or an error.
func CheckRetryAfter(t testing.TB, r Runner, cfg RetryCheck) RetryReport {
	t.Helper()
	rep, err := HonestRetryAfter(t.Context(), r, cfg)
	t.Logf("HonestRetryAfter: %v", rep)
	if err != nil {
		t.Error(err)
	}
	return rep
}
