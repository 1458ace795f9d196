// Package shaperredis is the Redis-backed half of [shaper]: keyed meters whose
// state lives in Redis so that a fleet of processes shares one quota per key,
// token leasing that takes Redis off the hot path, and a fleet-wide queue. It
// uses shaper's Limit, Rate, Decision and QueueConfig and returns shaper's
// errors, so code written against the in-process meters needs no changes
// beyond the constructor.
//
// # Meters
//
// [NewMeter] (GCRA), [NewTokenBucket], [NewFixedWindow], [NewSlidingLog] and
// [NewSlidingCounter] return a [Meter] that decides in Redis, atomically, in
// one round trip, with Redis's clock: one Lua script per algorithm running the
// same integer lines as the in-process meter, so both return the same
// decisions for the same inputs (a differential test holds them to it).
//
//	exports := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5},
//		shaperredis.Config{Prefix: "exports:", Policy: breaker.FailOpen})
//	if !exports.Allow(ctx, "tenant:acme") { ... }           // yes or no
//	d, err := exports.AllowN(ctx, "tenant:acme", 1)         // the whole Decision
//	d, err = exports.Admit(ctx, "tenant:acme", 1)           // a denial as an error
//
// # When Redis cannot answer
//
// Every call goes through a [breaker.Breaker] and is bounded by its
// CallTimeout; a call that outlives it is a store failure (an error matching
// breaker.ErrTimeout, never context.DeadlineExceeded), while the caller's own
// context ending returns ctx.Err(). Config.Policy says what a decision is while
// Redis cannot answer: fail closed, fail open (most rate limits should), or
// decide locally with Config.LocalShare (each process's share of the limit,
// as distsem's LocalShare); a decision Redis did not make has
// Decision.Degraded set. With Config.Batch, the decisions that goroutines ask
// for at once share one round trip.
//
// # Observing
//
// Config.Observer is told of every decision, queue wait and lease call, with
// the Source of each answer (store, fail_open, fail_local, fail_closed), and
// Meter.Stats returns [shaper.MeterStats], the counters of every meter, with
// the decisions by source.
//
// A call that timed out may still sit in the socket of a frozen or overloaded
// Redis and run when Redis gets to it. It spends nothing then: every script
// that spends on a caller's behalf (a decision, a lease refill, a queue
// reservation) carries the call's deadline, and does nothing once Redis TIME
// has passed it. The deadline is the client's (the call's context deadline,
// CallTimeout at most) plus 10ms, plus how far Redis's clock has been seen
// ahead of this host's: a call refused as late while its caller still waits
// proves Redis is ahead, and is sent once more with the difference learned,
// so a skewed clock costs one extra round trip, never an outage. The bound: a
// caller answered with a timeout is still charged only if Redis starts the
// call within 10ms, plus however far this host's clock runs ahead of Redis's,
// after the call's deadline. Give-backs (a Lease's Close, a Queue's unused
// slot, [Meter.Refund] of an admission a later step refused) carry no
// deadline: a refund always runs.
//
// # Bad input
//
// A cost above the burst (ErrTooLarge) and a key longer than Config.MaxKeyLen
// (ErrInvalidKey, default [DefaultMaxKeyLen] bytes; [Meter.CheckKey] tells in
// advance) are refused before any round trip and are not store failures. Any
// other byte string is a key, the empty one and braces included: each
// decision touches the one Redis key Prefix + "{" + key + "}" (plus a suffix
// for some algorithms: [Meter.Key]),
// which is in one slot on Redis Cluster whatever the key holds. Every number passed to a script stays
// below 2^53 (a Lua number is a float64): a limit that would break this panics
// in its constructor or SetLimit.
//
// # Leases and the fleet-wide queue
//
// [Meter.Lease] takes a batch of tokens in one call, serves them locally
// without a round trip, refills in the background below a low-water mark, and
// gives unused tokens back on Close. The fleet can over-admit by at most
// Batch × processes.
//
// [NewQueue] is the fleet-wide [shaper.Queue]: each job reserves the next slot
// of a GCRA schedule in Redis and sleeps until it, so N worker processes share
// one rate without a central queue process.
//
// # Concurrency
//
// All types are safe for concurrent use. Constructors do no I/O and start no
// goroutine. A Lease runs a goroutine only for a refill in flight, and a Queue
// only to give back the slots of calls that gave up; Close waits for both.
package shaperredis
