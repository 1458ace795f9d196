package distsem

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
)

// A Permit is weight held on a Semaphore, until Release or until its lease is
// lost. Its lease is renewed every Lease/3 by the Semaphore's renewal schedule
// (one timer for all its permits; a goroutine exists only while a renewal call
// is in flight); Release takes it off the schedule and cancels a renewal in
// flight, without waiting for it, before it sends the release. A Permit is
// safe for simultaneous use by multiple goroutines. The zero Permit is not
// usable: get one from Acquire or TryAcquire.
type Permit struct {
	s      *Semaphore
	token  string
	tokArg any // token, boxed once for the script calls
	weight int64
	fence  int64
	kind   permitKind
	// counted: the weight is also held on the local fallback share.
	counted bool
	// tomb: the release writes a tombstone, because more than one acquire call
	// carried this token (a retry or a heartbeat), and an earlier one could
	// still run in Redis after the release and grant the token to no one.
	tomb bool
	// entry is the key of a Keyed the permit holds (nil for a Semaphore's):
	// the first Release lets it go.
	entry *keyEntry

	mu sync.Mutex
	// mu guards:
	released bool
	isLost   bool
	// carried: a FailLocal permit that Redis now counts (see carry): from
	// then on it is renewed, released and can be lost like a Redis permit.
	carried bool
	cause   error // ErrLeaseLost or ErrReleased once the permit ended
	// ctx and lost are made on first use (Context, Lost): most permits never
	// need them.
	ctx        context.Context
	cancel     context.CancelCauseFunc
	lost       chan struct{}
	deadline   time.Time          // local deadline: last successful renewal's send time + Lease
	granted    time.Time          // when the grant was seen (hold-time estimates)
	acquiredAt time.Time          // when Acquire returned it, if Config.Observer is set
	stopCall   context.CancelFunc // cancels the renewal in flight; nil when none is
	closeWaits bool               // Release counted the renewal in flight in s.bg (see renew)

	// Guarded by the Semaphore's renewals.mu: the permit's place in the
	// renewal schedule.
	due  time.Time
	slot int // 1 + its index in renewals.heap; 0 when not scheduled
}

type permitKind uint8

const (
	permitRedis permitKind = iota // held in Redis, renewed
	permitLocal                   // FailLocal: held on the local share only
	permitOpen                    // FailOpen: held nowhere
)

// newPermit returns a Redis permit for token tok (a string) and schedules its
// renewal. Its lease at the store lasts at least lease after sent (the send
// time of the acquire call that granted it, or of the last call that left it
// queued for a hand-off), so sent + lease is a safe local deadline. The first
// renewal is due after Lease/3, or after half of what is left before the
// local deadline if that is sooner: a hand-off grant lives only for the
// waiter's claim window (see Config.WaiterTTL) until its first renewal
// extends it to the full Lease. tomb is whether its release must write a
// tombstone (see Permit.tomb); it is set here, before the permit is scheduled
// and the renewal timer can reach it. counted is whether n was taken from
// the local share for it already.
func (s *Semaphore) newPermit(tok any, n, fence int64, sent time.Time, lease time.Duration, tomb, counted bool) *Permit {
	p := s.basePermit(n, permitRedis)
	p.tokArg, p.fence, p.tomb = tok, fence, tomb
	p.token, _ = tok.(string)
	p.counted = counted || s.fail.countRedis(n)
	p.deadline = sent.Add(lease)
	p.granted = time.Now()
	s.renewals.add(p, p.granted.Add(min(s.cfg.Lease/3, p.deadline.Sub(p.granted)/2)))
	return p
}

func (s *Semaphore) basePermit(w int64, kind permitKind) *Permit {
	return &Permit{s: s, weight: w, kind: kind}
}

// Fence returns the permit's fencing number: unique per grant and increasing
// across grants of one semaphore (it is max(previous+1, Redis time in µs)), so it
// keeps increasing after the semaphore's state was lost unless the Redis clock
// steps back. 0 for a permit granted without Redis by the failure policy.
func (p *Permit) Fence() int64 { return p.fence }

