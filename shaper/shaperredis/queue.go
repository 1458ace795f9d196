package shaper

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/redis/go-redis/v9"
)

// RedisQueue is the fleet-wide form of [Queue]: every process that makes a
// RedisQueue with the same client, name and rate shares one schedule in Redis, so
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
// When Redis cannot answer, RedisConfig.Policy decides: FailClosed returns the
// breaker's error, FailOpen starts the call at once, FailLocal waits on a local
// Queue with RedisConfig.LocalLimit's rate and burst (default: the shared rate).
//
// Use [NewRedisQueue]; the zero RedisQueue refuses every call with ErrClosed. A
// RedisQueue is safe for concurrent use by multiple goroutines. It starts no
// goroutine.
type RedisQueue struct {
	st       storecall.Store // the client and its breaker
	key      string
	rl       *redisLimit
	maxQueue int
	maxWait  int64 // µs; < 0 unbounded
	maxSlot  int64 // µs: the longest reservation the script arithmetic allows
	policy   breaker.Policy
	local    *Queue
	now      func() int64 // tests only (see RedisMeter.now)

	mu sync.Mutex
	// mu guards:
	waiting map[*int64]struct{} // slot times (ns since base) of sleeping calls
	closed  bool
	done    chan struct{} // closed by Close
	base    time.Time
}

// NewRedisQueue returns a fleet-wide queue named name releasing r.Count weight
// units per r.Period, configured by cfg as a local [Queue] is, with its state
// under the Redis key rcfg.Prefix + "{" + name + "}" (Prefix "shaper:q:" if
// empty). It does no I/O and starts no goroutine. It panics if r admits nothing,
// if cfg.Burst or cfg.MaxQueue is negative, or on an invalid client (see
// [NewRedisMeter]).
func NewRedisQueue(client redis.UniversalClient, name string, r Rate, cfg QueueConfig, rcfg RedisConfig) *RedisQueue {
	storecall.Check("shaper", client)
	if cfg.Burst < 0 || cfg.MaxQueue < 0 {
		panic("shaper: NewRedisQueue: negative Burst or MaxQueue")
	}
	lim := Limit{Rate: r, Burst: max(cfg.Burst, 1)}
	rl := newRedisLimit("NewRedisQueue", lim, false)
	if rcfg.Prefix == "" {
		rcfg.Prefix = "shaper:q:"
	}
	q := &RedisQueue{
		st:       rcfg.store(client, rcfg.Prefix),
		key:      rcfg.Prefix + "{" + name + "}",
		rl:       rl,
		maxQueue: cfg.MaxQueue,
		maxWait:  -1,
		policy:   rcfg.Policy,
		waiting:  make(map[*int64]struct{}),
		done:     make(chan struct{}),
		base:     time.Now(),
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
		ll := rcfg.LocalLimit
		if ll == (Limit{}) {
			ll = lim
		}
		q.local = NewQueue(ll.Rate, QueueConfig{Burst: ll.burst(), MaxQueue: cfg.MaxQueue, MaxWait: cfg.MaxWait})
	}
	return q
}

// Key returns the Redis key of the queue's schedule.
func (q *RedisQueue) Key() string { return q.key }

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
// If ctx ends during the sleep, Wait returns ctx.Err(), and if the queue is
// closed, ErrClosed; the slot is given back if it is still the last one
// reserved (one more round trip, detached from ctx). When Redis cannot answer, see
// RedisConfig.Policy. A weight of zero reserves nothing and returns nil at once. A
// negative n panics.
func (q *RedisQueue) Wait(ctx context.Context, n int64) error {
	if n < 0 {
		panic("shaper: RedisQueue.Wait: negative weight")
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
	slot := new(int64)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.maxQueue > 0 && len(q.waiting) >= q.maxQueue {
		earliest := int64(1 << 62)
		for s := range q.waiting {
			earliest = min(earliest, *s)
		}
		q.mu.Unlock()
		return reject.New(ErrQueueFull, time.Duration(earliest-int64(time.Since(q.base))))
	}
	*slot = 1 << 62
	q.waiting[slot] = struct{}{}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.waiting, slot)
		q.mu.Unlock()
	}()
	if n == 0 {
		return nil
	}

	budget, reason := q.maxSlot, ErrMaxWait // a slot beyond maxSlot is too far for any MaxWait
	if q.maxWait >= 0 {
		budget = min(budget, q.maxWait)
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := max(0, int64(time.Until(dl)/time.Microsecond)); left < budget {
			budget, reason = left, ErrDeadline
		}
	}
	args := []any{q.rl.args[0], q.rl.args[1], q.rl.args[2], n, budget}
	if q.now != nil {
		args = append(args, q.now())
	}
	var fallback func(context.Context) ([7]int64, error)
	if q.local != nil {
		fallback = func(context.Context) ([7]int64, error) { return [7]int64{-1}, nil }
	}
	r, src, err := storecall.Do(ctx, &q.st, q.policy, func(ctx context.Context, client redis.UniversalClient) ([7]int64, error) {
		var out [7]int64
		if err := evalKey(ctx, client, reserveScript, q.key, out[:], args...); err != nil {
			return out, err
		}
		if out[0] != 0 && out[0] != 1 || out[1] < 0 {
			return out, errors.New("shaper: unexpected reserve reply")
		}
		return out, nil
	}, fallback)
	switch src {
	case breaker.Degraded:
		return nil
	case breaker.FromFallback:
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
	wait := micros(r[1])
	if wait <= 0 {
		return nil
	}
	q.mu.Lock()
	*slot = int64(time.Since(q.base) + wait)
	q.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		q.unreserve(ctx, r)
		return ctx.Err()
	case <-q.done:
		q.unreserve(ctx, r)
		return ErrClosed
	}
}

// unreserve gives back the reservation r of a call that gave up before its slot,
// if no later reservation was made since (see lua/unreserve.lua). It is
// best-effort cleanup: detached from ctx's cancellation, bounded by one second
// and the breaker, and its errors are dropped (the slot then stays used).
func (q *RedisQueue) unreserve(ctx context.Context, r [7]int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	args := []any{q.rl.args[0], q.rl.args[1], q.rl.args[2], 0, r[3], r[4], r[5], r[6]}
	if q.now != nil {
		args = append(args, q.now())
	}
	storecall.Do(ctx, &q.st, breaker.FailClosed, func(ctx context.Context, client redis.UniversalClient) (any, error) {
		return unreserveScript.Run(ctx, client, []string{q.key}, args...).Result()
	}, nil)
}

// Do waits for one slot of weight n as Wait does, then calls fn(ctx) once and
// returns its error, like [Queue.Do]. If Wait fails (ctx.Err(), ErrClosed, a
// *RejectError, or a store error the policy did not absorb), Do returns that
// error without calling fn.
func (q *RedisQueue) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if err := q.Wait(ctx, n); err != nil {
		return err
	}
	return fn(ctx)
}

// Close refuses new calls with ErrClosed and wakes every sleeping call with
// ErrClosed (each gives its slot back as a cancelled call does). Close itself
// never blocks and does no I/O. Closing twice is a no-op.
func (q *RedisQueue) Close() {
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
}
