package semaphore

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MaxCapacity is the largest capacity a Weighted can have (2⁴⁸−1). New and Resize
// panic beyond it. The weight in use shares one atomic word with a generation
// number and a flag, which is what makes the uncontended path lock-free.
const MaxCapacity = 1<<48 - 1

// The state word: bits 0–47 hold the weight in use, bits 48–62 a generation that
// Resize bumps (so a lock-free acquire that read the old capacity fails its CAS
// even if the rest of the word looks unchanged), and bit 63, the slow bit, is set
// while callers are queued or while any goroutine is in or entering the locked
// path. While the slow bit is set, only holders of mu grant weight and only
// Release takes it back, with a CAS (holders of mu change the word with atomic
// adds and CASes, never by storing a value read earlier); while it is clear,
// Acquire, TryAcquire and Release change it with one CAS and never take mu. A
// lost acquiring CAS sends the loser through mu instead of retrying: contenders
// then serialise on mu, whose losers park while the winner keeps the cache line,
// which is what makes sync.Mutex-based x/sync fast under contention and a CAS
// retry loop slow. Release never waits for mu (see release), nor does an
// Acquire that nothing could reject (see acquirePushed).
const (
	curMask = MaxCapacity
	genUnit = 1 << 48
	genMask = (1<<15 - 1) << 48
	slowBit = 1 << 63
)

// Config configures a Weighted. The zero value is a valid Config: no bound on the
// number of waiters or on the time they wait beyond their context, early rejection
// of deadlines the queue cannot meet, and no hooks.
type Config struct {
	// MaxWaiters bounds the number of callers waiting in Acquire. A call that would
	// wait while MaxWaiters callers are already waiting is rejected at once with
	// ErrQueueFull. If zero, the queue is unbounded. If negative, no caller ever
	// waits: Acquire fails with ErrQueueFull whenever it cannot be granted at once.
	MaxWaiters int

	// MaxWait bounds how long a call waits in Acquire; after it the call fails with
	// ErrMaxWait. If zero or negative, a call waits until its context is done.
	MaxWait time.Duration

	// NoEarlyReject disables rejecting at once a call whose estimated wait ends
	// after its context deadline (ErrDeadline) or after MaxWait (ErrMaxWait). The
	// estimate comes from the throughput observed while callers waited; with
	// NoEarlyReject such calls queue and fail only when the time is actually up.
	// Default false: fail fast rather than pile up.
	NoEarlyReject bool

	// OnAcquire, if non-nil, is called after every successful Acquire or
	// TryAcquire with the weight granted and how long the call waited (0 for a
	// grant without queueing; the clock is not read on that path). It is called
	// without any lock held and may call back into the Weighted. If it panics,
	// the weight is released and the panic propagates to the caller.
	OnAcquire func(n int64, waited time.Duration)

	// OnRelease, if non-nil, is called after every Release with the weight
	// released. It is called without any lock held and may call back into the
	// Weighted.
	OnRelease func(n int64)

	// OnReject, if non-nil, is called after an Acquire is rejected, with the weight
	// asked for and the *RejectError. It is not called for context cancellation
	// nor for a TryAcquire that fails. It is called without any lock held and may
	// call back into the Weighted.
	OnReject func(n int64, err error)
}