// Weight returns the weight held: the n of the Acquire that returned it.
func (p *Permit) Weight() int64 { return p.weight }

// Degraded reports whether the permit was granted without Redis by the failure
// policy (FailOpen or FailLocal). A FailLocal permit stays Degraded once it is
// carried into Redis (see the package doc's over-admission bounds).
func (p *Permit) Degraded() bool { return p.kind != permitRedis }

// Lost returns a channel closed when the lease is lost: Redis no longer held the
// token when renewing (and Config.Readopt could not re-adopt it), or no renewal
// succeeded before the local deadline (the send time of the last successful
// renewal plus Lease, on the monotonic clock). It is never closed by Release.
func (p *Permit) Lost() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		p.lost = make(chan struct{})
		if p.isLost {
			close(p.lost)
		}
	}
	return p.lost
}

// Context returns a context cancelled when the lease is lost (cause
// ErrLeaseLost) or the permit is released (cause ErrReleased). Work that must
// stop when the permit is no longer held runs under it, or under a context
// derived from the caller's with context.AfterFunc; Semaphore.Do does that.
func (p *Permit) Context() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancelCause(context.Background())
		if p.cause != nil {
			p.cancel(p.cause)
		}
	}
	return p.ctx
}

// endLocked records why the permit ended and cancels its context, if made.
// The first cause wins.
func (p *Permit) endLocked(cause error) {
	if p.cause != nil {
		return
	}
	p.cause = cause
	if p.cancel != nil {
		p.cancel(cause)
	}
}

// Release gives the permit back. Renewal is stopped and a renewal in flight is
// cancelled, but not waited for (Close waits for it), so a renewal call that
// hangs cannot delay Release. An intentional release is never reported as a lost lease: a
// renewal that returns after Release finds the permit released. The release
// call is detached from ctx's cancellation (the breaker's CallTimeout bounds it), so a
// cancelled request still frees its permit. If it fails, it is retried in the
// background until the lease would have expired, and the error is returned.
// Release is idempotent: later calls return nil.
func (p *Permit) Release(ctx context.Context) error {
	first, wasLost, carried := p.markReleased()
	if !first {
		return nil
	}
	if p.entry != nil {
		defer p.entry.released() // the key stays live until the release is done
	}
	s := p.s
	if s.cfg.Observer != nil && !wasLost {
		emit(s.cfg.Observer, floodgate.Event{Kind: floodgate.KindRelease, N: p.weight, Duration: time.Since(p.acquiredAt)})
	}
	s.fail.release(p, carried)
	if p.kind != permitRedis && !carried {
		if p.tomb {
			// A carry call was sent and may still run in Redis: the token is
			// released (tombstoned) in the background so that it cannot be
			// counted there for a Lease with no one holding it.
			s.cleanup(p.tokArg)
		}
		return nil
	}
	// Detached from ctx's cancellation (WithoutCancel allocates: skip it when
	// ctx can never be cancelled).
	if _, ok := ctx.Deadline(); ok || ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	// The grant was seen. If the token's only acquire call was the one that
	// granted it, no late acquire of it can be pending and no tombstone is
	// needed, unless a late renewal could re-adopt the token.
	_, _, _, err := s.call(ctx, breaker.FailClosed, releaseScript, p.tokArg, s.releaseNums(0, s.cfg.Readopt || p.tomb, p.weight))
	if err != nil {
		s.cleanup(p.tokArg)
		return fmt.Errorf("distsem: release %q: %w", s.name, err)
	}
	return nil
}

