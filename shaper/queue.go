package shaper

import (
	"context"
	"math"
	"sync"
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// QueueConfig configures a [Queue] (and a shaperredis.Queue). The zero value is a valid
// QueueConfig: no burst, no bound on the backlog, no bound on the wait other than
// the caller's context.
type QueueConfig struct {
	// Burst is the largest total weight released at once after a quiet period. If
	// zero, 1: calls are released evenly spaced, one emission interval apart.
	Burst int64

	// MaxQueue bounds the number of calls waiting for their slot. A call that
	// would exceed it fails at once with a *RejectError matching ErrQueueFull. If
	// zero, the backlog is unbounded.
	MaxQueue int

	// MaxWait bounds how long a call may wait for its slot. A call whose slot is
	// further away fails at once with a *RejectError matching ErrMaxWait, and
	// takes no slot. If zero, calls wait as long as their context allows. If
	// negative, calls never wait: only a call whose slot is now is admitted.
	MaxWait time.Duration

	// Observer, if non-nil, is told of every call of weight n > 0, with
	// Component floodgate.ComponentQueue: KindAdmit when its slot came
	// (Duration: how long it waited, 0 if released at once, when the clock is
	// not read for it), KindReject when it was refused (Reason: the word of
	// the error, Err: the error; Duration: the wait before a Close), and
	// KindCancel when its context ended first (Duration: the wait). It is
	// called without any lock held and may call back into the Queue. (A
	// shaperredis.Queue reports to its Config.Observer when that is set.)
	Observer floodgate.Observer
}

// Queue is a leaky bucket used as a traffic shaper: a FIFO of calls, each with a
// weight, released at Rate (weight units per period) with an optional burst. Calls
// wait rather than fail, within the bounds of QueueConfig; it answers "how do I
// send work to a downstream at a steady pace", for background jobs, where waiting
// is acceptable (for interactive requests use a meter such as [Meter]). It smooths
// bursts by delaying them; it rejects only when the backlog or the wait would
// exceed its bounds, and says how long to wait in that case.
//
// # Virtual schedule
//
// Slots come from a schedule kept as a theoretical arrival time (GCRA in nanoseconds
// of the monotonic clock): the item at the head of the queue is due at tat − τ,
// where τ = (Burst−1)·interval, and releasing an item of weight k advances tat by
// k·interval, from the previous tat when the queue is busy, or from the arrival time
// when it was idle. Release times never feed back into the schedule, so a wake-up
// that comes late (sub-millisecond sleeps are coarse on many machines) does not
// lower the rate: everything whose slot has passed is released together, and the
// lateness (the timer's, and the time to resume the woken caller) becomes a credit
// of at most 10 ms. A caller arriving within that credit of the schedule is
// scheduled as if the wake-up had been punctual; one arriving further behind, within
// 10 ms of the late wake-up, restarts the schedule that much before now, so it
// loses only its own time away, not the Queue's lateness (a loop at 1M/s, whose
// slots are 1 µs apart, would otherwise lose a whole late wake-up each time its own
// work between two calls took more than 1 µs). The long-run rate therefore does not
// depend on the timer's resolution, at the price of short bursts: over any window,
// at most lateness×Rate items more than the rate and Burst allow. No item is
// released before its slot.
//
// Time a caller spends away from Wait (its own work between calls, or being
// descheduled) is not credited beyond Burst and that credit, as in any GCRA: a caller
// that comes back late is a new arrival. A worker that loops over Wait (or
// [Queue.Do]) and must keep the rate through such pauses sets Burst to the number of
// items that may be caught up after one, for example 10 ms worth of items.
//
// An item whose weight is larger than Burst is not refused: it is released when its
// turn comes and the weight is paid by the items after it.
//
// # Cancellation
//
// A call whose context ends while it waits is removed, and everyone behind it moves
// up: a cancelled call never consumes rate. If the slot was granted at the same
// moment the context ended, the grant is given back (the schedule is recomputed as
// if the call had never been there), unless later items were already released after
// it, in which case they have used the slot.
//
// The zero Queue refuses every call with ErrClosed; use [NewQueue]. A Queue is safe
// for concurrent use by multiple goroutines. It starts no goroutine; a timer (a
// runtime timer, not a goroutine) wakes the head of the queue, and Close stops it.
type Queue struct {
	// Immutable after NewQueue.
	rate      Rate
	period    int64 // ns
	count     int64
	tau       int64 // ns
	maxWeight int64
	maxQueue  int
	maxWait   int64 // ns; <0 means unbounded
	base      time.Time
	obs       floodgate.Observer

	mu sync.Mutex
	// mu guards:
	tat      vtime     // schedule after every released item
	lag      int64     // lateness credit, ns (see releaseDueLocked)
	lagAt    int64     // when lag was last set, ns
	waiters  []*waiter // FIFO; waiters[0] is the head
	timer    *time.Timer
	timerAt  int64 // slot the timer is armed for; -1 if stopped
	closed   bool
	drained  chan struct{} // closed when the last waiter leaves after Shutdown
	batchSeq uint64        // identifies the latest release batch
	batchTat vtime         // tat before the latest batch
	batch    []*waiter     // waiters released in the latest batch
	stats    Stats
}

// Stats is a snapshot of a Queue's counters.
type Stats struct {
	Rate     Rate
	Waiting  int           // calls waiting now
	Backlog  int64         // total weight of the waiting calls
	Delay    time.Duration // wait a call of weight 1 arriving now would have
	Released uint64        // calls admitted since NewQueue
	Rejected uint64        // calls refused (ErrQueueFull, ErrMaxWait, ErrDeadline)
	Canceled uint64        // calls whose context ended while waiting

	// Rejected by reason: the first three add up to Rejected; calls refused
	// with ErrTooLarge are counted only here.
	RejectedQueueFull uint64
	RejectedMaxWait   uint64
	RejectedDeadline  uint64
	RejectedTooLarge  uint64
}

// vtime is an exact point of the schedule: ns + rem/count nanoseconds.
type vtime struct{ ns, rem int64 }

// after returns v advanced by the weight of k items.
func (q *Queue) after(v vtime, k int64) vtime {
	x := k*q.period + v.rem
	return vtime{v.ns + x/q.count, x % q.count}
}

// maxLag caps the lateness credit (see releaseDueLocked).
const maxLag = int64(10 * time.Millisecond)

type waiter struct {
	n       int64
	arrival int64 // ns
	slot    int64 // ns: release time
	end     vtime // schedule after this item
	ready   chan struct{}
	state   int // waiting, granted or closed; guarded by Queue.mu
	batch   uint64
}

const (
	waiting = iota
	granted
	closedOut
)

// NewQueue returns a Queue that releases r.Count weight units per r.Period. It
// panics if r.Count ≤ 0, r.Period ≤ 0, cfg.Burst < 0 or cfg.MaxQueue < 0. It starts
// no goroutine.
func NewQueue(r Rate, cfg QueueConfig) *Queue {
	if r.Count <= 0 || r.Period <= 0 {
		panic("shaper: NewQueue: rate admits nothing")
	}
	if cfg.Burst < 0 {
		panic("shaper: NewQueue: negative Burst")
	}
	if cfg.MaxQueue < 0 {
		panic("shaper: NewQueue: negative MaxQueue")
	}
	b := max(cfg.Burst, 1)
	p := int64(r.Period)
	q := &Queue{
		rate:      r,
		period:    p,
		count:     r.Count,
		maxWeight: math.MaxInt64 / 2 / p,
		maxQueue:  cfg.MaxQueue,
		maxWait:   int64(cfg.MaxWait),
		base:      time.Now(),
		timerAt:   -1,
		obs:       cfg.Observer,
	}
	if cfg.MaxWait == 0 {
		q.maxWait = -1
	} else if cfg.MaxWait < 0 {
		q.maxWait = 0
	}
	if b-1 > q.maxWeight {
		panic("shaper: NewQueue: Burst too large")
	}
	q.tau = q.after(vtime{}, b-1).ns
	return q
}

func (q *Queue) now() int64 { return int64(time.Since(q.base)) }

// Wait blocks until a slot for weight n is released, and returns nil. Calls are
// served in arrival order. Wait fails without waiting and without changing the
// schedule:
//   - with ctx.Err() if ctx is already done;
//   - with ErrClosed after Close or Shutdown;
//   - with a *RejectError matching ErrQueueFull if MaxQueue calls are already
//     waiting (RetryAfter: until the head of the queue is released);
//   - with a *RejectError matching ErrMaxWait if the slot is further away than
//     MaxWait, or ErrDeadline if it comes after ctx's deadline (RetryAfter: how
//     much later a call with the same budget could be admitted, if nothing else
//     arrives); ErrDeadline is not context.DeadlineExceeded;
//   - with a *RejectError matching ErrTooLarge if n is so large that the schedule
//     would overflow (over about 2^62 ns of rate).
//
// If ctx ends while waiting, Wait returns ctx.Err() and the slot goes to the calls
// behind. If the Queue is closed while waiting, Wait returns ErrClosed. A weight of
// zero waits for the calls ahead without consuming rate. A negative n panics.
func (q *Queue) Wait(ctx context.Context, n int64) error {
	if n < 0 {
		panic("shaper: Queue.Wait: negative weight")
	}
	waited, err := q.wait(ctx, n)
	if q.obs != nil && n > 0 {
		q.observe(ctx, n, waited, err)
	}
	return err
}

// wait is Wait without its observer; it returns how long the call waited (0
// if it did not queue).
func (q *Queue) wait(ctx context.Context, n int64) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	if q.closed || q.count == 0 {
		q.mu.Unlock()
		return 0, ErrClosed
	}
	if n > q.maxWeight {
		q.stats.RejectedTooLarge++
		q.mu.Unlock()
		return 0, reject.New(ErrTooLarge, 0)
	}
	now := q.now()
	q.releaseDueLocked(now)
	slot, start, due := q.slotLocked(now, n)
	if due {
		q.mu.Unlock()
		return 0, nil
	}
	if err := q.refuseLocked(ctx, now, slot); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	w := &waiter{n: n, arrival: now, slot: slot, end: q.after(start, n), ready: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		q.armLocked(now)
	}
	q.mu.Unlock()
	return q.await(ctx, w)
}