// Weighted is a weighted semaphore with a FIFO queue: the capacity is shared by
// callers that each hold some weight, and a caller that cannot be granted waits
// behind those that came before it. Use New; a zero Weighted has capacity 0 and
// rejects every Acquire with ErrTooLarge. A Weighted is safe for simultaneous use
// by multiple goroutines.
type Weighted struct {
	// Fields are grouped by who writes them, a cache line of padding between
	// groups (whatever the alignment, no line holds two groups), so that
	// reading what rarely changes (the capacity, the Config) does not miss
	// because a neighbour was just written by another core.

	// Read-mostly: capacity changes only in Resize.
	capacity atomic.Int64
	cfg      Config
	pool     sync.Pool // of *waiter
	_        [cacheLine]byte

	// Written by every grant and release, with or without mu.
	state    atomic.Uint64 // see the constants above
	acquired atomic.Uint64 // grants on the lock-free path
	_        [cacheLine]byte

	// The locked path: mu, the fields it guards, and what is published to its
	// holders without it.
	lockers atomic.Int32 // goroutines blocked waiting for mu
	// held is set by every holder of mu right after it takes mu and cleared
	// right before it unlocks; see ensureSeen.
	held atomic.Bool
	// inbox is a stack of waiters pushed without mu by Acquire calls that found
	// mu held (see acquirePushed); every holder of mu moves them to the queue, in
	// arrival order, before anything else, and re-checks it after unlocking.
	inbox atomic.Pointer[waiter]
	// released is weight that Release took off the state word while the slow
	// bit was set, not yet seen by a holder of mu: the next holder observes it
	// and grants the waiters it lets through (see release).
	released atomic.Int64

	mu sync.Mutex
	// mu guards:
	head, tail    *waiter
	waiters       int
	waitingWeight int64
	lockedGrants  uint64 // grants made under mu; Stats adds acquired
	// Waiters granted or failed, to be signalled by unlock after mu is released,
	// linked through next.
	sigHead, sigTail *waiter
	canceled         uint64
	rejected         [numReasons]uint64
	// Throughput observed while callers wait, for estimates: obsReleased weight
	// released since obsStart (zero time when no one waits); rate is an EWMA in
	// weight per second, 0 when unknown.
	obsStart    time.Time
	obsReleased int64
	rate        float64
}

// cacheLine is the padding that keeps the groups of Weighted's fields apart:
// 64 bytes is a line on amd64 and most arm64 cores; the 128 bytes of Apple's
// are not worth doubling it for.
const cacheLine = 64

const (
	reasonQueueFull = iota
	reasonMaxWait
	reasonDeadline
	reasonTooLarge
	numReasons
)

var reasons = [numReasons]error{ErrQueueFull, ErrMaxWait, ErrDeadline, ErrTooLarge}

type waiterState uint8

const (
	waiting waiterState = iota
	granted
	failed
)

// A waiter is queued by Acquire. Waiters are pooled: ready (buffered, one value
// per grant or failure) and timer are reused, so a blocked Acquire allocates
// nothing.
type waiter struct {
	n          int64
	prev, next *waiter
	link       *waiter // below it in inbox
	ready      chan struct{}
	timer      *time.Timer
	// Set under mu before a value is sent on ready:
	state waiterState
	err   error
}

// getWaiter takes a waiter from s's own pool. The pool is per semaphore, not
// global: channels and timers belong to the testing/synctest bubble that made
// them, so sharing them between semaphores could carry one into another bubble.
func (s *Weighted) getWaiter() *waiter {
	if w, ok := s.pool.Get().(*waiter); ok {
		return w
	}
	return &waiter{ready: make(chan struct{}, 1)}
}

// New returns a Weighted with the given capacity. It panics if capacity is
// negative or larger than MaxCapacity.
func New(capacity int64, cfg Config) *Weighted {
	checkCapacity(capacity)
	s := &Weighted{cfg: cfg}
	s.capacity.Store(capacity)
	return s
}

func checkCapacity(c int64) {
	if c < 0 {
		panic("semaphore: capacity < 0")
	}
	if c > MaxCapacity {
		panic("semaphore: capacity > MaxCapacity")
	}
}

// tryFast grants n with one CAS if the slow bit is clear and n fits. It returns
// granted, or contended when the slow bit is set or the CAS lost (the caller must
// then go through mu), or neither when n does not fit right now.
func (s *Weighted) tryFast(n int64) (granted, contended bool) {
	st := s.state.Load()
	if st&slowBit != 0 {
		return false, true
	}
	if st&curMask+uint64(n) > uint64(s.capacity.Load()) {
		return false, false
	}
	if s.state.CompareAndSwap(st, st+uint64(n)) {
		s.acquired.Add(1)
		return true, false
	}
	return false, true
}

