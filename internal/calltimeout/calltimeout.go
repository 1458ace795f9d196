// Package calltimeout bounds calls to a store by a per-call timeout without a
// timer per call where it can: a caller's deadline that is already sooner is
// used as it is, and calls whose context can never be done (context.Background,
// context.WithoutCancel, a detached release) share one deadline context made
// at most every timeout/Slack. Used by breaker.Do and by shaper's and distsem's Redis calls, whose
// go-redis client (ContextTimeoutEnabled) turns the deadline into socket
// deadlines and waits on Done for a pooled connection. A call that outlives its
// own deadline (Expired) is reported as an *Error, with the calling package's
// message.
package calltimeout

import (
	"context"
	"sync/atomic"
	"time"
)

// Slack divides the timeout into the window in which calls share a deadline:
// a call that shares one gets between (Slack−1)/Slack of the timeout and all
// of it.
const Slack = 16

// A Bounder bounds calls by Timeout. The zero Bounder (Timeout 0) bounds
// nothing. A Bounder must not be copied after first use; it is safe for
// concurrent use.
type Bounder struct {
	Timeout time.Duration
	shared  atomic.Pointer[sharedDeadline]
}

// A sharedDeadline is a context that ends at deadline, shared by the calls
// that start within Timeout/Slack of each other and whose own context can
// never be done: one timer serves them all.
type sharedDeadline struct {
	ctx      context.Context
	cancel   context.CancelFunc // never called: the deadline releases the timer
	deadline time.Time
}

// A boundCtx is a caller's context that can never be done, bounded by a shared
// deadline: its values are the caller's (trace spans, for go-redis hooks), its
// deadline, Done and Err the shared ones.
type boundCtx struct {
	context.Context
	s *sharedDeadline
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.s.deadline, true }
func (c *boundCtx) Done() <-chan struct{}       { return c.s.ctx.Done() }
func (c *boundCtx) Err() error                  { return c.s.ctx.Err() }

// Bound returns the context to run one call with, and its own deadline:
//   - ctx itself and a zero deadline if Timeout ≤ 0 or ctx's deadline is not
//     later than now+Timeout (whatever ends the call then is the caller's);
//   - a shared context with ctx's values if ctx can never be done (Done nil),
//     and the shared deadline, with a nil cancel;
//   - otherwise a child of ctx with deadline now+Timeout, which cancel releases.
func (b *Bounder) Bound(ctx context.Context) (cctx context.Context, deadline time.Time, cancel context.CancelFunc) {
	if b.Timeout <= 0 {
		return ctx, time.Time{}, nil
	}
	now := time.Now()
	dl := now.Add(b.Timeout)
	if pd, ok := ctx.Deadline(); ok && !pd.After(dl) {
		return ctx, time.Time{}, nil
	}
	if ctx.Done() == nil {
		cctx, deadline = b.Share(ctx, now)
		return cctx, deadline, nil
	}
	cctx, cancel = context.WithDeadline(ctx, dl)
	return cctx, dl, cancel
}

// Share returns, for a ctx that can never be done (Done nil) and the current
// time now, a context with ctx's values that ends at a deadline between
// now+Timeout−Timeout/Slack and now+Timeout, shared with the other calls that
// start within that window, and the deadline. Timeout must be positive.
func (b *Bounder) Share(ctx context.Context, now time.Time) (context.Context, time.Time) {
	dl := now.Add(b.Timeout)
	s := b.shared.Load()
	if s == nil || s.deadline.After(dl) || s.deadline.Before(dl.Add(-b.Timeout/Slack)) {
		s = &sharedDeadline{deadline: dl}
		s.ctx, s.cancel = context.WithDeadline(context.Background(), dl)
		b.shared.Store(s) // a racing store of another fresh one is as good
	}
	if ctx == context.Background() {
		return s.ctx, s.deadline
	}
	return &boundCtx{ctx, s}, s.deadline
}

// Expired reports whether a call that failed with err ran out of its own
// deadline (from Bound) while the caller's ctx was not done: the store was too
// slow, which a breaker must count as a failure, not as the caller giving up.
func Expired(ctx context.Context, deadline time.Time, err error) bool {
	return err != nil && !deadline.IsZero() && ctx.Err() == nil && !time.Now().Before(deadline)
}

// An Error reports a call that ran out of its own deadline (see Expired): the
// store was too slow. It is a timeout net.Error and deliberately not a context
// error (it has no Unwrap), so that breaker.IsStoreFailure counts it as a store
// failure rather than as the caller giving up.
type Error struct {
	// Msg is the whole message, prefixed with the calling package's name
	// ("shaper: redis call timed out").
	Msg string
	// Err is the call's own error, appended to Msg after ": "; nil for none.
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

// Timeout reports true: the call timed out.
func (e *Error) Timeout() bool { return true }

// Temporary reports true, as net.Error's timeouts do.
func (e *Error) Temporary() bool { return true }
