package distsem

import (
	"context"
	"errors"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// emit reports e, from a distsem component, to o, which is non-nil. No lock
// is held.
func emit(o floodgate.Observer, e floodgate.Event) {
	e.Component = floodgate.ComponentDistsem
	o.Observe(e)
}

// observeAcquire reports the outcome of an acquire of n that waited waited:
// a grant (p), the caller's context ending, or a refusal. The Observer is
// non-nil.
func (s *Semaphore) observeAcquire(ctx context.Context, n int64, p *Permit, waited time.Duration, err error) {
	switch {
	case err == nil:
		emit(s.cfg.Observer, floodgate.Event{Kind: floodgate.KindAdmit, N: n, Duration: waited, Source: p.source()})
	case errors.Is(err, ErrNoCapacity):
		// A non-waiting call found no room: a probe (a consumer's TryHold
		// before its bounded wait), whose caller reports the outcome; it is
		// counted in LocalStats.
	default:
		observeFailure(s.cfg.Observer, ctx, n, waited, err)
	}
}

// observeFailure reports an acquire of n that failed with err after waiting
// waited: KindCancel for the caller's context, else KindReject.
func observeFailure(o floodgate.Observer, ctx context.Context, n int64, waited time.Duration, err error) {
	if cerr := ctx.Err(); cerr != nil && err == cerr {
		emit(o, floodgate.Event{Kind: floodgate.KindCancel, N: n, Duration: waited})
		return
	}
	emit(o, floodgate.Event{Kind: floodgate.KindReject, N: n, Reason: reject.ReasonOf(err), Duration: waited, Err: err, Source: refusalSource(err)})
}

// refusalSource returns the Source of a refusal made by a failure policy, or
// "" for one made by the store or here (ErrTooLarge, ErrClosed, an invalid
// key).
func refusalSource(err error) floodgate.Source {
	switch {
	case errors.Is(err, ErrLocalBusy):
		return floodgate.SourceFailLocal
	case errors.Is(err, breaker.ErrUnavailable):
		return floodgate.SourceFailClosed
	}
	return ""
}

// source returns where the permit was granted: the store, or the failure
// policy that granted it without Redis.
func (p *Permit) source() floodgate.Source {
	switch p.kind {
	case permitLocal:
		return floodgate.SourceFailLocal
	case permitOpen:
		return floodgate.SourceFailOpen
	}
	return floodgate.SourceStore
}

// observeRenew reports a renewal call of p that returned err, and the loss
// of p's lease if lost. No lock is held.
func (p *Permit) observeRenew(renewed bool, err error, lost bool) {
	o := p.s.cfg.Observer
	if o == nil {
		return
	}
	if renewed {
		emit(o, floodgate.Event{Kind: floodgate.KindRenew, Err: err})
	}
	if lost {
		emit(o, floodgate.Event{Kind: floodgate.KindLeaseLost, N: p.weight, Err: ErrLeaseLost})
	}
}