// lock enters the locked path: it takes mu and sets the slow bit, so that from
// here until unlock only holders of mu change the state word. Only a goroutine
// that has to wait for mu counts itself in lockers, so an uncontended lock costs
// one CAS, not three atomic writes.
func (s *Weighted) lock() {
	if !s.mu.TryLock() {
		s.lockers.Add(1)
		s.mu.Lock()
		s.lockers.Add(-1)
	}
	s.locked()
}

// locked sets the slow bit once mu is held, then moves the waiters pushed onto
// the inbox to the back of the queue, in arrival order, and grants those that
// fit (they may have been pushed after the weight they need was released).
func (s *Weighted) locked() {
	s.held.Store(true)
	s.absorbLocked(false)
}

// absorbLocked is locked after held is set: it sets the slow bit, takes in what
// was published without mu (released weight, pushed waiters), and grants the
// waiters that fit if anything was taken in or if grant is true.
func (s *Weighted) absorbLocked(grant bool) {
	if s.state.Load()&slowBit == 0 {
		s.state.Or(slowBit)
	}
	if s.released.Load() != 0 {
		s.observeLocked(s.released.Swap(0))
		grant = true
	}
	top := s.inbox.Load()
	if top == nil {
		if grant {
			s.grantLocked()
		}
		return
	}
	top = s.inbox.Swap(nil)
	var first *waiter
	for top != nil { // the stack is newest first: reverse it
		next := top.link
		top.link, first = first, top
		top = next
	}
	if s.obsStart.IsZero() {
		s.obsStart, s.obsReleased = time.Now(), 0
	}
	c, tooLarge := s.capacity.Load(), false
	for w := first; w != nil; {
		next := w.link
		w.link = nil
		s.pushLocked(w)
		tooLarge = tooLarge || w.n > c // pushed after a shrinking Resize
		w = next
	}
	if tooLarge {
		s.failTooLargeLocked(c)
	}
	s.grantLocked()
}

// unlock leaves the locked path, clearing the slow bit if no one is queued and
// no other goroutine is waiting for mu, then wakes the waiters granted or failed
// meanwhile. Keeping the bit set while others wait for mu is only a heuristic
// (they re-check everything once they hold it): under contention everyone
// serialises on mu instead of racing CASes against it. Waking after unlocking
// keeps the critical section short: the woken goroutine does not immediately
// contend for mu with its waker.
//
// A waiter pushed onto the inbox, or weight added to released, while mu was
// held is handled here, after mu is released: its publisher saw held set (see
// takeOrHandOff), so the loads after this Unlock see the publication (or
// another holder took it).
func (s *Weighted) unlock() {
	for {
		for {
			st := s.state.Load()
			if st&slowBit == 0 || s.head != nil || s.lockers.Load() != 0 || s.inbox.Load() != nil || s.released.Load() != 0 ||
				s.state.CompareAndSwap(st, st&^slowBit) { // lost only to a Release
				break
			}
		}
		chain := s.sigHead
		s.sigHead, s.sigTail = nil, nil
		s.held.Store(false)
		s.mu.Unlock()
		for w := chain; w != nil; {
			next := w.next // read before the send: the waiter may be reused at once
			w.next = nil
			w.ready <- struct{}{}
			w = next
		}
		if s.inbox.Load() == nil && s.released.Load() == 0 || !s.takeOrHandOff() {
			return
		}
		s.locked()
	}
}

// ensureSeen makes sure that what the caller has just published without mu (a
// waiter pushed onto inbox, or weight added to released) is handled: it takes
// mu and handles it itself, or it sees that mu has a holder that will.
func (s *Weighted) ensureSeen() {
	if s.takeOrHandOff() {
		s.locked()
		s.unlock()
	}
}

