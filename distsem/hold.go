package distsem

import (
	"context"
	"sync/atomic"

	"github.com/floodgate-go/floodgate"
)

// Hold acquires n as Acquire does and returns it as a floodgate.Held, the gate
// contract that every floodgate consumer takes (bulkhead layers,
// bulkhead.Workers, bulkheadpgx classes), for work that keeps the permit past
// a function's return (open rows, a transaction, a stream):
//   - its Context is derived from ctx and also cancelled when the lease is
//     lost, with the lease's cause (context.Cause matches ErrLeaseLost);
//   - its Release stops that link, releases the permit detached from ctx's
//     cancellation (as Permit.Release does, so a cancelled request still
//     frees its permit) and then cancels the context with cause ErrReleased.
//     Release is idempotent: only its first call does anything, and it may be
//     called from any goroutine. A failed release call is retried in the
//     background as Permit.Release does; Release does not report it.
//
// On error nothing is held; the errors are Acquire's. Do is Hold with the
// release deferred around a function.
func (s *Semaphore) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	p, err := s.Acquire(ctx, n)
	if err != nil {
		return floodgate.Held{}, err
	}
	return p.hold(ctx, ""), nil
}

// TryHold is Hold without waiting: it takes n as TryAcquire does (if it is
// free and no one is queued, with one Redis call, and otherwise fails with a
// *RejectError matching ErrNoCapacity) and returns what Hold returns.
func (s *Semaphore) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	p, err := s.TryAcquire(ctx, n)
	if err != nil {
		return floodgate.Held{}, err
	}
	return p.hold(ctx, ""), nil
}

// Hold acquires n of key's limit as Acquire does and returns it as
// Semaphore.Hold does.
func (k *Keyed) Hold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	p, err := k.Acquire(ctx, key, n)
	if err != nil {
		return floodgate.Held{}, err
	}
	return p.hold(ctx, key), nil
}

// TryHold is Hold without waiting: it takes n of key's limit as TryAcquire
// does, and otherwise fails with TryAcquire's error (a *RejectError matching
// ErrNoCapacity when key is full).
func (k *Keyed) TryHold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	p, err := k.TryAcquire(ctx, key, n)
	if err != nil {
		return floodgate.Held{}, err
	}
	return p.hold(ctx, key), nil
}

// hold links work on ctx to p, for Hold and Do: a Held whose context is
// derived from ctx and also cancelled, with p's cause, when p's context ends
// (the lease is lost), and whose Release stops that link, releases p (Release
// detaches ctx from its cancellation) and cancels the context with
// ErrReleased, once. The link is stopped before p is released, so an
// intentional release is never reported as the lease's cause.
func (p *Permit) hold(ctx context.Context, key string) floodgate.Held {
	wctx, cancel := context.WithCancelCause(ctx)
	pctx := p.Context()
	stop := context.AfterFunc(pctx, func() { cancel(context.Cause(pctx)) })
	var done atomic.Bool
	return floodgate.NewHeld(wctx, func(string, int64) {
		if done.Swap(true) {
			return
		}
		stop()
		p.Release(ctx)
		cancel(ErrReleased)
	}, key, p.weight)
}

// Limit returns the limit this Semaphore was made with: an n above it is
// refused at once, without I/O, with ErrTooLarge. The limit stored in Redis
// is authoritative for admission (see New and SetLimit, which does not change
// this one); Stats reports both.
func (s *Semaphore) Limit() int64 {
	s.mustBeMade()
	return s.limit
}