// markReleased marks p released, once: it takes p off the renewal schedule,
// cancels a renewal (or carry) call in flight and ends p's context with
// ErrReleased. It reports whether this was the first call, whether the lease
// had been lost, and whether p was carried into Redis.
func (p *Permit) markReleased() (first, wasLost, carried bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return false, false, false
	}
	p.released = true
	wasLost = p.isLost
	if !wasLost {
		p.s.local.held.Add(-p.weight)
	}
	if p.kind != permitOpen { // a FailLocal permit is on the schedule to be carried
		if p.kind == permitRedis && !p.isLost {
			p.s.observeHold(time.Since(p.granted))
		}
		p.s.renewals.remove(p)
		// The renewal in flight, if any, is cancelled and not waited for:
		// a call stuck in a client or hook that ignores its context would
		// hold Release (and the weight) without bound. So Release's call
		// may run in Redis before that renewal, which is safe:
		//   - Without Config.Readopt, renew.lua only extends a token that is
		//     held (ZADD XX): run after the release, it writes nothing.
		//   - With Readopt it could insert the token again, so the release
		//     writes a tombstone (always_tomb in Release), and renew.lua does not
		//     re-adopt a tombstoned token.
		//   - A renewal that reaches Redis only after the tombstone is gone
		//     (expired, TombstoneTTL after the release, and then swept by a
		//     later release, which is the only call that removes expired
		//     tombstones) re-adopts the token; if it answers, renewed
		//     releases the token again, and if it never does, the token
		//     expires by its lease. Re-adoption only takes free capacity, so
		//     the limit holds meanwhile.
		// Waiting ordered the two calls only for a renewal that answered: one
		// that timed out at the client may still run in Redis later, and
		// relied on the tombstone as it does now.
		if p.stopCall != nil {
			p.stopCall()
			// Close waits for the call's goroutine instead (see renew).
			p.closeWaits = p.s.track()
		}
	}
	p.endLocked(ErrReleased)
	return true, wasLost, p.carried
}