// takeOrHandOff, called after publishing to inbox or released, takes mu and
// returns true, or returns false once it has seen held set, which proves that
// a holder will see the publication: that holder clears held after the load
// that saw it set, then unlocks and loads inbox and released (sequentially
// consistent atomics order the publication before that load). A failed TryLock
// alone proves nothing: it establishes no ordering (sync.Mutex's doc) and reads
// the mutex state with a plain load, which on weakly ordered CPUs may be
// satisfied before the publication is visible. Between a holder's Lock and its
// setting held (or its clearing held and its Unlock, or while mu hands itself
// to a starving waiter) neither succeeds for a moment: it retries, and yields
// only after handOffSpins tries, since the moment is a few instructions long
// unless the holder's thread was preempted (a yield costs a trip through the
// scheduler's global run queue).
func (s *Weighted) takeOrHandOff() bool {
	for i := 0; ; i++ {
		if s.mu.TryLock() {
			return true
		}
		if s.held.Load() {
			return false
		}
		if i >= handOffSpins {
			runtime.Gosched()
		}
	}
}

const handOffSpins = 64

// signalLocked adds w, just granted or failed, to the waiters unlock wakes.
func (s *Weighted) signalLocked(w *waiter) {
	w.next = nil
	if s.sigTail == nil {
		s.sigHead = w
	} else {
		s.sigTail.next = w
	}
	s.sigTail = w
}

// Acquire acquires weight n, waiting behind earlier callers until it is granted,
// ctx is done, or Config.MaxWait passes. On success it returns nil. On failure it
// leaves the semaphore unchanged and returns:
//   - ctx.Err() if ctx is done, even when weight is free (it is checked first);
//   - a *RejectError matching ErrTooLarge at once if n exceeds the capacity;
//   - a *RejectError matching ErrQueueFull at once if Config.MaxWaiters callers
//     are already waiting;
//   - a *RejectError matching ErrDeadline or ErrMaxWait at once if the estimated
//     wait ends after ctx's deadline or after MaxWait (see Config.NoEarlyReject),
//     or matching ErrMaxWait after waiting MaxWait.
//
// If the grant races with ctx being done, the weight is given back and ctx.Err()
// returned. Acquire panics if n <= 0.
func (s *Weighted) Acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		panic("semaphore: acquire of non-positive weight")
	}
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
	}
	if ok, _ := s.tryFast(n); ok {
		if s.cfg.OnAcquire != nil { // checked here so the hot path makes no call
			s.acquiredHook(n, 0)
		}
		return nil
	}
	return s.acquireSlow(ctx, done, n)
}

func (s *Weighted) acquireSlow(ctx context.Context, done <-chan struct{}, n int64) error {
	if s.cfg.MaxWaiters == 0 && s.cfg.MaxWait <= 0 {
		if !s.mu.TryLock() {
			if _, ok := ctx.Deadline(); (!ok || s.cfg.NoEarlyReject) && n <= s.capacity.Load() {
				// Nothing could reject this call: queue it without waiting for mu.
				return s.acquirePushed(ctx, done, n)
			}
			s.lock()
		} else {
			s.locked()
		}
	} else {
		s.lock()
	}
	st := s.state.Load()
	c := s.capacity.Load()
	if n > c {
		return s.rejectLocked(n, reasonTooLarge, 0)
	}
	if s.head == nil && st&curMask+uint64(n) <= uint64(c) {
		s.state.Add(uint64(n)) // not Store: a Release may have taken weight off since
		s.lockedGrants++
		s.unlock()
		s.acquiredHook(n, 0)
		return nil
	}
	// n must wait. Decide whether it may, before changing anything.
	if m := s.cfg.MaxWaiters; m < 0 || (m > 0 && s.waiters >= m) {
		return s.rejectLocked(n, reasonQueueFull, s.estimateLocked(s.waitingWeight+n))
	}
	var now time.Time
	if !s.cfg.NoEarlyReject && s.rate > 0 {
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline || s.cfg.MaxWait > 0 { // else there is nothing to estimate against
			est := s.estimateLocked(s.waitingWeight + n)
			if hasDeadline {
				now = time.Now()
				if now.Add(est).After(dl) {
					return s.rejectLocked(n, reasonDeadline, est)
				}
			}
			if s.cfg.MaxWait > 0 && est > s.cfg.MaxWait {
				return s.rejectLocked(n, reasonMaxWait, est)
			}
		}
	}
	w := s.getWaiter()
	w.n, w.state, w.err = n, waiting, nil
	s.pushLocked(w)
	if s.obsStart.IsZero() {
		if now.IsZero() {
			now = time.Now()
		}
		s.obsStart, s.obsReleased = now, 0
	}
	s.unlock()

	var start time.Time
	if s.cfg.OnAcquire != nil {
		start = now
		if start.IsZero() {
			start = time.Now()
		}
	}
	return s.wait(ctx, done, w, start)
}

