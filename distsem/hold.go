package distsem

import (
	"context"
	"sync/atomic"
)

// Hold acquires n as Acquire does, for work that keeps the permit past a
// function's return (open rows, a transaction, a stream), and returns:
//   - wctx, the context the work runs under: derived from ctx, and also
//     cancelled when the lease is lost, with the lease's cause
//     (context.Cause(wctx) matches ErrLeaseLost);
//   - release, which stops that link, releases the permit detached from ctx's
//     cancellation (as Permit.Release does, so a cancelled request still frees
//     its permit) and then cancels wctx with cause ErrReleased. release is
//     idempotent: only its first call does anything, and it may be called
//     from any goroutine. A failed release call is retried in the background
//     as Permit.Release does; release does not report it.
//
// On error nothing is held and release is nil; the errors are Acquire's. Hold
// is the shape that consumers such as bulkheadpgx.Gate take; Do is Hold with
// the release deferred around a function.
func (s *Semaphore) Hold(ctx context.Context, n int64) (context.Context, func(), error) {
	p, err := s.Acquire(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	wctx, release := p.hold(ctx)
	return wctx, release, nil
}

// TryHold is Hold without waiting: it takes n as TryAcquire does (if it is
// free and no one is queued, with one Redis call, and otherwise fails with a
// *RejectError matching ErrNoCapacity) and returns the work context and
// release of Hold.
func (s *Semaphore) TryHold(ctx context.Context, n int64) (context.Context, func(), error) {
	p, err := s.TryAcquire(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	wctx, release := p.hold(ctx)
	return wctx, release, nil
}

// hold links work on ctx to p, for Hold and Do: it returns a context derived
// from ctx that is also cancelled, with p's cause, when p's context ends (the
// lease is lost), and release, which stops that link, releases p (Release
// detaches ctx from its cancellation) and cancels the context with
// ErrReleased, once. The link is stopped before p is released, so an
// intentional release is never reported as the lease's cause.
func (p *Permit) hold(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	pctx := p.Context()
	stop := context.AfterFunc(pctx, func() { cancel(context.Cause(pctx)) })
	var done atomic.Bool
	return wctx, func() {
		if done.Swap(true) {
			return
		}
		stop()
		p.Release(ctx)
		cancel(ErrReleased)
	}
}

// Limit returns the limit this Semaphore was made with: an n above it is
// refused at once, without I/O, with ErrTooLarge. The limit stored in Redis
// is authoritative for admission (see New and SetLimit, which does not change
// this one); Stats reports both.
func (s *Semaphore) Limit() int64 {
	s.mustBeMade()
	return s.limit
}
