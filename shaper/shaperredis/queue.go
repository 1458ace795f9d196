package shaperredis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/redis/go-redis/v9"
)

// Queue is the fleet-wide form of [shaper.Queue]: every process that makes a
// Queue with the same client, name and rate shares one schedule in Redis, so
// N worker processes together start work at Rate (with up to QueueConfig.Burst at
// once after a quiet period), without a central queue process.
//
// Each Wait reserves the next slot of a GCRA schedule in one script call
// (lua/reserve.lua) and sleeps until it; time is Redis's. A slot further away
// than QueueConfig.MaxWait (or the context's deadline) is not reserved and costs
// nothing. Over any time window W, the fleet therefore starts at most
// Burst + Rate × W weight units (a call starts at or after its slot, never before,
// as its sleep begins after Redis computed the slot).
//
// Differences from the local Queue: calls of different processes are served in
// the order their reservations reach Redis, not strictly FIFO; a weight above
// QueueConfig.Burst (1 if zero) is refused with ErrTooLarge; QueueConfig.MaxQueue
// bounds the calls waiting in this process only; and a call whose context ends while it
// sleeps gives its slot back only if no later reservation was made since (the
// calls behind it, possibly in other processes, keep their slots, so this one
// goes unused).
//
// When Redis cannot answer, Config.Policy decides: FailClosed returns the
// breaker's error, FailOpen starts the call at once, FailLocal waits on a local
// [shaper.Queue] with Config.LocalShare's rate and burst (default: the shared
// rate).
//
// Config.Observer (or, if nil, QueueConfig.Observer) is told of every call of
// weight n > 0, Component floodgate.ComponentQueue: KindAdmit with Source
// (store, fail_open, fail_local) and Duration, the sleep until a slot the
// store reserved (0 under FailOpen and FailLocal); KindReject with Reason,
// Err and, for a FailClosed refusal, Source fail_closed; KindCancel when the
// caller's context ended first (Duration: the sleep so far).
//
// Use [NewQueue]; the zero Queue refuses every call with ErrClosed. A Queue is
// safe for concurrent use by multiple goroutines. Its constructor starts no
// goroutine; the slots of calls that gave up are given back by at most one
// background goroutine at a time, which Close waits for.
type Queue struct {
	st       storecall.Store // the client and its breaker
	key      string
	rl       *redisLimit
	maxQueue int
	maxWait  int64 // µs; < 0 unbounded
	maxSlot  int64 // µs: the longest reservation the script arithmetic allows
	policy   breaker.Policy
	local    *shaper.Queue
	stats    queueCounters
	obs      floodgate.Observer

	mu sync.Mutex
	// mu guards:
	waiting  map[*int64]struct{} // slot times (ns since base) of sleeping calls
	closed   bool
	done     chan struct{} // closed by Close
	base     time.Time
	giveback [][7]int64 // reservations to give back, latest last
	giving   bool       // a give-back goroutine runs (counted in wg)
	wg       sync.WaitGroup
}

// QueueConfig configures a [Queue]. It is [shaper.QueueConfig]: the fields mean
// the same for a local and a fleet-wide queue (MaxQueue bounds the calls
// waiting in this process), so moving a queue to Redis changes its
// constructor, not its configuration.
type QueueConfig = shaper.QueueConfig

// NewQueue returns a fleet-wide queue named name releasing r.Count weight
// units per r.Period, configured by cfg as a local [shaper.Queue] is, with its
// state under the Redis key rcfg.Prefix + "{" + name + "}" (Prefix "shaper:q:"
// if empty). It does no I/O and starts no goroutine. It panics if r admits
// nothing (or Burst×Period reaches 2^53 µs), if cfg.Burst or cfg.MaxQueue is
// negative, if name is longer than rcfg.MaxKeyLen, or on an invalid client (see
// [NewMeter]).
func NewQueue(client redis.UniversalClient, name string, r shaper.Rate, cfg QueueConfig, rcfg Config) *Queue {
	storecall.Check("shaperredis", client)
	if cfg.Burst < 0 || cfg.MaxQueue < 0 {
		panic("shaperredis: NewQueue: negative Burst or MaxQueue")
	}
	if !keyOK(name, rcfg.maxKeyLen()) {
		panic("shaperredis: NewQueue: name longer than MaxKeyLen")
	}
	lim := shaper.Limit{Rate: r, Burst: max(cfg.Burst, 1)}
	rl := newRedisLimit("NewQueue", lim, false)
	if rcfg.Prefix == "" {
		rcfg.Prefix = "shaper:q:"
	}
	q := &Queue{
		st:       rcfg.store(client, rcfg.Prefix),
		key:      rcfg.Prefix + "{" + name + "}",
		rl:       rl,
		maxQueue: cfg.MaxQueue,
		maxWait:  -1,
		policy:   rcfg.Policy,
		waiting:  make(map[*int64]struct{}),
		done:     make(chan struct{}),
		base:     time.Now(),
		obs:      rcfg.Observer,
	}
	if q.obs == nil {
		q.obs = cfg.Observer
	}
	switch {
	case cfg.MaxWait > 0:
		q.maxWait = int64(cfg.MaxWait / time.Microsecond)
	case cfg.MaxWait < 0:
		q.maxWait = 0
	}
	// The script keeps (wait + τ)·C below 2^53.
	q.maxSlot = max(0, (maxExact-2*lim.Burst*rl.p)/rl.c-1)
	if rcfg.Policy == breaker.FailLocal {
		ll := rcfg.LocalShare
		if ll == (shaper.Limit{}) {
			ll = lim
		}
		q.local = shaper.NewQueue(ll.Rate, QueueConfig{Burst: burstOf(ll), MaxQueue: cfg.MaxQueue, MaxWait: cfg.MaxWait})
	}
	return q
}