// acquirePushed queues n without taking mu, for an Acquire that found mu held
// and that nothing could reject (no MaxWaiters, no MaxWait, no deadline to
// estimate against, n within the capacity): it pushes its waiter onto the inbox,
// sets the slow bit, and leaves it to whoever holds mu to queue it (see unlock).
func (s *Weighted) acquirePushed(ctx context.Context, done <-chan struct{}, n int64) error {
	var start time.Time
	if s.cfg.OnAcquire != nil {
		start = time.Now()
	}
	w := s.getWaiter()
	w.n, w.state, w.err = n, waiting, nil
	for {
		top := s.inbox.Load()
		w.link = top
		if s.inbox.CompareAndSwap(top, w) {
			break
		}
	}
	if s.state.Load()&slowBit == 0 { // after the push: see unlock
		s.state.Or(slowBit)
	}
	s.ensureSeen()
	return s.wait(ctx, done, w, start)
}

// wait blocks a queued waiter until it is signalled, ctx is done, or MaxWait
// passes.
func (s *Weighted) wait(ctx context.Context, done <-chan struct{}, w *waiter, start time.Time) error {
	var timeout <-chan time.Time
	if s.cfg.MaxWait > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(s.cfg.MaxWait)
		} else {
			w.timer.Reset(s.cfg.MaxWait)
		}
		timeout = w.timer.C
	}

	if done == nil && timeout == nil { // a plain receive is cheaper than a select
		<-w.ready
		return s.woken(ctx, done, w, start)
	}
	select {
	case <-w.ready:
		return s.woken(ctx, done, w, start)
	case <-done:
		return s.abandon(ctx, w, -1)
	case <-timeout:
		return s.abandon(ctx, w, reasonMaxWait)
	}
}

// woken finishes an Acquire whose waiter was signalled: granted, or failed by a
// Resize.
func (s *Weighted) woken(ctx context.Context, done <-chan struct{}, w *waiter, start time.Time) error {
	n, err := w.n, w.err
	s.putWaiter(w)
	if err != nil {
		if s.cfg.OnReject != nil {
			s.cfg.OnReject(n, err)
		}
		return err
	}
	if done != nil {
		select {
		case <-done: // the grant raced with cancellation: give it back
			s.lock()
			s.canceled++
			s.unlock()
			s.release(n)
			return ctx.Err()
		default:
		}
	}
	if s.cfg.OnAcquire != nil {
		s.acquiredHook(n, time.Since(start))
	}
	return nil
}

// acquiredHook calls Config.OnAcquire, if set, for a grant of n. If the hook
// panics, the weight is released before the panic goes on, so a panicking hook
// cannot leak capacity (the caller never got to defer its Release).
func (s *Weighted) acquiredHook(n int64, waited time.Duration) {
	if s.cfg.OnAcquire == nil {
		return
	}
	ok := false
	defer func() {
		if !ok {
			s.release(n)
		}
	}()
	s.cfg.OnAcquire(n, waited)
	ok = true
}