// slotLocked returns the slot of a call of weight n arriving at now and the
// schedule point it starts from. If the slot is due at once (the queue is
// empty and the schedule allows it), it takes it and reports due.
func (q *Queue) slotLocked(now, n int64) (slot int64, start vtime, due bool) {
	if len(q.waiters) > 0 {
		start = q.waiters[len(q.waiters)-1].end
		if start.ns < now {
			start = vtime{ns: now}
		}
		return max(now, start.ns-q.tau), start, false
	}
	if q.tat.ns < now-q.lag {
		// Behind the schedule by more than the credit: the caller's own
		// time away is lost, the credit of a recent late wake-up is not;
		// after maxLag without one the Queue was idle.
		if q.lag > 0 && now-q.lagAt <= maxLag {
			q.tat = vtime{ns: now - q.lag}
		} else {
			q.tat, q.lag = vtime{ns: now}, 0
		}
	}
	start = q.tat
	slot = start.ns - q.tau
	if slot > now {
		return slot, start, false
	}
	// Due now. A batch of one, so a later raced cancellation cannot give
	// back a slot this call used.
	q.batchSeq++
	q.batch = q.batch[:0]
	q.tat = q.after(q.tat, n)
	q.stats.Released++
	return slot, start, true
}

// refuseLocked returns the refusal of a call arriving at now whose slot is
// slot, if the backlog is full or the slot is beyond its budget (MaxWait or
// ctx's deadline), counting it; nil if the call may wait.
func (q *Queue) refuseLocked(ctx context.Context, now, slot int64) error {
	if q.maxQueue > 0 && len(q.waiters) >= q.maxQueue {
		q.stats.Rejected++
		q.stats.RejectedQueueFull++
		return reject.New(ErrQueueFull, time.Duration(q.waiters[0].slot-now))
	}
	budget, reason := q.maxWait, ErrMaxWait
	if dl, ok := ctx.Deadline(); ok {
		left := int64(dl.Sub(q.base)) - now
		if budget < 0 || left < budget {
			budget, reason = max(left, 0), ErrDeadline
		}
	}
	wait := slot - now
	if budget < 0 || wait <= budget {
		return nil
	}
	q.stats.Rejected++
	if reason == ErrMaxWait {
		q.stats.RejectedMaxWait++
	} else {
		q.stats.RejectedDeadline++
	}
	return reject.New(reason, time.Duration(wait-budget))
}

