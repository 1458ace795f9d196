// Package shaper controls how fast work starts: a [Queue] that delays work to a
// steady rate (the leaky bucket as a shaper), and a keyed [Meter] that admits or
// rejects each call at once with an honest retry-after, with a constructor per
// classic rate-limiting algorithm: [NewMeter] (GCRA, the leaky bucket as a
// meter), [NewTokenBucket], [NewFixedWindow], [NewSlidingLog] and
// [NewSlidingCounter]; and [Limiter], GCRA for a single limit.
//
// # Which one
//
// The algorithms answer different policy questions. First decide whether bursts
// should be delayed or rejected, then whether a boundary approximation is acceptable:
//
//   - Delay bursts, smooth the flow to a downstream (background jobs): [Queue].
//   - Reject over the rate, allow bursts up to Burst, O(1) memory, exact:
//     [NewMeter] (GCRA); [NewTokenBucket] admits exactly the same, in token
//     vocabulary.
//   - Count per window, simplest, up to 2× around a boundary: [NewFixedWindow].
//   - Never more than Count in any rolling window, O(Count) memory per key:
//     [NewSlidingLog].
//   - About Count per rolling window in O(1) memory (a weighted estimate):
//     [NewSlidingCounter].
//   - One limit for the whole process, no keys (x/time/rate's use case): [Limiter],
//     the GCRA of [NewMeter] on one state behind one small mutex.
//
// # Rates and limits
//
// A [Rate] is Count events per Period ([PerSecond], [PerMinute], [Every]); a [Limit]
// adds Burst, the most admitted at once. They are separate fields, so "5 a minute,
// 5 at once" is Limit{Rate: PerMinute(5), Burst: 5} and never a float.
//
// # Meters
//
// A [Meter] is keyed: one value serves millions of keys (tenants, API keys,
// routes), with state created on first use and forgotten once it is idle again.
// It is one type whatever its algorithm, with one method set:
//
//	Allow(key string) bool
//	AllowN(key string, n int64) (Decision, error)
//	AllowNAt(key string, t time.Time, n int64) (Decision, error)
//	Admit(ctx context.Context, key string, n int64) (Decision, error)
//	Refund(ctx context.Context, key string, n int64, d Decision) error
//	SetLimit(lim Limit)
//	Limit() Limit
//	Stats() MeterStats
//
// Refund gives back an admission whose work was never done (a later limit or a
// full gate refused the request): the key then decides as if the call had
// never come, exactly where each algorithm can tell (see [Meter.Refund]).
// A Meter has no configuration and no Observer (a decision costs tens of
// nanoseconds): observe it through the consumer that asks it (bulkhead's
// Observer) or through [Meter.Stats], whose [MeterStats] is also what a
// Redis-backed meter returns.
//
// [Limiter] is the unkeyed GCRA: the same methods without the key, and exactly the
// decisions a GCRA Meter makes for one key, without hashing a key or taking a shard
// lock:
//
//	partnerAPI := shaper.NewLimiter(shaper.Limit{Rate: shaper.PerSecond(100), Burst: 20})
//	if !partnerAPI.Allow() {
//		return errSlowDown
//	}
//
// A [Decision] carries Allowed, Remaining, RetryAfter, ResetAfter and the Limit;
// [Decision.Err] turns a denial into a *[RejectError] matching ErrLimited. A weight
// larger than the most the meter can ever admit at once is refused with
// ErrTooLarge, never with a retry-after that cannot succeed. The arithmetic is in integer microseconds, exact
// (no floats) and written out in each constructor's documentation, so a Redis Lua port of
// the same lines returns the same decisions.
//
//	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5})
//	d, err := m.AllowN("tenant:acme:export", 1)
//	if err == nil {
//		err = d.Err() // nil, or a *RejectError (ErrLimited) with RetryAfter
//	}
//
// # Queue
//
//	q := shaper.NewQueue(shaper.PerSecond(5), shaper.QueueConfig{MaxQueue: 1000})
//	defer q.Close()
//	err := q.Do(ctx, 1, func(ctx context.Context) error { return export(ctx, job) })
//	// err: export's error, ctx.Err(), ErrClosed, or a *RejectError:
//	// ErrQueueFull, ErrMaxWait or ErrDeadline, with RetryAfter
//
// [Queue.Do] waits for one slot and runs its function once; [Queue.Wait] only
// waits, for use as a gate in front of other code or in a worker's own loop. The
// schedule is virtual, so the rate stays exact even where sleeps are coarse; see
// [Queue] for the details, cancellation, Close and Shutdown. QueueConfig.Observer
// is told of each call's admission (with its wait), refusal or cancellation.
//
// # Across a fleet, through Redis
//
// This package imports only the standard library (and floodgate's internal
// packages). The Redis-backed twins live
// in [github.com/floodgate-go/floodgate/shaper/shaperredis]: meters that decide
// in Redis, atomically, in one round trip, with the same decisions as the
// meters here (a differential test holds them to it); token leasing; and a
// fleet-wide Queue. They use this package's Limit, Rate, Decision,
// MeterStats and QueueConfig, and return its errors.
//
// # Errors
//
// Every refusal is a *[RejectError], the one rejection type of every floodgate
// package: it matches its reason with errors.Is (ErrLimited, ErrQueueFull,
// ErrMaxWait, ErrDeadline or ErrTooLarge) and has a RetryAfter() time.Duration
// method, 0 for ErrTooLarge, which retrying cannot help. A closed Queue returns
// ErrClosed itself, and a caller's own context ends with ctx.Err().
//
// # Concurrency
//
// All types are safe for concurrent use. No constructor starts a goroutine; state
// advances lazily on calls. Zero values fail closed: a zero meter rejects every call
// and a zero Queue returns ErrClosed.
package shaper