// abandon handles a waiter whose context is done (reason < 0) or whose MaxWait
// passed (reason == reasonMaxWait).
func (s *Weighted) abandon(ctx context.Context, w *waiter, reason int) error {
	s.lock()
	switch w.state {
	case granted:
		// The state is final; the granter sends on ready right after it leaves
		// the locked path, so receive without holding the lock.
		if reason < 0 {
			s.canceled++
		}
		s.unlock()
		<-w.ready
		n := w.n
		s.putWaiter(w)
		if reason >= 0 {
			// MaxWait passed as the grant came in: keep the grant.
			s.acquiredHook(n, s.cfg.MaxWait)
			return nil
		}
		// Granted as ctx was done: give the weight back (x/sync's ordering). The
		// caller never saw this grant, so neither hook runs.
		s.release(n)
		return ctx.Err()
	case failed:
		s.unlock()
		<-w.ready
		n, err := w.n, w.err
		s.putWaiter(w)
		if s.cfg.OnReject != nil {
			s.cfg.OnReject(n, err)
		}
		return err
	}
	// Still queued: remove it, and let those behind it go if they now fit
	// (golang/go#37852: a cancelled head must wake the ones behind it).
	var ahead int64
	for p := w.prev; p != nil; p = p.prev {
		ahead += p.n
	}
	n := w.n
	s.removeLocked(w)
	s.grantLocked()
	s.putWaiter(w)
	if reason < 0 {
		s.canceled++
		s.unlock()
		return ctx.Err()
	}
	delay := s.estimateLocked(ahead + n)
	s.rejected[reason]++
	s.unlock()
	return s.rejected1(n, reason, delay)
}

func (s *Weighted) putWaiter(w *waiter) {
	if w.timer != nil {
		w.timer.Stop() // Go ≥1.23: no stale value can be received after Stop
	}
	w.prev, w.next, w.err = nil, nil, nil
	s.pool.Put(w)
}

// rejectLocked counts a rejection, leaves the locked path and returns the error.
func (s *Weighted) rejectLocked(n int64, reason int, delay time.Duration) error {
	s.rejected[reason]++
	s.unlock()
	return s.rejected1(n, reason, delay)
}

// rejected1 builds a rejection error and calls OnReject; no lock is held.
func (s *Weighted) rejected1(n int64, reason int, delay time.Duration) error {
	err := &RejectError{Reason: reasons[reason], Delay: delay}
	if s.cfg.OnReject != nil {
		s.cfg.OnReject(n, err)
	}
	return err
}

// estimateLocked estimates how long until weight need, counting what is queued
// ahead plus the caller's own, could be granted: the part of it that is not free
// now, divided by the release rate observed while callers waited. 0 if there is
// no basis yet. Capped at an hour.
func (s *Weighted) estimateLocked(need int64) time.Duration {
	if s.rate <= 0 {
		return 0
	}
	free := max(s.capacity.Load()-int64(s.state.Load()&curMask), 0)
	short := need - free
	if short <= 0 {
		return 0
	}
	d := float64(short) / s.rate * float64(time.Second)
	if d > float64(time.Hour) {
		return time.Hour
	}
	return time.Duration(d)
}

// TryAcquire acquires weight n without waiting. It reports whether it did; on
// failure the semaphore is unchanged. Like x/sync/semaphore, it fails while
// other callers are queued, so it cannot overtake them. It panics if n <= 0.
func (s *Weighted) TryAcquire(n int64) bool {
	if n <= 0 {
		panic("semaphore: acquire of non-positive weight")
	}
	ok, contended := s.tryFast(n)
	if contended {
		s.lock()
		st := s.state.Load()
		if ok = s.head == nil && st&curMask+uint64(n) <= uint64(s.capacity.Load()); ok {
			s.state.Add(uint64(n))
			s.lockedGrants++
		}
		s.unlock()
	}
	if ok && s.cfg.OnAcquire != nil {
		s.acquiredHook(n, 0)
	}
	return ok
}

// Release releases weight n, granting queued callers in order while the head of
// the queue fits. It panics if n <= 0 or if more weight is released than is held
// in all (as x/sync/semaphore, it cannot tell whose weight is released: a caller
// releasing more than it holds, while others hold enough, frees theirs, and the
// panic comes at a later Release).
func (s *Weighted) Release(n int64) {
	if n <= 0 {
		panic("semaphore: release of non-positive weight")
	}
	s.release(n)
	if s.cfg.OnRelease != nil {
		s.cfg.OnRelease(n)
	}
}