// await waits for w, queued, to be released, closed out or cancelled, and
// returns how long it waited.
func (q *Queue) await(ctx context.Context, w *waiter) (time.Duration, error) {
	select {
	case <-w.ready:
		// The caller resumes later than the slot: by the timer's lateness
		// plus the time to wake this goroutine. Both are the Queue's doing,
		// so both become lateness credit for the caller's next arrival.
		q.mu.Lock()
		now := q.now()
		if late := min(now-w.slot, maxLag); late > q.lag && w.state != closedOut {
			q.lag, q.lagAt = late, now
		}
		q.mu.Unlock()
		if w.state == closedOut {
			return time.Duration(now - w.arrival), ErrClosed
		}
		return time.Duration(now - w.arrival), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	switch w.state {
	case waiting:
		q.removeLocked(w)
	case granted:
		q.giveBackLocked(w)
	}
	q.stats.Canceled++
	waited := time.Duration(q.now() - w.arrival)
	q.mu.Unlock()
	return waited, ctx.Err()
}

// observe tells the observer the outcome of a Wait of weight n.
func (q *Queue) observe(ctx context.Context, n int64, waited time.Duration, err error) {
	e := floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentQueue, N: n, Duration: waited}
	switch {
	case err == nil:
	case err == ctx.Err():
		e.Kind = floodgate.KindCancel
	default:
		e.Kind, e.Reason, e.Err = floodgate.KindReject, reject.ReasonOf(err), err
	}
	q.obs.Observe(e)
}

