// Package semaphore provides a weighted semaphore with a FIFO queue, for capping
// how many expensive calls run at once in one process.
//
// It keeps every guarantee of golang.org/x/sync/semaphore (weighted, FIFO,
// context-aware, and both of its famous cancellation races handled) and adds what
// its users have asked for: a bound on the number of waiters ([ErrQueueFull], at
// once) and on the time they wait ([ErrMaxWait]); a weight larger than the
// capacity fails at once ([ErrTooLarge]) instead of waiting forever; a context
// deadline that the queue cannot meet fails at once ([ErrDeadline]);
// [Weighted.Resize] at run time; [Weighted.Stats]; hooks; a retry-after estimate
// on every rejection; and [Weighted.Do], which cannot leak weight.
//
// # Usage
//
//	sem := semaphore.New(50, semaphore.Config{MaxWaiters: 200, MaxWait: 2 * time.Second})
//	err := sem.Do(ctx, 1, func(ctx context.Context) error {
//		return runReport(ctx)
//	})
//	var ra interface{ RetryAfter() time.Duration }
//	if errors.As(err, &ra) {
//		// rejected: tell the client to come back after ra.RetryAfter()
//	}
//
// # Fairness
//
// Callers are granted strictly in arrival order: a heavy caller at the head of
// the queue blocks lighter callers behind it until enough weight is free. This
// prevents starving heavy callers, at the cost of head-of-line blocking. Acquire
// and TryAcquire never overtake a queued caller.
//
// # Rejections and retry-after
//
// Every rejection is a [*RejectError] matching one of the sentinels with
// [errors.Is] and carrying RetryAfter, an estimate of when a retry could be
// granted: the weight that must be released before the caller's (what is queued
// ahead plus its own, minus what is free) divided by the release throughput
// observed while callers waited. It is an estimate from past hold times, never
// negative, and 0 when nothing has been observed yet. The same estimate decides
// early rejection against a context deadline or MaxWait; Config.NoEarlyReject
// turns that off. Context cancellation is returned as ctx.Err(), unwrapped.
//
// # Performance
//
// While no one is queued, Acquire, TryAcquire and Release are a single
// compare-and-swap on one word (a grant also counts itself in a second word),
// take no lock and allocate nothing. Queued callers use pooled waiters, so a
// blocked Acquire allocates nothing either. Release never blocks on the
// internal lock: while callers are queued it takes the lock if it is free and
// grants them itself, with one CAS for its weight and theirs; if the lock is
// held, it gives the weight back with one CAS and leaves the granting to the
// holder (it may yield for a moment while another goroutine takes or leaves
// the lock).
//
// A Weighted is safe for simultaneous use by multiple goroutines. Waiters are
// pooled per Weighted; do not share one Weighted between a testing/synctest
// bubble and code outside it.
package semaphore