// release takes n off the state word with a CAS whether or not the slow bit is
// set: Release is the one change to the word that does not need mu (apart
// from setting the slow bit, see acquirePushed), which is why every change
// made under mu is an atomic add, Or or CAS, never a store of a value read
// before. With the bit set, someone queued may now fit: if mu is
// free, release takes it and grants them itself (releaseLocked); if not, n is
// added to released, and whoever holds mu grants them (see locked and unlock),
// so Release never waits for mu.
func (s *Weighted) release(n int64) {
	if s.state.Load()&slowBit != 0 && s.mu.TryLock() {
		s.releaseLocked(n)
		return
	}
	for {
		st := s.state.Load()
		if st&curMask < uint64(n) {
			panic(errOverRelease)
		}
		if s.state.CompareAndSwap(st, st-uint64(n)) {
			if st&slowBit == 0 {
				return
			}
			break
		}
	}
	s.released.Add(n)
	s.ensureSeen()
}

const errOverRelease = "semaphore: released more than held"

// releaseLocked is release for a caller that found the slow bit set (callers
// queued, or a holder of mu at work) and took mu at once: it takes n off the
// state word and adds the weight of the waiters this lets through in one CAS,
// and grants them itself: three atomic writes fewer than handing n over
// through released to a holder that grants.
func (s *Weighted) releaseLocked(n int64) {
	s.held.Store(true)
	// Checked before absorbLocked as well as in the loop: absorbing may grant
	// weight released without mu to waiters, which would hide an over-release
	// of that weight.
	if s.state.Load()&curMask < uint64(n) {
		s.unlock()
		panic(errOverRelease)
	}
	s.absorbLocked(false) // first: waiters pushed before this Release go first
	for {
		st := s.state.Load()
		if st&curMask < uint64(n) {
			s.unlock()
			panic(errOverRelease)
		}
		// One write for the release and the grants it lets through. Not Add:
		// see release.
		add, k := s.fitLocked(st&curMask - uint64(n))
		if s.state.CompareAndSwap(st, st-uint64(n)+add) {
			s.observeLocked(n)
			s.grantFirstLocked(k)
			break
		}
	}
	s.unlock()
}

// observeLocked records n released while callers wait, folding the throughput
// into the rate estimate once a capacity's worth has been released.
func (s *Weighted) observeLocked(n int64) {
	if s.obsStart.IsZero() {
		return
	}
	s.obsReleased += n
	if s.obsReleased < max(s.capacity.Load(), 1) {
		return
	}
	dt := time.Since(s.obsStart) // reads only the monotonic clock: half of time.Now
	if dt > 0 {
		sample := float64(s.obsReleased) / dt.Seconds()
		if s.rate == 0 {
			s.rate = sample
		} else {
			s.rate += (sample - s.rate) / 4
		}
	}
	s.obsStart, s.obsReleased = s.obsStart.Add(dt), 0
}

// grantLocked grants queued callers in FIFO order while the head fits; unlock
// signals them.
func (s *Weighted) grantLocked() {
	add, k := s.fitLocked(s.state.Load() & curMask)
	if k > 0 {
		s.state.Add(add) // not Store: a Release may have taken weight off since
	}
	s.grantFirstLocked(k)
}

// fitLocked returns how many queued callers, from the head, fit beside cur in
// use, and their weight. Strict FIFO: a heavy head blocks lighter callers
// behind it.
func (s *Weighted) fitLocked(cur uint64) (add uint64, k int) {
	c := uint64(s.capacity.Load())
	for w := s.head; w != nil && cur+add+uint64(w.n) <= c; w = w.next {
		add += uint64(w.n)
		k++
	}
	return add, k
}

// grantFirstLocked grants the first k queued callers, whose weight the caller
// has added to the state word; unlock signals them.
func (s *Weighted) grantFirstLocked(k int) {
	for ; k > 0; k-- {
		w := s.head
		s.removeLocked(w)
		w.state = granted
		s.lockedGrants++
		s.signalLocked(w)
	}
	if s.head == nil {
		s.obsStart = time.Time{}
	}
}

