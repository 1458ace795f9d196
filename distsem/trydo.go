package distsem

import "context"

// TryDo is Do without waiting: it takes n as TryAcquire does (if it is free
// and no one is queued, with one Redis call) and otherwise returns
// TryAcquire's *RejectError matching ErrNoCapacity, with its RetryAfter,
// without calling fn. When it takes n it runs fn exactly as Do does: with a
// context that is cancelled if the lease is lost or ctx is done, releasing
// the permit when fn returns or panics. It returns fn's error, or
// TryAcquire's; on TryAcquire's error nothing is held.
//
// TryDo is the shape a consumer that must never queue uses (bulkhead with a
// negative Layer.MaxWait).
func (s *Semaphore) TryDo(ctx context.Context, n int64, fn func(context.Context) error) error {
	p, err := s.TryAcquire(ctx, n)
	if err != nil {
		return err
	}
	return runHolding(ctx, p, fn)
}

// TryDo is Do for key without waiting: it takes n of key's limit as
// TryAcquire does, and otherwise returns TryAcquire's error (a *RejectError
// matching ErrNoCapacity when key is full) without calling fn. When it takes
// n it runs fn as Do does, releasing the permit when fn returns or panics.
func (k *Keyed) TryDo(ctx context.Context, key string, n int64, fn func(context.Context) error) error {
	p, err := k.TryAcquire(ctx, key, n)
	if err != nil {
		return err
	}
	return runHolding(ctx, p, fn)
}