// Key returns the Redis key of the queue's schedule.
func (q *Queue) Key() string { return q.key }

// enter registers a call in this process's waiting set, unless the queue is
// closed or MaxQueue calls already wait; the slot it returns holds the call's
// wake-up time once known (see sleep).
func (q *Queue) enter() (*int64, error) {
	slot := new(int64)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	if q.maxQueue > 0 && len(q.waiting) >= q.maxQueue {
		earliest := int64(1 << 62)
		for s := range q.waiting {
			earliest = min(earliest, *s)
		}
		return nil, reject.New(ErrQueueFull, time.Duration(earliest-int64(time.Since(q.base))))
	}
	*slot = 1 << 62
	q.waiting[slot] = struct{}{}
	return slot, nil
}

// leave removes a call that entered from the waiting set.
func (q *Queue) leave(slot *int64) {
	q.mu.Lock()
	delete(q.waiting, slot)
	q.mu.Unlock()
}

// budget returns the longest wait a call may accept, in µs, and the refusal
// of a slot beyond it: MaxWait's, or ctx's deadline's if that is sooner. A
// slot beyond maxSlot is too far for any MaxWait.
func (q *Queue) budget(ctx context.Context) (int64, error) {
	budget, reason := q.maxSlot, ErrMaxWait
	if q.maxWait >= 0 {
		budget = min(budget, q.maxWait)
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := max(0, int64(time.Until(dl)/time.Microsecond)); left < budget {
			budget, reason = left, ErrDeadline
		}
	}
	return budget, reason
}

// reserve asks the store for a slot of weight n at most budget µs away
// (reserve.lua), through the breaker and the policy.
func (q *Queue) reserve(ctx context.Context, n, budget int64) ([7]int64, breaker.Source, error) {
	args := []any{q.rl.arg, n, budget}
	var fallback func(context.Context) ([7]int64, error)
	if q.local != nil {
		fallback = func(context.Context) ([7]int64, error) { return [7]int64{-1}, nil }
	}
	return storecall.Do(ctx, &q.st, q.policy, func(ctx context.Context, client redis.UniversalClient) ([7]int64, error) {
		var out [7]int64
		if err := evalBefore(ctx, q.st.Clock, client, reserveScript, q.key, out[:], args...); err != nil {
			return out, err
		}
		if out[0] != 0 && out[0] != 1 || out[1] < 0 {
			return out, errors.New("shaperredis: unexpected reserve reply")
		}
		return out, nil
	}, fallback)
}

// Wait reserves a slot of weight n in the fleet's schedule and sleeps until it,
// then returns nil. It fails without reserving anything:
//   - with ctx.Err() if ctx is already done;
//   - with ErrClosed after Close;
//   - with a *RejectError matching ErrTooLarge if n exceeds the burst;
//   - with a *RejectError matching ErrQueueFull if MaxQueue calls of this
//     process already sleep (RetryAfter: until the earliest of them wakes);
//   - with a *RejectError matching ErrMaxWait if the slot is further away than
//     MaxWait, or ErrDeadline if it comes after ctx's deadline (RetryAfter: how
//     much later a call with the same budget could reserve it, if nothing else
//     reserves meanwhile); ErrDeadline is not context.DeadlineExceeded.
//
// If ctx ends during the sleep, Wait returns ctx.Err() at once, and if the
// queue is closed, ErrClosed; the slot is given back in the background if it is
// still the last one reserved (one more round trip, detached from ctx, bounded
// by the breaker's CallTimeout; Close waits for it). If ctx ends while the
// reservation itself is in flight, Wait returns ctx.Err() when ctx ends. When
// Redis cannot answer, see Config.Policy. A weight of zero reserves nothing and
// returns nil at once. A negative n panics.
func (q *Queue) Wait(ctx context.Context, n int64) error {
	var src breaker.Source
	var waited time.Duration
	err := q.wait(ctx, n, &src, &waited)
	if i := q.count(ctx, n, src, err); i >= 0 && q.obs != nil {
		q.observe(i, n, waited, err)
	}
	return err
}