// Do waits for one slot of weight n as Wait does, then calls fn(ctx) once and
// returns its error. If Wait fails (ctx.Err(), ErrClosed, or a *RejectError), Do
// returns that error without calling fn. The slot is taken before fn is called,
// so calls to fn start at most at the Queue's rate, shared with every other caller
// of the Queue; how long fn runs is not limited (pair the Queue with a semaphore
// for that). A worker that starts jobs one after another calls Do once per job.
func (q *Queue) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if err := q.Wait(ctx, n); err != nil {
		return err
	}
	return fn(ctx)
}

// releaseDueLocked releases, in order, every waiter whose slot is at or before now.
// The lateness of the last one released becomes the lateness credit (raised again
// when that waiter's goroutine actually resumes, in Wait): a caller that arrives
// while the schedule is behind real time by no more than that credit is scheduled
// from tat rather than from now, so late wake-ups do not lower the rate. An arrival
// that finds the schedule further behind restarts it at now less the credit if the
// credit was earned in the last maxLag (see slotLocked), else at now: the Queue was
// idle (credit 0).
func (q *Queue) releaseDueLocked(now int64) {
	n := 0
	for n < len(q.waiters) && q.waiters[n].slot <= now {
		n++
	}
	if n == 0 {
		return
	}
	q.batchSeq++
	q.batchTat = q.tat
	q.batch = q.batch[:0]
	for _, w := range q.waiters[:n] {
		w.state, w.batch = granted, q.batchSeq
		close(w.ready)
		q.batch = append(q.batch, w)
		q.tat = w.end
	}
	q.lag, q.lagAt = min(now-q.waiters[n-1].slot, maxLag), now
	q.stats.Released += uint64(n)
	clear(q.waiters[:n])
	q.waiters = q.waiters[n:]
	q.afterHeadChangeLocked(now)
}

// afterHeadChangeLocked re-arms the timer for the new head and signals Shutdown.
func (q *Queue) afterHeadChangeLocked(now int64) {
	if len(q.waiters) == 0 {
		q.waiters = q.waiters[:0:0] // drop the backing array of a long queue
		if q.drained != nil {
			close(q.drained)
			q.drained = nil
		}
	}
	q.armLocked(now)
}

