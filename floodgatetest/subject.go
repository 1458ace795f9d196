package floodgatetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/shaper"
)

// A Runner is the subject of the invariant checks: one configuration of
// yours that admits or refuses a call. It runs fn if the call is admitted
// (holding whatever the configuration holds while fn runs) and returns fn's
// error; it returns without running fn when the call is refused (an error
// with a RetryAfter() time.Duration method or a *floodgate.RejectError, as
// every floodgate refusal is) or fails.
//
// A bulkhead is a Runner as it is:
//
//	func(ctx context.Context, fn func(context.Context) error) error {
//		return b.Do(ctx, bulkhead.Request{Identity: id}, fn)
//	}
//
// and [GateRunner], [TryGateRunner] and [RateRunner] make one of a gate or a
// rate.
type Runner func(ctx context.Context, fn func(context.Context) error) error

// A Rate decides whether key may spend n now: bulkhead's Rate, which every
// shaper meter, shaper.Limiter and shaperredis.Meter have.
type Rate interface {
	Admit(ctx context.Context, key string, n int64) (shaper.Decision, error)
}

// GateRunner returns a Runner that holds n of g while fn runs: Hold (waiting
// until ctx is done), fn under the Held's context, Release.
func GateRunner(g floodgate.Gate, n int64) Runner {
	return func(ctx context.Context, fn func(context.Context) error) error {
		h, err := g.Hold(ctx, n)
		if err != nil {
			return err
		}
		defer h.Release()
		return fn(h.Context())
	}
}

// TryGateRunner is [GateRunner] with TryHold: a call that finds no room is
// refused at once.
func TryGateRunner(g floodgate.Gate, n int64) Runner {
	return func(ctx context.Context, fn func(context.Context) error) error {
		h, err := g.TryHold(ctx, n)
		if err != nil {
			return err
		}
		defer h.Release()
		return fn(h.Context())
	}
}

// RateRunner returns a Runner that runs fn when r admits n for key, and
// returns the refusal (Decision.Err) or r's error otherwise.
func RateRunner(r Rate, key string, n int64) Runner {
	return func(ctx context.Context, fn func(context.Context) error) error {
		d, err := r.Admit(ctx, key, n)
		if err != nil {
			return err
		}
		if !d.Allowed {
			return d.Err()
		}
		return fn(ctx)
	}
}

// RateBound returns the most calls of cost 1 that a meter enforcing lim may
// admit within any span of length window: Burst + ⌈window·Count/Period⌉. It
// is a sound bound for GCRA, the token bucket and the sliding log; a fixed
// window or a sliding counter admits up to 2·Count across a window boundary,
// so state Bound{Window: lim.Rate.Period, Admitted: 2 * lim.Rate.Count} for
// those.
func RateBound(lim shaper.Limit, window time.Duration) int64 {
	burst := lim.Burst
	if burst == 0 {
		burst = lim.Rate.Count
	}
	if lim.Rate.Period <= 0 {
		return burst
	}
	// ⌈window·count/period⌉ without overflow for the windows tests use.
	w, p := int64(window), int64(lim.Rate.Period)
	return burst + (w/p)*lim.Rate.Count + ceilDiv((w%p)*lim.Rate.Count, p)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// outcome is what one call through a Runner came to.
type outcome uint8

const (
	admitted outcome = iota // fn ran
	refused                 // a refusal: a RejectError or an error with RetryAfter
	canceled                // the context given to the Runner ended
	failed                  // any other error, or nil without running fn
)

// retryAfterOf returns the refusal's RetryAfter and whether err is a refusal.
func retryAfterOf(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	if _, ok := errors.AsType[*floodgate.RejectError](err); ok {
		return 0, true
	}
	return 0, false
}

// errNotRun is the error of a call whose Runner returned nil without
// running fn.
var errNotRun = errors.New("the Runner returned nil without running fn")

// classify returns what a call came to: ran says whether fn ran, ctx is the
// context the Runner was given.
func classify(ctx context.Context, ran bool, err error) (outcome, error) {
	switch {
	case ran:
		return admitted, nil
	case err == nil:
		return failed, errNotRun
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return canceled, err
	}
	if _, ok := retryAfterOf(err); ok {
		return refused, err
	}
	return failed, err
}

// A Violation is an invariant a check found broken: which check, and what it
// saw, with the numbers.
type Violation struct {
	Check string // the check's function: "NoOverAdmission", "HonestRetryAfter", ...
	What  string // what was seen, with numbers
}

func (v *Violation) Error() string { return "floodgatetest: " + v.Check + ": " + v.What }

func violation(check, format string, args ...any) *Violation {
	return &Violation{Check: check, What: fmt.Sprintf(format, args...)}
}

// sleepCtx waits d or until ctx is done, and reports whether it waited d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
