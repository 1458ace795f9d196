// Package semaphore provides a weighted semaphore with a FIFO queue, for capping
// how many expensive calls run at once in one process.
//
// It keeps every guarantee of golang.org/x/sync/semaphore (weighted, FIFO,
// context-aware, and both of its famous cancellation races handled) and adds what
// its users have asked for: a bound on the number of waiters ([ErrQueueFull], at
// once) and on the time they wait ([ErrMaxWait]); a weight larger than the
// limit fails at once ([ErrTooLarge]) instead of waiting until the context is
// done; a context deadline that the queue cannot meet fails at once
// ([ErrDeadline]); [Weighted.SetLimit] at run time; [Weighted.Stats]; a
// [floodgate.Observer] (Config.Observer); a
// retry-after estimate on every rejection; and [Weighted.Do], which cannot leak
// weight.
//
// [NewWeighted] is a drop-in replacement for x/sync's constructor: the same
// methods with the same meaning, a weight of 0 included, and x/sync's own tests
// pass against it.
//
// [Keyed] is a Weighted per key with the same limit for every key: "at most 2
// at once per tenant" for any number of tenants; a key's semaphore is made on
// its first use and dropped when it has no holders and no waiters, and
// [KeyedConfig.MaxKeys] bounds the live keys ([ErrTooManyKeys]).
// [Weighted.Hold] and [Weighted.TryHold] (and Keyed's) implement the gate
// contract of every floodgate consumer, [floodgate.Gate] and
// [floodgate.KeyedGate]: they return the weight as a [floodgate.Held], for
// work that outlives a function's return (open rows, a stream), without
// allocating. Its Release is Release's: call it once.
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
// # Implementation
//
// One mutex guards all state, as in x/sync. Queued callers wait on a channel
// of their own, taken with its MaxWait timer from a pool, so neither an
// uncontended Acquire and Release nor a blocked Acquire and the Release that
// wakes it allocate.
//
// A Weighted is safe for simultaneous use by multiple goroutines. Waiters are
// pooled per Weighted; do not share one Weighted between a testing/synctest
// bubble and code outside it.
package semaphore