// wait is Wait without its counters; it sets *from to the source of the
// decision once the store or its policy made one, and *waited to the wait
// of the slot the store reserved.
func (q *Queue) wait(ctx context.Context, n int64, from *breaker.Source, waited *time.Duration) error {
	if n < 0 {
		panic("shaperredis: Queue.Wait: negative weight")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.rl == nil {
		return ErrClosed
	}
	if n > q.rl.max {
		return reject.New(ErrTooLarge, 0)
	}
	slot, err := q.enter()
	if err != nil {
		return err
	}
	defer q.leave(slot)
	if n == 0 {
		return nil
	}
	budget, reason := q.budget(ctx)
	r, src, err := q.reserve(ctx, n, budget)
	*from = src
	switch src {
	case breaker.FromFailOpen:
		return nil
	case breaker.FromFailLocal:
		return q.local.Wait(ctx, n)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	if r[0] == 0 {
		return reject.New(reason, micros(r[1]-budget))
	}
	w, err := q.sleep(ctx, slot, r)
	*waited = w
	return err
}

// sleep waits until the slot of reservation r, which is r[1] µs away, and
// gives it back if ctx ends or the queue closes first. It returns how long it
// slept.
func (q *Queue) sleep(ctx context.Context, slot *int64, r [7]int64) (time.Duration, error) {
	wait := micros(r[1])
	if wait <= 0 {
		return 0, nil
	}
	q.mu.Lock()
	closed := q.closed
	start := time.Since(q.base)
	if !closed {
		*slot = int64(start + wait)
		q.wg.Add(1) // a sleeper: Close waits until it has queued its give-back
	}
	q.mu.Unlock()
	if closed { // closed while the reservation was in flight
		q.giveBackOne(r)
		return 0, ErrClosed
	}
	defer q.wg.Done()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return wait, nil
	case <-ctx.Done():
		q.unreserve(r)
		return time.Since(q.base) - start, ctx.Err()
	case <-q.done:
		q.unreserve(r)
		return time.Since(q.base) - start, ErrClosed
	}
}

// unreserve queues the give-back of reservation r, made by a call that gave up
// before its slot, and starts the give-back goroutine unless it runs. The
// caller does not wait: a frozen Redis must not hold a caller past its own
// deadline.
func (q *Queue) unreserve(r [7]int64) {
	q.mu.Lock()
	q.giveback = append(q.giveback, r)
	start := !q.giving
	if start {
		q.giving = true
		q.wg.Add(1)
	}
	q.mu.Unlock()
	if start {
		go q.giveBack()
	}
}

// giveBack gives back the queued reservations, latest first (so that a chain of
// abandoned reservations at the end of the schedule unwinds), and exits when
// none is left. Each give-back is best-effort cleanup (lua/unreserve.lua): it
// succeeds only if no later reservation was made since, it is bounded by the
// breaker (CallTimeout, and no wait while open) and one second, and its errors
// are dropped (the slot then stays used).
func (q *Queue) giveBack() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.giveback) == 0 {
			q.giving = false
			q.mu.Unlock()
			return
		}
		r := q.giveback[len(q.giveback)-1]
		q.giveback = q.giveback[:len(q.giveback)-1]
		q.mu.Unlock()
		q.giveBackOne(r)
	}
}

// giveBackOne gives back reservation r now (see giveBack).
func (q *Queue) giveBackOne(r [7]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	args := []any{q.rl.arg, 0, r[3], r[4], r[5], r[6]}
	storecall.Do(ctx, &q.st, breaker.FailClosed, func(ctx context.Context, client redis.UniversalClient) (any, error) {
		return unreserveScript.Run(ctx, client, []string{q.key}, args...).Result()
	}, nil)
}

// Do waits for one slot of weight n as Wait does, then calls fn(ctx) once and
// returns its error, like [shaper.Queue.Do]. If Wait fails (ctx.Err(),
// ErrClosed, a *RejectError, or a store error the policy did not absorb), Do
// returns that error without calling fn.
func (q *Queue) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if err := q.Wait(ctx, n); err != nil {
		return err
	}
	return fn(ctx)
}

// Close refuses new calls with ErrClosed and wakes every sleeping call with
// ErrClosed (each gives its slot back as a cancelled call does), then waits for
// the give-backs (each bounded by the breaker's CallTimeout; once the breaker
// opens, they fail at once), so that no goroutine of the Queue outlives it. A
// call whose reservation is still in flight when Close returns gives its slot
// back itself before it returns ErrClosed. Closing twice is a no-op.
func (q *Queue) Close() {
	if q.done == nil {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	q.mu.Unlock()
	if q.local != nil {
		q.local.Close()
	}
	q.wg.Wait()
}