// renewDue runs when the permit's renewal is due (from the schedule): it loses
// the permit if its local deadline has passed, and otherwise starts one
// renewal call, bounded by the local deadline, in a goroutine of its own.
func (p *Permit) renewDue() {
	lost := false
	defer func() { // after the unlock below
		if lost {
			p.s.logLost(p)
			p.observeRenew(false, nil, true)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.isLost {
		return
	}
	if p.s.renewals.scheduled(p) {
		// Back on the schedule since the timer took it off: the renewal in
		// flight returned in between and set the next due time (and maybe a
		// new deadline). Renewing now would be a spurious call.
		return
	}
	if p.kind == permitLocal && !p.carried {
		// Not carried into Redis yet: it has no lease and no local deadline.
		// A carry call in flight puts it back on the schedule when it returns.
		if p.stopCall == nil {
			ctx, cancel := context.WithCancel(context.Background())
			p.stopCall = cancel
			go p.renew(ctx, cancel, carryArg)
		}
		return
	}
	if !time.Now().Before(p.deadline) {
		p.loseLocked()
		lost = true
		return
	}
	if p.stopCall != nil { // due early while its call hangs: wait for the deadline
		p.s.renewals.add(p, p.deadline)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), p.deadline)
	p.stopCall = cancel
	// Also due at the local deadline, where it is lost even if the call,
	// though its context ends there, has not returned (a hook or client that
	// ignores the context, a slow breaker Observer).
	p.s.renewals.add(p, p.deadline)
	go p.renew(ctx, cancel, b2i(p.s.cfg.Readopt))
}

// carryArg is renew.lua's mode for a carry call (see Permit.carry).
const carryArg = 2

// renew makes one renewal call, or a carry call (mode carryArg; otherwise
// whether to re-adopt: see renew.lua's mode); see renewed for what
// follows. A renewal's context ends at the local deadline, so that a hung
// call cannot delay the loss past it; a carry call's is bounded by the
// breaker's CallTimeout.
func (p *Permit) renew(ctx context.Context, cancel context.CancelFunc, mode int) {
	s := p.s
	sent := time.Now()
	// Numbers: lease, mode; strings: the weight and the fence (see renew.lua).
	n := s.nums(s.cfg.Lease.Milliseconds(), int64(mode), 0, 0, 0)
	r, _, ran, err := s.call(ctx, breaker.FailClosed, renewScript, p.tokArg, n, p.weight, p.fence)
	cancel()
	releaseAgain, tracked := p.renewed(r, err, sent, ran)
	if releaseAgain {
		s.cleanup(p.tokArg) // after p.mu: it may call Redis at once
	}
	if tracked {
		s.bg.Done()
	}
}

// renewed takes the outcome of a renewal call sent at sent and schedules the
// next (Lease/3 after a success, sooner after a failure, never after the local
// deadline) unless the permit was released or lost. It reports whether the
// token must be released again (the permit was released while the call was in
// flight, since Release does not wait for it, and the call re-adopted the
// token, perhaps after the release ran in Redis), and whether Release counted
// the call's goroutine in the Semaphore's background work (tracked: the caller
// must call s.bg.Done).
func (p *Permit) renewed(r []int64, err error, sent time.Time, ran bool) (releaseAgain, tracked bool) {
	lost, report := false, false
	defer func() { // after the unlock below
		if lost {
			p.s.logLost(p)
		}
		if report || lost {
			p.observeRenew(report, err, lost)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopCall = nil
	if p.released {
		tracked, p.closeWaits = p.closeWaits, false
		return err == nil && r[0] == stReadopted, tracked
	}
	if p.isLost {
		return false, false
	}
	if p.kind == permitLocal && !p.carried {
		p.carryLocked(r, err, sent, ran)
		return false, false
	}
	report = true // a renewal of a held permit returned
	s := p.s
	// p is on the schedule at its local deadline (see renewDue), or was just
	// taken off it by the timer: each branch below puts it at its next due
	// time (add moves a scheduled permit) or takes it off (loseLocked).
	now := time.Now()
	if !now.Before(p.deadline) {
		// Past the local deadline whatever the answer: the lease may have
		// run out at the store before the call ran.
		p.loseLocked()
		lost = true
		return false, false
	}
	interval := s.cfg.Lease / 3
	switch {
	case err != nil:
		s.local.renewalErrors.Add(1)
		// Try again sooner; the local deadline decides when it is lost.
		next := now.Add(interval / 3)
		if next.After(p.deadline) {
			next = p.deadline
		}
		s.renewals.add(p, next)
	case r[0] == stRenewed || r[0] == stReadopted:
		s.local.renewals.Add(1)
		if r[0] == stReadopted {
			s.readopts.Add(1)
		}
		p.deadline = sent.Add(s.cfg.Lease)
		s.renewals.add(p, now.Add(interval))
	default:
		p.loseLocked()
		lost = true
	}
	return false, false
}

// carryLocked takes the answer of a carry call of p sent at sent (ran: it
// was sent to Redis, which may know the token from then on, so the release
// must tombstone it). A FailLocal permit is granted while Redis cannot answer
// and Redis does not count it; each carry call (renew.lua with mode carryArg)
// tells Redis of it, whatever its capacity, so that Redis grants nothing
// more until the weight is back below the limit. Once Redis answers, p is a
// Redis permit, renewed from then on, counted on the local share still and
// no longer in the share's outage weight; until then it tries again every
// carryEvery.
func (p *Permit) carryLocked(r []int64, err error, sent time.Time, ran bool) {
	s := p.s
	p.tomb = p.tomb || ran
	if err != nil || r[0] != stReadopted {
		s.renewals.add(p, time.Now().Add(s.carryEvery()))
		return
	}
	p.carried = true
	s.fail.outage.Add(-p.weight)
	s.local.carried.Add(1)
	p.deadline = sent.Add(s.cfg.Lease)
	s.renewals.add(p, time.Now().Add(s.cfg.Lease/3))
}

func (p *Permit) loseLocked() {
	p.isLost = true
	p.s.renewals.remove(p)
	p.s.lost.Add(1)
	p.s.local.held.Add(-p.weight)
	p.endLocked(ErrLeaseLost) // before Lost closes: its readers see the cause
	if p.lost != nil {
		close(p.lost)
	}
}

// renewals is the renewal schedule of a Semaphore's permits: a binary min-heap
// of permits by due time and one timer for its head, instead of two timers per
// Permit (a renewal timer and a local-deadline timer: together most of the cost
// of an uncontended acquire and release in the client). A permit is on the heap
// while it waits for its next renewal, at its local deadline while a renewal
// is in flight (so a call that hangs cannot delay the loss), and off it once it
// is released or lost. A permit whose renewals fail is due again at its local
// deadline at the latest, where it is lost.
//
// Each permit on the heap knows its place (Permit.slot), so that add, remove
// and a move of a scheduled permit take O(log n) under mu however many permits
// are scheduled: when Redis blips, every failing renewal is put back near its
// deadline, and with thousands of permits a sorted list (O(n) per insertion)
// made that O(n²) under one mutex. The timer is moved only when the head
// becomes due before it fires; when the head is removed or due later, the
// timer fires early, finds nothing due and is set for the new head.
//
// Lock order: a Permit's mu, then renewals.mu.
type renewals struct {
	mu sync.Mutex
	// mu guards (with the due and slot fields of the permits on the heap):
	heap  permitHeap
	timer *time.Timer
	armed time.Time // when timer fires; zero if it is not armed
}

// permitHeap is the schedule's heap for container/heap: heap[0] is due first,
// and every permit on it knows its place (heap[i].slot == i+1).
type permitHeap []*Permit

func (h permitHeap) Len() int           { return len(h) }
func (h permitHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h permitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i+1, j+1
}
func (h *permitHeap) Push(x any) {
	p := x.(*Permit)
	*h = append(*h, p)
	p.slot = len(*h)
}
func (h *permitHeap) Pop() any {
	old := *h
	last := len(old) - 1
	p := old[last]
	old[last] = nil // the backing array must not keep a released permit
	*h = old[:last]
	p.slot = 0
	return p
}

// add schedules p for due, or moves it to due if it is already scheduled: a
// permit is never on the heap twice.
func (rs *renewals) add(p *Permit, due time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p.due = due
	if p.slot == 0 {
		heap.Push(&rs.heap, p)
	} else {
		heap.Fix(&rs.heap, p.slot-1)
	}
	if p.slot == 1 && (rs.armed.IsZero() || due.Before(rs.armed)) {
		rs.arm(due)
	}
}

// remove takes p off the heap, if it is on it.
func (rs *renewals) remove(p *Permit) {
	rs.mu.Lock()
	rs.removeLocked(p)
	rs.mu.Unlock()
}

// scheduled reports whether p is on the heap.
func (rs *renewals) scheduled(p *Permit) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return p.slot != 0
}

func (rs *renewals) removeLocked(p *Permit) {
	if p.slot != 0 {
		heap.Remove(&rs.heap, p.slot-1)
	}
}

// takeDueLocked takes every permit due at now off the heap and appends them to
// buf, in due order.
func (rs *renewals) takeDueLocked(now time.Time, buf []*Permit) []*Permit {
	for len(rs.heap) > 0 && !rs.heap[0].due.After(now) {
		buf = append(buf, heap.Pop(&rs.heap).(*Permit))
	}
	return buf
}

func (rs *renewals) arm(t time.Time) {
	rs.armed = t
	if rs.timer == nil {
		rs.timer = time.AfterFunc(time.Until(t), rs.fire)
	} else {
		rs.timer.Reset(time.Until(t))
	}
}

// fire runs on the timer: it takes every due permit off the heap, re-arms the
// timer for the new head, and then starts the due permits' renewals. A fire
// with nothing due (the timer was moved, or the head removed) only re-arms.
func (rs *renewals) fire() {
	rs.mu.Lock()
	due := rs.takeDueLocked(time.Now(), nil)
	rs.armed = time.Time{}
	if len(rs.heap) > 0 {
		rs.arm(rs.heap[0].due)
	}
	rs.mu.Unlock()
	for _, p := range due {
		p.renewDue()
	}
}