// armLocked arms the timer for the head's slot, or stops it if nobody waits.
func (q *Queue) armLocked(now int64) {
	if len(q.waiters) == 0 {
		if q.timer != nil && q.timerAt >= 0 {
			q.timer.Stop()
			q.timerAt = -1
		}
		return
	}
	at := q.waiters[0].slot
	if at == q.timerAt {
		return
	}
	q.timerAt = at
	if q.timer == nil {
		q.timer = time.AfterFunc(time.Duration(at-now), q.fire)
	} else {
		q.timer.Reset(time.Duration(at - now))
	}
}

func (q *Queue) fire() {
	q.mu.Lock()
	now := q.now()
	q.timerAt = -1
	q.releaseDueLocked(now)
	q.armLocked(now)
	q.mu.Unlock()
}

// removeLocked removes a waiting w and moves everyone behind it up.
func (q *Queue) removeLocked(w *waiter) {
	i := 0
	for q.waiters[i] != w {
		i++
	}
	copy(q.waiters[i:], q.waiters[i+1:])
	q.waiters[len(q.waiters)-1] = nil
	q.waiters = q.waiters[:len(q.waiters)-1]
	prev := q.tat
	if i > 0 {
		prev = q.waiters[i-1].end
	}
	q.rescheduleLocked(i, prev)
	now := q.now()
	if i == 0 {
		q.afterHeadChangeLocked(now)
	}
	// Moving up may have made slots due already.
	q.releaseDueLocked(now)
}

// rescheduleLocked recomputes the slots of waiters[i:] from the schedule point prev.
func (q *Queue) rescheduleLocked(i int, prev vtime) {
	for _, w := range q.waiters[i:] {
		start := prev
		if start.ns < w.arrival {
			start = vtime{ns: w.arrival}
		}
		w.slot = max(w.arrival, start.ns-q.tau)
		w.end = q.after(start, w.n)
		prev = w.end
	}
}

// giveBackLocked undoes the grant of w, whose context ended as it was released.
// If w was released in the latest batch, the schedule is recomputed from before that
// batch without w: the other members of the batch were released at or after their
// slots in that schedule, so nothing is released early. Otherwise later items have
// already been released after w's slot and it cannot be given back.
func (q *Queue) giveBackLocked(w *waiter) {
	if w.batch != q.batchSeq {
		return
	}
	t := q.batchTat
	kept := q.batch[:0]
	for _, b := range q.batch {
		if b == w {
			continue
		}
		kept = append(kept, b)
		if t.ns < b.arrival {
			t = vtime{ns: b.arrival}
		}
		t = q.after(t, b.n)
	}
	clear(q.batch[len(kept):])
	q.batch = kept
	q.tat = t
	q.stats.Released--
	if len(q.waiters) > 0 {
		q.rescheduleLocked(0, q.tat)
		now := q.now()
		q.timerAt = -1 // the head's slot may have moved
		q.armLocked(now)
		q.releaseDueLocked(now)
	}
}

// Close refuses new calls with ErrClosed, fails every waiting call with ErrClosed and
// stops the timer. It never blocks. Closing twice is a no-op.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	for _, w := range q.waiters {
		w.state = closedOut
		close(w.ready)
	}
	clear(q.waiters)
	q.waiters = nil
	if q.timer != nil {
		q.timer.Stop()
		q.timerAt = -1
	}
	if q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
	q.mu.Unlock()
}

// Shutdown refuses new calls with ErrClosed and waits until every waiting call has
// been released on schedule (drained), then returns nil. If ctx ends first, it
// closes the Queue (the remaining waiters get ErrClosed) and returns ctx.Err().
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	if len(q.waiters) == 0 {
		q.mu.Unlock()
		return nil
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	drained := q.drained
	q.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		q.Close()
		return ctx.Err()
	}
}

// Stats returns a snapshot of the Queue's state and counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Rate = q.rate
	if q.count == 0 {
		return s
	}
	s.Waiting = len(q.waiters)
	for _, w := range q.waiters {
		s.Backlog += w.n
	}
	now := q.now()
	start := q.tat
	if len(q.waiters) > 0 {
		start = q.waiters[len(q.waiters)-1].end
	}
	if len(q.waiters) == 0 && start.ns < now-q.lag {
		return s
	}
	s.Delay = time.Duration(max(0, start.ns-q.tau-now))
	return s
}
