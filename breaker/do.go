package breaker

import (
	"context"
	"errors"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/sony/gobreaker/v2"
)

// Verdicts passed to gobreaker as the outcome of a call: nil is a success.
var (
	errFailure  = errors.New("breaker: store failure")
	errTimedOut = errors.New("breaker: call timed out") // a failure: CallTimeout expired
	errCaller   = errors.New("breaker: caller done")    // not counted: the caller's ctx ended
	errExcluded = errors.New("breaker: context error")  // not counted: a context error of unknown origin
)

// Do calls call through the breaker and tells where the answer came from.
//
// If ctx is already done, Do returns ctx.Err() without calling. If the
// breaker is open, or half-open with all its probes in flight, or not closed
// and probing the store itself ([Config.Probe]), Do does not call call and
// answers by policy p at once, with no network wait:
//   - FailClosed: the zero T, [FromFailClosed] and an [*OpenError]
//     (matching [ErrUnavailable], with RetryAfter);
//   - FailOpen: the zero T, [FromFailOpen] and a nil error;
//   - FailLocal: fallback(ctx)'s result and error, with [FromFailLocal].
//
// Otherwise Do calls call with ctx bounded by [Config.CallTimeout]: the call's
// context is ctx itself when ctx's own deadline is sooner (or CallTimeout is
// off), else a child of ctx that ends CallTimeout from now. The outcome is
// classified and counted:
//   - nil error: a success; Do returns call's result, [FromStore], nil;
//   - the caller's own ctx is done (cancelled or past its deadline, even if
//     CallTimeout has passed too): not counted; Do returns the zero T,
//     [FromStore] and ctx.Err(), unwrapped;
//   - CallTimeout expired while ctx is not done (the store was too slow): a
//     failure; Do answers by policy p as above, except that under FailClosed
//     the error is a [*StoreError] matching [ErrTimeout] and
//     [ErrUnavailable], and not context.DeadlineExceeded;
//   - [Config.IsFailure] says the error is a store failure: a failure; Do
//     answers by policy p as above, except that under FailClosed the error
//     is a [*StoreError] wrapping call's error;
//   - any other error (a denial, redis.Nil): the store answered, a success;
//     Do returns call's result and error as they are, [FromStore].
//
// The fallback may be nil unless p is FailLocal; Do panics if p is FailLocal
// and fallback is nil, or if p is not a valid Policy. If call panics, the
// panic counts as a failure and is re-raised (gobreaker's Execute).
//
// Do allocates nothing of its own on the success path when it derives no
// context (CallTimeout off, or a sooner caller deadline); otherwise it pays
// for one context.WithDeadline.
func Do[T any](ctx context.Context, b *Breaker, p Policy, call func(context.Context) (T, error), fallback func(context.Context) (T, error)) (T, Source, error) {
	b.init()
	checkPolicy(p)
	if p == FailLocal && fallback == nil {
		panic("breaker: FailLocal needs a fallback")
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, FromStore, err
	}
	b.dispatch()
	if b.state.Load() != uint32(StateClosed) { // fast path: one atomic load when closed
		if rem, open := b.openRemainingSlow(); open {
			if src := b.count(p); src != FromFailClosed {
				return answer(ctx, src, fallback)
			}
			return zero, FromFailClosed, b.openError(StateOpen, rem)
		}
		if b.probeAnswer() { // the breaker probes the store itself
			if src := b.count(p); src != FromFailClosed {
				return answer(ctx, src, fallback)
			}
			return zero, FromFailClosed, b.openError(StateHalfOpen, b.probeTimeout())
		}
	}
	cctx, deadline := ctx, time.Time{}
	if b.callTimeout > 0 {
		deadline = time.Now().Add(b.callTimeout)
		if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
			deadline = time.Time{} // the caller's deadline is sooner: it bounds the call
		} else {
			var cancel context.CancelFunc
			cctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	var o outcome[T]
	execute(ctx, b, p, cctx, deadline, call, &o)
	b.dispatch()
	if o.ran && b.obs != nil && o.verdict != errCaller {
		b.observeCall(o.took, o.verdict, o.err, o.src)
	}
	if o.ran && o.err == nil { // the success path, without resolve's cases
		b.answers.Add(1)
		return o.out, FromStore, nil
	}
	return resolve(ctx, b, p, &o, fallback)
}

// An outcome is what execute learned of one call.
type outcome[T any] struct {
	out     T
	err     error         // call's error
	ran     bool          // call was called (gobreaker let it through)
	verdict error         // what gobreaker was told (see verdict)
	src     Source        // the policy's answer, if the outcome is a failure
	refusal error         // gobreaker's error, if call was not called
	took    time.Duration // how long call took, if there is an Observer
}

// failed reports whether the outcome is a store failure.
func (o *outcome[T]) failed() bool { return isFailure(o.verdict) }

// isFailure reports whether verdict v is a store failure.
func isFailure(v error) bool { return v == errFailure || v == errTimedOut }

// execute calls call with cctx (ctx bounded by deadline, zero if Do set
// none) through gobreaker, and records in o what happened. A failure is
// counted, and answered by p (o.src), before gobreaker sees it, so that the
// log line of a transition it causes includes it.
func execute[T any](ctx context.Context, b *Breaker, p Policy, cctx context.Context, deadline time.Time, call func(context.Context) (T, error), o *outcome[T]) {
	var start time.Time
	if b.obs != nil {
		start = time.Now()
	}
	_, o.refusal = b.cb.Execute(func() (struct{}, error) {
		o.ran = true
		o.out, o.err = call(cctx)
		if o.err == nil {
			return struct{}{}, nil
		}
		o.verdict = b.verdict(ctx, deadline, o.err)
		if o.failed() {
			b.failures.Add(1)
			o.src = b.count(p)
		}
		return struct{}{}, o.verdict
	})
	if o.ran && b.obs != nil {
		o.took = time.Since(start)
	}
}

// resolve turns the outcome of a call into Do's answer.
func resolve[T any](ctx context.Context, b *Breaker, p Policy, o *outcome[T], fallback func(context.Context) (T, error)) (T, Source, error) {
	var zero T
	switch {
	case !o.ran: // open or half-open with its probes in flight
		if src := b.count(p); src != FromFailClosed {
			return answer(ctx, src, fallback)
		}
		return zero, FromFailClosed, b.rejection(o.refusal)
	case o.verdict == errCaller:
		if err := ctx.Err(); err != nil {
			return zero, FromStore, err
		}
		return zero, FromStore, context.DeadlineExceeded // its deadline passed; its timer is late
	case !o.failed():
		b.answers.Add(1)
		return o.out, FromStore, o.err
	case o.src != FromFailClosed:
		return answer(ctx, o.src, fallback)
	case o.verdict == errTimedOut:
		return zero, FromFailClosed, &StoreError{Name: b.name, Err: ErrTimeout}
	}
	return zero, FromFailClosed, &StoreError{Name: b.name, Err: o.err}
}

// observeCall reports a call that reached the store: how long it took, its
// error if it was a store failure (ErrTimeout for a timeout), and the Source
// of Do's answer.
func (b *Breaker) observeCall(took time.Duration, verdict, err error, src Source) {
	switch verdict {
	case errTimedOut:
		err = ErrTimeout
	case errFailure:
	default:
		err, src = nil, FromStore
	}
	b.obs.Observe(floodgate.Event{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: took, Err: err, Source: src.Word()})
}

// answer answers a call the store could not answer under FailOpen (src
// FromFailOpen) or FailLocal (src FromFailLocal).
func answer[T any](ctx context.Context, src Source, fallback func(context.Context) (T, error)) (T, Source, error) {
	if src == FromFailLocal {
		v, err := fallback(ctx)
		return v, FromFailLocal, err
	}
	var zero T
	return zero, FromFailOpen, nil
}

// count counts a call answered by policy p and returns its Source.
func (b *Breaker) count(p Policy) Source {
	switch p {
	case FailOpen:
		b.failOpen.Add(1)
		return FromFailOpen
	case FailLocal:
		b.failLocal.Add(1)
		return FromFailLocal
	}
	b.failClosed.Add(1)
	return FromFailClosed
}

func checkPolicy(p Policy) {
	if p > FailLocal {
		panic("breaker: invalid Policy " + p.String())
	}
}

// verdict classifies the outcome of a call for gobreaker: nil (success),
// errFailure, errTimedOut (failures), errCaller or errExcluded (not counted).
// ctx is the caller's context and deadline the per-call deadline Do set (zero
// if none).
func (b *Breaker) verdict(ctx context.Context, deadline time.Time, err error) error {
	if err == nil {
		return nil
	}
	// The caller's context first: once it is done, the outcome is the
	// caller's, even if our deadline has passed too (go-redis does not abort
	// a blocked read on cancellation, only at the socket deadline).
	if ctx.Err() != nil {
		return errCaller // the caller cancelled
	}
	// Compare times rather than look at ctx.Err(): a socket deadline set from
	// a context deadline can fire before the context's own timer.
	now := time.Now()
	if d, ok := ctx.Deadline(); ok && !now.Before(d) {
		return errCaller // the caller's own deadline expired
	}
	if !deadline.IsZero() && !now.Before(deadline) {
		return errTimedOut // our per-call timeout expired: the store was slow
	}
	if b.isFailure(err) {
		return errFailure
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errExcluded // a context error we can't attribute: no information
	}
	return nil // the store answered
}

// rejection converts gobreaker's rejection into an *OpenError.
func (b *Breaker) rejection(gerr error) error {
	if errors.Is(gerr, gobreaker.ErrTooManyRequests) {
		return b.openError(StateHalfOpen, b.callTimeout)
	}
	rem, _ := b.openRemaining()
	return b.openError(StateOpen, max(rem, 0))
}

func (b *Breaker) openError(s State, delay time.Duration) error {
	return &OpenError{Name: b.name, State: s, Delay: delay}
}
