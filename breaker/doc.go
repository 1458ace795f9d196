// Package breaker is a store-health circuit breaker: it decides what a
// Redis-backed limiter does when Redis degrades, so that a dead or frozen Redis
// costs one timeout, not one per request.
//
// A [Breaker] drives one github.com/sony/gobreaker/v2 state machine (closed,
// open, half-open: gobreaker decides the states) and adds what guarding a
// store needs beside it: the per-call timeout, the failure classifier, a
// policy per call, growing and jittered open periods, and transition reports
// without gobreaker's lock. Every call to the store goes through it with [Do], which
// bounds the call with the per-call timeout [Config.CallTimeout] (default
// [DefaultCallTimeout]), counts only infrastructure failures ([IsStoreFailure]: timeouts, refused or
// reset connections, EOF, LOADING, READONLY, MASTERDOWN, BUSY, OOM,
// CLUSTERDOWN, TRYAGAIN), and never the caller's own cancellation or deadline,
// a "denied" answer or redis.Nil. When the store cannot answer (the breaker is
// open, or the call failed), a [Policy] chosen per call decides:
//
//   - [FailClosed] (the zero value) rejects with [ErrUnavailable], as an
//     [*OpenError] whose RetryAfter is the remaining open time
//     ([FromFailClosed]);
//   - [FailOpen] admits without the store ([FromFailOpen]);
//   - [FailLocal] returns the answer of a fallback the caller supplies, such
//     as a local limiter with a share of the global limit ([FromFailLocal]).
//
// An answer from FailOpen or FailLocal is degraded ([Source.Degraded]), as
// everywhere in floodgate; each [Source]'s String is its word in the
// vocabulary ("store", "fail_open", "fail_local", "fail_closed").
//
// While the breaker is open no call reaches the network: Do answers in
// microseconds.
//
// # Timeouts: the store's and the caller's
//
// A store call that outlives CallTimeout while the caller's context is not done
// means the store is too slow: it counts as a store failure, and under
// FailClosed Do returns a [*StoreError] for which errors.Is(err, [ErrTimeout])
// and errors.Is(err, [ErrUnavailable]) are true, whose Timeout method reports
// true, and for which errors.Is(err, context.DeadlineExceeded) is false. The
// caller's own context ending (cancelled, or its deadline, when sooner than
// CallTimeout) is not counted, and Do returns ctx.Err() unwrapped.
//
// # Usage
//
//	b := breaker.New("redis:6379", breaker.Config{}) // one per Redis endpoint, shared
//
//	n, src, err := breaker.Do(ctx, b, breaker.FailLocal,
//		func(ctx context.Context) (int64, error) { return rdb.Incr(ctx, key).Result() },
//		func(ctx context.Context) (int64, error) { return local.Add(1), nil })
//	if err != nil { ... } // the store's own error, or the fallback's
//	if src != breaker.FromStore { ... } // answered without Redis
//
// # Open time, probes and observability
//
// After the breaker trips it stays open for [Config.OpenDuration], lengthened
// by a random jitter and, if [Config.MaxOpenDuration] is set, doubled on each
// failed probe. It then lets [Config.HalfOpenProbes] calls through; if they
// succeed it closes, if one fails it opens again. With [Config.Probe] set
// (floodgate's Redis limiters set a PING on a breaker that has none), the
// probes are the breaker's own, made in a goroutine that lives at most
// HalfOpenProbes × CallTimeout, and every caller is answered by its policy at
// once until they have closed it: once the breaker has opened, no caller
// waits on a store that is still gone.
//
// Each transition is reported once: one [log/slog] line (never one per call,
// with the counts of answers by each policy during the previous state) and a
// floodgate.KindStateChange event to [Config.Observer], made with no lock
// held, so the Observer may call back into the Breaker (gobreaker's own
// OnStateChange runs under its mutex). The Observer also sees each store call
// (floodgate.KindStoreCall). [Breaker.Stats] returns counters of trips,
// transitions, store failures, and calls answered by each policy.
//
// # Concurrency and zero values
//
// A Breaker is safe for concurrent use; one Breaker per store endpoint is
// meant to be shared by every semaphore and meter on it, each passing its own
// Policy to Do. The zero Config is valid, and the zero Breaker behaves like
// New("", Config{}). New starts no goroutine and does no I/O; the only
// goroutine a Breaker ever starts is its own probe's, which ends with it.
package breaker