func (s *Weighted) pushLocked(w *waiter) {
	w.prev, w.next = s.tail, nil
	if s.tail == nil {
		s.head = w
	} else {
		s.tail.next = w
	}
	s.tail = w
	s.waiters++
	s.waitingWeight += w.n
}

func (s *Weighted) removeLocked(w *waiter) {
	if w.prev == nil {
		s.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		s.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	s.waiters--
	s.waitingWeight -= w.n
}

// Resize sets the capacity. Growing grants queued callers that now fit.
// Shrinking never revokes weight already held: the weight in use may stay above
// the new capacity until enough is released, and no new weight is granted until
// it fits. Queued callers asking for more than the new capacity fail at once with
// ErrTooLarge. Resize panics if capacity is negative or above MaxCapacity.
func (s *Weighted) Resize(capacity int64) {
	checkCapacity(capacity)
	s.lock()
	s.capacity.Store(capacity)
	// Bump the generation: a lock-free acquire that read the old capacity before
	// lock set the slow bit must fail its CAS even after unlock clears the bit.
	for {
		st := s.state.Load()
		if s.state.CompareAndSwap(st, st&^genMask|(st+genUnit)&genMask) {
			break
		}
	}
	s.failTooLargeLocked(capacity)
	s.grantLocked()
	s.unlock()
}

// failTooLargeLocked fails the queued waiters asking for more than capacity.
func (s *Weighted) failTooLargeLocked(capacity int64) {
	var tooLarge error
	for w := s.head; w != nil; {
		next := w.next
		if w.n > capacity {
			if tooLarge == nil {
				tooLarge = &RejectError{Reason: ErrTooLarge}
			}
			s.removeLocked(w)
			s.rejected[reasonTooLarge]++
			w.state, w.err = failed, tooLarge // the waiter calls OnReject itself
			s.signalLocked(w)
		}
		w = next
	}
}

// Do acquires weight n, calls fn, and releases the weight when fn returns or
// panics, so the weight cannot leak. It returns Acquire's error without calling
// fn, or fn's error. fn receives ctx.
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if err := s.Acquire(ctx, n); err != nil {
		return err
	}
	defer s.Release(n)
	return fn(ctx)
}

// Stats is a snapshot of a Weighted's state and running totals.
type Stats struct {
	Capacity      int64 // current capacity
	InUse         int64 // weight held; may exceed Capacity after a shrinking Resize
	Waiters       int   // callers queued in Acquire
	WaitingWeight int64 // total weight they ask for

	Acquired uint64 // grants by Acquire and TryAcquire
	Canceled uint64 // Acquire calls that returned because their context was done

	// Rejections by reason. Failed TryAcquire calls are not counted: keeping that
	// path free of shared writes is what makes it cheap.
	RejectedQueueFull uint64
	RejectedMaxWait   uint64
	RejectedDeadline  uint64
	RejectedTooLarge  uint64

	// ReleaseRate is the observed release throughput while callers waited, in
	// weight per second (an exponentially weighted average), or 0 if not yet
	// observed. Retry-after estimates derive from it.
	ReleaseRate float64
}

// Stats returns a consistent snapshot of the semaphore.
func (s *Weighted) Stats() Stats {
	s.mu.Lock() // not lock(): a snapshot must not push lock-free callers onto mu
	s.held.Store(true)
	if s.inbox.Load() != nil || s.released.Load() != 0 {
		s.locked() // so that pushed waiters and released weight count
	}
	defer s.unlock()
	return Stats{
		Capacity:          s.capacity.Load(),
		InUse:             int64(s.state.Load() & curMask),
		Waiters:           s.waiters,
		WaitingWeight:     s.waitingWeight,
		Acquired:          s.acquired.Load() + s.lockedGrants,
		Canceled:          s.canceled,
		RejectedQueueFull: s.rejected[reasonQueueFull],
		RejectedMaxWait:   s.rejected[reasonMaxWait],
		RejectedDeadline:  s.rejected[reasonDeadline],
		RejectedTooLarge:  s.rejected[reasonTooLarge],
		ReleaseRate:       s.rate,
	}
}
