// Package distsem is a weighted semaphore shared through Redis by every process
// of a fleet: "at most 50 expensive report queries against the replica, across
// all 12 API pods".
//
// Permits are leases: a holder that crashes gives its weight back when its lease
// expires. Waiters queue in one FIFO queue across all processes and are granted
// by the script that frees capacity (server-side hand-off), which notifies only
// the waiters it granted. Every grant carries a fencing number. What happens when
// Redis is unreachable is a policy: fail closed, fail open, or admit through a
// bounded local share.
//
// [Keyed] is a Semaphore per key with the same limit for every key: "each
// tenant runs at most 2 exports at once, across the fleet", for any number of
// tenants; its keys share one pub/sub connection, renewal schedule and
// breaker, and a key costs nothing in the process while no call waits on it
// and no permit of it is held. [Semaphore.Hold] and [Semaphore.TryHold] (and
// Keyed's) implement the gate contract of every floodgate consumer,
// [floodgate.Gate] and [floodgate.KeyedGate]: a permit for work that outlives
// a function's return (open rows, a transaction), as a [floodgate.Held] whose
// context the work runs under, cancelled if the lease is lost, and whose
// Release is idempotent. Config.Observer, a [floodgate.Observer], is told of
// grants, refusals, releases, renewals and lost leases.
//
// # Usage
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	reports := distsem.New(rdb, "replica-reports", 50, distsem.Config{
//		Policy:     breaker.FailLocal,
//		LocalShare: 4, // ≈ 50 / 12 pods
//	})
//	defer reports.Close()
//
//	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // fail fast, don't pile up
//	defer cancel()
//	err := reports.Do(ctx, 1, func(ctx context.Context) error {
//		return runReport(ctx) // ctx is cancelled if the lease is lost
//	})
//
// # Correctness
//
// The weight held at the store never exceeds the limit: every decision is one
// Lua script (acquire, renew or release) that checks and writes atomically, with
// time taken only from Redis TIME, so client clocks never matter to a grant
// (they only decide, through an acquire's deadline, below, whether a late
// acquire still runs). Every script
// is idempotent per client-generated token, because go-redis retries and a call
// that timed out at the client may still run later: a repeated acquire returns
// the same grant, and the release of a token whose acquire failed or was
// cancelled leaves a tombstone (Config.TombstoneTTL) that refuses an acquire of
// the same token arriving after it. An Acquire that fails or is cancelled
// releases its token in the background, detached from the caller's context, so
// it leaves no orphan permit even if its call ran late. Nor does a late call
// hold the permit meanwhile: an acquire carries its call's deadline (the
// context's, CallTimeout at most, in this host's clock plus 10ms, plus how far
// Redis's clock has been seen ahead: an acquire refused as late while its
// caller still waits proves Redis is ahead and is sent once more with the
// difference learned), and does nothing if Redis runs it after that, as when
// it sat in the socket of a frozen Redis. Without it, the only permit of a
// semaphore stayed held for no one for the breaker's open period (1.17s
// measured) after Redis woke, until the release got through. The bound: a
// late acquire still takes a permit, until its release runs, only if Redis
// starts it within 10ms, plus however far this host's clock runs ahead of
// Redis's, after its deadline. Releases and renewals carry no deadline: they
// always run. (Permit.Release of a
// grant made by the token's only acquire call writes no tombstone, unless
// Config.Readopt is set: no acquire of that token can still be pending, and it
// saves a write and memory per release. A token sent more than once, by a
// retry or a waiter's heartbeat, is tombstoned on release.)
//
// All keys of a semaphore share one hash tag ({name}; see Names and keys) and
// are passed in KEYS, so the scripts run on Redis Cluster; notifications use
// SPUBLISH there. Every key has a TTL of key_ttl = 2 × max(Lease, WaiterTTL,
// TombstoneTTL) + 10s, set when a call may have created the key and refreshed
// on every key by any call at most every key_ttl/4 (so that the uncontended
// path skips most PEXPIREs): an idle semaphore disappears ¾ to 1 × key_ttl
// after its last call. Until then it keeps its state ({name}:s), its
// per-token hash ({name}:d) and, once a caller has waited, its heartbeat set
// ({name}:qe), beside any tombstones ({name}:t): :d and :qe keep a marker,
// so that a grant or a heartbeat need not give them a TTL again (about 130
// bytes of Redis memory each).
//
// # The limit
//
// The limit is stored in Redis and authoritative. The first call that finds no
// state stores the limit given to New; from then on every process obeys the
// stored limit, whatever it was configured with, until the semaphore's keys
// expire or Semaphore.SetLimit changes it. A process configured with a smaller
// limit refuses an n above its own limit without I/O; one configured with a
// larger limit gets ErrTooLarge from Redis for an n above the stored one.
// Stats reports both limits, so a mismatch can be alerted on. Shrinking never
// revokes permits: holders drain.
//
// The scripts compute in Lua numbers, exact up to 2^53, so a limit is at most
// MaxLimit (2^52: the weight in use plus n stays exact) and every duration at
// most MaxTTL; New panics on larger values and SetLimit refuses them.
//
// # Names and keys
//
// A name (and a Keyed's prefix + key) is any non-empty byte string of at most
// Config.MaxNameLen bytes (DefaultMaxNameLen by default; for a Keyed the bound
// is on the key alone): a tenant id in braces, such as a GUID
// "{6F9619FF-8B86-D011-B42D-00C04FC964FF}", is a name like any other. The name
// is part of every Redis key, as the hash tag: {name} for a name without
// braces. A hash tag cannot hold a '}', so in a name with braces each '{' is
// written "{(" and each '}' "{)": the keys of "{a}" are under "{{(a{)}". The
// escape keeps every name's keys in one slot and is injective (two different
// names never share a key), and names without braces keep the keys they have
// always had. A name longer than the bound is refused rather than hashed
// (New panics; a Keyed returns ErrInvalidKey, which Keyed.CheckKey reports in
// advance): a bounded key is a rule a caller can check before it spends
// anything, and no deployment would then split a key's state between its
// literal and its hashed form.
//
// # Fairness and wake-ups
//
// Waiters of all processes form one FIFO queue with head-of-line blocking: a
// heavy waiter at the head is never overtaken by lighter ones, so it is not
// starved, at the cost of idle capacity while it waits for enough to free up.
// TryAcquire never overtakes the queue either; its ErrNoCapacity rejection
// carries RetryAfter, an estimate (never negative, 0 while unknown) from the
// weight short and the mean hold time of the Semaphore's own released permits.
// The script that frees capacity
// (a release, a renewal or acquire that reaps expired holders, SetLimit) grants
// it to the head of the queue and publishes the token and fence on the notify
// channel of the waiter's process only: each process has one pub/sub
// connection per Semaphore, opened when a caller first has to wait. A granted
// waiter holds its permit without another call. A lost message costs latency,
// not liveness: waiters heartbeat every min(WaiterTTL, Lease)/3 with an
// idempotent acquire that finds them granted (before the grant's claim window
// can run out, see below), and the head of the queue also
// calls when the earliest lease expires, so a crashed holder's permit is handed
// on within its lease plus a round trip (plus up to a heartbeat for a waiter
// that became head since its last call). A message delivered late, after its
// grant expired unseen and the waiter was queued again, is recognised as stale
// (its fence predates the waiter's last call) and ignored. There is no broadcast
// and no fixed-interval polling.
//
// # Crashed processes
//
// A process that dies takes with it only the weight it held, until the leases
// of its permits end (at most Lease after their last renewal). What was
// handed to its queued callers comes back within Config.WaiterTTL (1s by
// default): a queue entry lives WaiterTTL after its waiter's last call, and a
// hand-off grant lives only as long as the queue entry it replaced would have
// (its claim window) until the waiter claims it, with the first renewal of its
// Permit (due within half of what is left of the window) or a heartbeat that
// finds it granted; from then on it has the full Lease. A waiter of a process
// that died never claims, so its grant is reaped and handed on, and the
// queue, in FIFO order, passes over the dead entries as they expire. A permit
// granted by hand-off and held for longer than about a third of WaiterTTL
// costs one renewal call more than one granted at once.
//
// # Leases
//
// A Permit's lease is renewed every Lease/3: the Semaphore keeps one schedule
// of its permits' renewals with one timer, and a renewal call runs in a
// goroutine of its own while it is in flight. A Permit keeps a
// local deadline on the monotonic clock (the send time of the last successful
// renewal plus Lease); if no renewal succeeds before it, or Redis answers that the
// token is gone, the permit is lost: Permit.Lost is closed and Permit.Context is
// cancelled with ErrLeaseLost. With Config.Readopt a holder whose token vanished
// (data loss) puts it back when capacity allows and no waiter is queued (it
// never overtakes the queue), and Stats.Readopted counts it.
// A renewal call is bounded by the local deadline, and a permit whose renewals
// fail is due again at its deadline at the latest, so a loss is signalled at the
// deadline. Release takes the permit off the schedule and cancels a renewal in
// flight without waiting for it (a call that hangs cannot delay Release), and an
// intentional release is never reported as lost. A renewal that reaches Redis
// after the release extends nothing; with Config.Readopt it is refused while the
// release's tombstone lasts, and one that re-adopts the token later is released
// again or expires with its lease, within the limit (see Permit.Release).
//
// # When Redis fails
//
// Every call goes through a breaker.Breaker (Config.Breaker, one per Redis
// endpoint, shared), whose CallTimeout bounds it within the caller's deadline; a
// call that outlives it is a store failure (an error matching
// breaker.ErrTimeout, never context.DeadlineExceeded), while the caller's own
// context ending returns ctx.Err(). New refuses a nil client and a go-redis
// client without ContextTimeoutEnabled, because
// without it go-redis ignores context deadlines and a frozen Redis would hold
// callers for its socket timeouts. Timeouts, refused connections and errors such
// as LOADING count as failures; the caller's own cancellation does not. When
// Redis cannot answer, Config.Policy decides: breaker.FailClosed (the default)
// returns an error matching breaker.ErrUnavailable (with RetryAfter while the
// breaker is open); breaker.FailOpen grants a permit held nowhere;
// breaker.FailLocal grants from a local semaphore of Config.LocalShare, which
// also counts this process's Redis-held permits. A permit granted by FailOpen
// or FailLocal is degraded (Permit.Degraded, Stats.Degraded), and its
// KindAdmit event's Source says which ("fail_open", "fail_local"). While the
// breaker is open no call waits on the network.
//
// # Over-admission bounds
//
// The invariant holds at the store. The number of callers actually running can
// exceed the limit in these documented cases, each bounded:
//
//   - Failover with replication lag: Redis replicates asynchronously, so grants
//     acknowledged by a primary that dies before replicating them are unknown to
//     the promoted replica, which can grant the same capacity again: up to 2 ×
//     limit until the old holders' next renewals (≤ Lease/3) report them lost (or
//     re-adopt them only where capacity allows). A restart without persistence is
//     the same case.
//   - A paused holder (GC pause, SIGSTOP, laptop sleep) whose lease expires while
//     it still works: its weight is granted to another caller; each such holder
//     adds its weight until it notices (its Lost channel closes by its local
//     deadline, before or at the lease expiry on its own clock).
//   - A Redis clock step forward expires leases early, with the same effect.
//   - FailOpen while Redis is unavailable: unbounded (every call is admitted).
//   - FailLocal while Redis is unavailable: at most LocalShare per process, so
//     LocalShare × processes in total, plus permits granted by Redis before the
//     outage that did not fit in the share. Redis does not know the permits
//     granted locally; each is carried into Redis as soon as it answers again
//     (tried every Lease/9, at most every 250 ms; LocalStats.Carried), counted
//     there whatever Redis holds already, so that Redis grants nothing more
//     until the weight in use is back below the limit. From then on a carried
//     permit is renewed, released and can be lost like any other (it stays
//     Degraded). Until a process's permits are all carried, and for the
//     breaker's longest open period (Breaker.LongestOpen, plus a carry's
//     interval, at most a Lease) after its last decision without Redis, it
//     takes a grant from Redis only with room on its share
//     (LocalStats.Recovering): the other processes find Redis again when
//     their own open periods end, and Redis knows their permits only once
//     they are carried. So after an outage the fleet is over its limit only
//     by what a process granted locally while Redis already held the rest (a
//     process cut off alone adds its share at most), until those permits are
//     released.
//
// A waiter that dies after being granted by hand-off, before it claims the
// grant, holds its permit for at most WaiterTTL (under-admission, not
// over-admission).
//
// # Concurrency
//
// A Semaphore and its Permits are safe for simultaneous use by multiple
// goroutines. A Semaphore starts no goroutine in New: the pub/sub reader starts
// with the first waiter and stops in Close; a renewal goroutine lives only while
// its call is in flight, and the renewal schedule keeps renewing held permits
// after Close, until they are released or lost. Close fails every Acquire still
// waiting with ErrClosed; each withdraws its queue entry (or gives back a
// grant that raced Close) before it returns.
package distsem
