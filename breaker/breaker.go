package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// A Policy says how a call is answered when the store can't answer it: when
// the breaker is open, when it is half-open with its probes in flight, or when
// the call itself fails with a store failure.
type Policy uint8

const (
	// FailClosed rejects the call with an error matching [ErrUnavailable]
	// (an [*OpenError] with RetryAfter, or a [*StoreError] wrapping the
	// store's error). It is the zero value: limiters fail closed.
	FailClosed Policy = iota

	// FailOpen admits the call without an answer from the store: [Do]
	// returns the zero value of its result type, [Degraded] and a nil error,
	// and the caller treats that as "admitted" (for example a no-op permit).
	FailOpen

	// FailLocal answers the call with the fallback the caller supplies (for
	// example a local limiter holding a share of the global limit): [Do]
	// returns the fallback's result and error with [FromFallback].
	FailLocal
)

func (p Policy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailLocal:
		return "fail-local"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// A Source says where the answer of a guarded call came from.
type Source uint8

const (
	// FromStore: the call reached the store and its own result and error
	// are returned as they are. It is also the Source when Do returns the
	// caller's context error without calling.
	FromStore Source = iota

	// Degraded: the store could not answer and the FailOpen policy admitted
	// the call; the result is the zero value.
	Degraded

	// FromFallback: the store could not answer and the FailLocal policy
	// returned the fallback's answer.
	FromFallback

	// Rejected: the store could not answer and the FailClosed policy
	// returned an error matching ErrUnavailable.
	Rejected
)

func (s Source) String() string {
	switch s {
	case FromStore:
		return "store"
	case Degraded:
		return "degraded"
	case FromFallback:
		return "fallback"
	case Rejected:
		return "rejected"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// State is the state of a Breaker. The values equal gobreaker's.
type State uint8

const (
	StateClosed   State = State(gobreaker.StateClosed)   // calls go to the store
	StateHalfOpen State = State(gobreaker.StateHalfOpen) // a few probes go to the store
	StateOpen     State = State(gobreaker.StateOpen)     // no call goes to the store
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Stats is a snapshot of a Breaker's counters since New.
type Stats struct {
	State State
	// RetryAfter is the remaining open time while open, else 0.
	RetryAfter time.Duration

	Trips       uint64 // transitions to open
	Transitions uint64 // all state transitions
	// StoreFailures counts calls whose outcome was a store failure,
	// including calls that were in flight when the breaker opened (gobreaker
	// ignores those, as they belong to the previous state).
	StoreFailures uint64

	// Calls the store could not answer, by the policy that answered them.
	Rejections uint64 // FailClosed: answered with an error
	Degraded   uint64 // FailOpen: admitted without the store
	Fallbacks  uint64 // FailLocal: answered by the fallback

	// StoreAnswers counts calls the store answered (Source FromStore, an
	// error that is not a store failure included; caller cancellations not).
	StoreAnswers uint64
}

// A Breaker is a circuit breaker guarding calls to a shared store (one Redis
// endpoint). It is a thin layer over one gobreaker state machine (driven
// through gobreaker's exported API only) that adds the per-call timeout, the store-failure classifier, per-call policies, growing
// open times, counters, and transition reports made without gobreaker's lock
// held. One Breaker is meant to be shared by every semaphore and meter using
// the same endpoint, each with its own policy.
//
// Use [New]. The zero value is usable and behaves like New("", Config{}).
// A Breaker must not be copied after first use. It is safe for concurrent use
// by multiple goroutines.
type Breaker struct {
	once  sync.Once
	ready atomic.Bool // setup is done

	name        string
	cb          *gobreaker.CircuitBreaker[struct{}]
	epoch       time.Time     // monotonic origin of openUntil
	callTimeout time.Duration // 0: off
	isFailure   func(error) bool
	policy      Policy
	onChange    func(name string, from, to State)
	logger      *slog.Logger
	openBase    time.Duration
	openMax     time.Duration
	jitter      float64

	state      atomic.Uint32 // gobreaker's state, mirrored by onTransition
	openUntil  atomic.Int64  // end of the open period, ns since epoch; valid while state is open
	hasPending atomic.Bool   // pending is not empty

	trips, transitions, failures    atomic.Uint64
	rejections, degraded, fallbacks atomic.Uint64
	answers                         atomic.Uint64
	onStoreCall                     func(d time.Duration, failed bool)

	mu sync.Mutex
	// mu guards:
	openTrips   int          // trips since the last close
	pending     []transition // recorded under gobreaker's lock, not yet reported
	dispatching bool         // a goroutine is reporting pending transitions
	last        counters     // counters at the last transition, for the log line
}

type transition struct {
	from, to State
	openFor  time.Duration
	trips    int
	delta    counters // counters accumulated in the previous state
}

type counters struct{ failures, rejections, degraded, fallbacks uint64 }

// New returns a Breaker named name (used in logs, errors and the
// OnStateChange hook; for example the Redis address) configured by cfg. It
// starts closed. It panics with a "breaker: " message if cfg is invalid (see
// [Config.Validate]). It starts no goroutine and does no I/O.
func New(name string, cfg Config) *Breaker {
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	b := new(Breaker)
	b.once.Do(func() { b.setup(name, cfg) })
	return b
}

// init makes the zero Breaker usable.
func (b *Breaker) init() {
	if !b.ready.Load() { // inlined fast path
		b.initSlow()
	}
}

func (b *Breaker) initSlow() { b.once.Do(func() { b.setup("", Config{}) }) }

// Verdicts passed to gobreaker as the outcome of a call: nil is a success.
var (
	errFailure  = errors.New("breaker: store failure")
	errTimedOut = errors.New("breaker: call timed out") // a failure: CallTimeout expired
	errCaller   = errors.New("breaker: caller done")    // not counted: the caller's ctx ended
	errExcluded = errors.New("breaker: context error")  // not counted: a context error of unknown origin
)

func (b *Breaker) setup(name string, cfg Config) {
	b.name = name
	b.epoch = time.Now()
	b.callTimeout = cfg.callTimeout()
	b.isFailure = cfg.IsFailure
	if b.isFailure == nil {
		b.isFailure = IsStoreFailure
	}
	b.policy = cfg.Policy
	b.onChange = cfg.OnStateChange
	b.onStoreCall = cfg.OnStoreCall
	b.logger = cfg.Logger
	b.openBase = cfg.openDuration()
	b.openMax = cfg.maxOpenDuration()
	b.jitter = cfg.jitter()

	consecutive := cfg.consecutiveFailures()
	ratio := cfg.FailureRatio
	minCalls := uint32(cfg.minCalls())
	st := gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(cfg.halfOpenProbes()),
		// gobreaker's timer is the shortest open period; growth and jitter
		// only lengthen it, and Breaker keeps callers away from gobreaker
		// until its own open period ends (see openRemaining).
		Timeout: b.openBase,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if consecutive > 0 && c.ConsecutiveFailures >= uint32(consecutive) {
				return true
			}
			if ratio > 0 {
				n := c.TotalSuccesses + c.TotalFailures
				return n >= minCalls && float64(c.TotalFailures) >= ratio*float64(n)
			}
			return false
		},
		OnStateChange: b.onTransition,
		IsExcluded:    func(err error) bool { return err == errCaller || err == errExcluded },
	}
	if ratio > 0 {
		// A rolling window. Without the ratio rule counts are never cleared
		// while closed (Interval 0): only a run of consecutive failures trips.
		st.Interval = cfg.window()
		st.BucketPeriod = cfg.window() / time.Duration(cfg.windowBuckets())
	}
	b.cb = gobreaker.NewCircuitBreaker[struct{}](st)
	b.ready.Store(true)
}

// Name returns the breaker's name.
func (b *Breaker) Name() string {
	b.init()
	return b.name
}

// Policy returns Config.Policy, the default policy for callers that do not
// have their own.
func (b *Breaker) Policy() Policy {
	b.init()
	return b.policy
}

// State returns the current state. It may move the breaker from open to
// half-open when the open period has ended (and report that transition).
func (b *Breaker) State() State {
	b.init()
	if _, open := b.openRemaining(); open {
		return StateOpen
	}
	s := State(b.cb.State())
	b.dispatch()
	return s
}

// Stats returns a snapshot of the breaker's counters.
func (b *Breaker) Stats() Stats {
	st := Stats{State: b.State()}
	if st.State == StateOpen {
		rem, _ := b.openRemaining()
		st.RetryAfter = max(rem, 0) // the period may have ended since State
	}
	st.Trips = b.trips.Load()
	st.Transitions = b.transitions.Load()
	st.StoreFailures = b.failures.Load()
	st.Rejections = b.rejections.Load()
	st.Degraded = b.degraded.Load()
	st.Fallbacks = b.fallbacks.Load()
	st.StoreAnswers = b.answers.Load()
	return st
}

// CallTimeout returns the per-call timeout [Do] applies ([Config.CallTimeout]
// after defaults), or 0 if calls are not bounded.
func (b *Breaker) CallTimeout() time.Duration {
	b.init()
	return b.callTimeout
}

// Do calls call through the breaker and tells where the answer came from.
//
// If ctx is already done, Do returns ctx.Err() without calling. If the
// breaker is open, or half-open with all its probes in flight, Do does not
// call call and answers by policy p at once, with no network wait:
//   - FailClosed: the zero T, [Rejected] and an [*OpenError] (matching
//     [ErrUnavailable], with RetryAfter);
//   - FailOpen: the zero T, [Degraded] and a nil error;
//   - FailLocal: fallback(ctx)'s result and error, with [FromFallback].
//
// Otherwise Do calls call with ctx bounded by [Config.CallTimeout]: the call's
// context is ctx itself when ctx's own deadline is sooner (or CallTimeout is
// off), else a child of ctx that ends CallTimeout from now. The outcome is
// classified and counted:
//   - nil error: a success; Do returns call's result, [FromStore], nil;
//   - the caller's own ctx is done (cancelled or past its deadline, even if
//     CallTimeout has passed too): not counted; Do returns the zero T,
//     [FromStore] and ctx.Err(), unwrapped;
//   - CallTimeout expired while ctx is not done (the store was too slow): a
//     failure; Do answers by policy p as above, except that under FailClosed
//     the error is a [*StoreError] matching [ErrTimeout] and
//     [ErrUnavailable], and not context.DeadlineExceeded;
//   - [Config.IsFailure] says the error is a store failure: a failure; Do
//     answers by policy p as above, except that under FailClosed the error
//     is a [*StoreError] wrapping call's error;
//   - any other error (a denial, redis.Nil): the store answered, a success;
//     Do returns call's result and error as they are, [FromStore].
//
// The fallback may be nil unless p is FailLocal; Do panics if p is FailLocal
// and fallback is nil, or if p is not a valid Policy. If call panics, the
// panic counts as a failure and is re-raised (gobreaker's Execute).
//
// Do allocates nothing of its own on the success path when it derives no
// context (CallTimeout off, or a sooner caller deadline); otherwise it pays
// for one context.WithDeadline.
func Do[T any](ctx context.Context, b *Breaker, p Policy, call func(context.Context) (T, error), fallback func(context.Context) (T, error)) (T, Source, error) {
	b.init()
	checkPolicy(p)
	if p == FailLocal && fallback == nil {
		panic("breaker: FailLocal needs a fallback")
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, FromStore, err
	}
	b.dispatch()
	if b.state.Load() != uint32(StateClosed) { // fast path: one atomic load when closed
		if rem, open := b.openRemainingSlow(); open {
			if src := b.count(p); src != Rejected {
				return answer(ctx, src, fallback)
			}
			return zero, Rejected, b.openError(StateOpen, rem)
		}
	}

	cctx, deadline := ctx, time.Time{}
	if b.callTimeout > 0 {
		deadline = time.Now().Add(b.callTimeout)
		if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
			deadline = time.Time{} // the caller's deadline is sooner: it bounds the call
		} else {
			var cancel context.CancelFunc
			cctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	var (
		out     T
		callErr error
		ran     bool
		v       error  // the verdict
		src     Source // the policy's answer if the call failed
	)
	var start time.Time
	if b.onStoreCall != nil {
		start = time.Now()
	}
	_, gerr := b.cb.Execute(func() (struct{}, error) {
		ran = true
		out, callErr = call(cctx)
		if callErr == nil {
			return struct{}{}, nil
		}
		v = b.verdict(ctx, deadline, callErr)
		if v == errFailure || v == errTimedOut {
			// Count before gobreaker sees the failure, so that the log
			// line of a transition it causes includes it.
			b.failures.Add(1)
			src = b.count(p)
		}
		return struct{}{}, v
	})
	b.dispatch()
	if ran && b.onStoreCall != nil && v != errCaller {
		b.onStoreCall(time.Since(start), v == errFailure || v == errTimedOut)
	}
	switch {
	case !ran:
		if src := b.count(p); src != Rejected {
			return answer(ctx, src, fallback)
		}
		return zero, Rejected, b.rejection(gerr)
	case v == errCaller:
		if err := ctx.Err(); err != nil {
			return zero, FromStore, err
		}
		return zero, FromStore, context.DeadlineExceeded // its deadline passed; its timer is late
	case v != errFailure && v != errTimedOut:
		b.answers.Add(1)
		return out, FromStore, callErr
	case src != Rejected:
		return answer(ctx, src, fallback)
	case v == errTimedOut:
		return zero, Rejected, &StoreError{Name: b.name, Err: ErrTimeout}
	}
	return zero, Rejected, &StoreError{Name: b.name, Err: callErr}
}

// answer answers a call the store could not answer under FailOpen (src
// Degraded) or FailLocal (src FromFallback).
func answer[T any](ctx context.Context, src Source, fallback func(context.Context) (T, error)) (T, Source, error) {
	if src == FromFallback {
		v, err := fallback(ctx)
		return v, FromFallback, err
	}
	var zero T
	return zero, Degraded, nil
}

// count counts a call answered by policy p and returns its Source.
func (b *Breaker) count(p Policy) Source {
	switch p {
	case FailOpen:
		b.degraded.Add(1)
		return Degraded
	case FailLocal:
		b.fallbacks.Add(1)
		return FromFallback
	}
	b.rejections.Add(1)
	return Rejected
}

func checkPolicy(p Policy) {
	if p > FailLocal {
		panic("breaker: invalid Policy " + p.String())
	}
}

// verdict classifies the outcome of a call for gobreaker: nil (success),
// errFailure, errTimedOut (failures), errCaller or errExcluded (not counted).
// ctx is the caller's context and deadline the per-call deadline Do set (zero
// if none).
func (b *Breaker) verdict(ctx context.Context, deadline time.Time, err error) error {
	if err == nil {
		return nil
	}
	// The caller's context first: once it is done, the outcome is the
	// caller's, even if our deadline has passed too (go-redis does not abort
	// a blocked read on cancellation, only at the socket deadline).
	if ctx.Err() != nil {
		return errCaller // the caller cancelled
	}
	// Compare times rather than look at ctx.Err(): a socket deadline set from
	// a context deadline can fire before the context's own timer.
	now := time.Now()
	if d, ok := ctx.Deadline(); ok && !now.Before(d) {
		return errCaller // the caller's own deadline expired
	}
	if !deadline.IsZero() && !now.Before(deadline) {
		return errTimedOut // our per-call timeout expired: the store was slow
	}
	if b.isFailure(err) {
		return errFailure
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errExcluded // a context error we can't attribute: no information
	}
	return nil // the store answered
}

// openRemaining reports whether the breaker is in an open period and how much
// of it remains. While it is, no call goes to gobreaker: gobreaker's own open
// timer (the base OpenDuration) may have run out, and touching it would move
// it to half-open before a grown or jittered open period ends. The period is
// judged by openUntil, not by the mirrored state: a call admitted before the
// trip that finishes after OpenDuration moves gobreaker to half-open early (its
// afterRequest reads the state before checking the generation), and that must
// not let callers through before openUntil.
func (b *Breaker) openRemaining() (time.Duration, bool) {
	if State(b.state.Load()) == StateClosed { // inlined fast path
		return 0, false
	}
	return b.openRemainingSlow()
}

func (b *Breaker) openRemainingSlow() (time.Duration, bool) {
	// Open through the end instant inclusive, as gobreaker is.
	rem := time.Duration(b.openUntil.Load()) - time.Since(b.epoch)
	return rem, rem >= 0
}

// rejection converts gobreaker's rejection into an *OpenError.
func (b *Breaker) rejection(gerr error) error {
	if errors.Is(gerr, gobreaker.ErrTooManyRequests) {
		return b.openError(StateHalfOpen, b.callTimeout)
	}
	rem, _ := b.openRemaining()
	return b.openError(StateOpen, max(rem, 0))
}

func (b *Breaker) openError(s State, delay time.Duration) error {
	return &OpenError{Name: b.name, State: s, Delay: delay}
}

// onTransition is gobreaker's OnStateChange. gobreaker calls it with its
// mutex held, so it only records the transition (taking b.mu, which is never
// held while calling gobreaker); dispatch reports it later without locks.
func (b *Breaker) onTransition(_ string, from, to gobreaker.State) {
	now := time.Since(b.epoch)
	cur := counters{b.failures.Load(), b.rejections.Load(), b.degraded.Load(), b.fallbacks.Load()}
	b.mu.Lock()
	t := transition{from: State(from), to: State(to), delta: cur.sub(b.last)}
	b.last = cur
	switch State(to) {
	case StateOpen:
		b.openTrips++
		t.openFor, t.trips = b.openDurationLocked(b.openTrips), b.openTrips
		until := now + t.openFor
		if until < now { // overflow with absurd durations
			until = math.MaxInt64
		}
		b.openUntil.Store(int64(until)) // before the state, which publishes it
		b.trips.Add(1)
	case StateClosed:
		b.openTrips = 0
	}
	b.state.Store(uint32(to))
	b.transitions.Add(1)
	b.pending = append(b.pending, t)
	b.hasPending.Store(true)
	b.mu.Unlock()
}

// openDurationLocked returns the length of the open period after the k-th
// trip in a row: OpenDuration doubled k-1 times, capped at MaxOpenDuration,
// then lengthened by up to Jitter of itself. b.mu must be held.
func (b *Breaker) openDurationLocked(k int) time.Duration {
	d := b.openBase
	for i := 1; i < k && d < b.openMax; i++ {
		if d > b.openMax/2 { // also keeps d*2 from overflowing
			d = b.openMax
			break
		}
		d *= 2
	}
	d = min(d, b.openMax)
	if b.jitter > 0 {
		j := rand.Float64() * b.jitter * float64(d)
		if j >= float64(math.MaxInt64-d) {
			return math.MaxInt64
		}
		d += time.Duration(j)
	}
	return d
}

// dispatch reports pending transitions, in order, without locks held. If
// another goroutine is already reporting, that one reports them, so a hook
// that calls back into the Breaker neither deadlocks nor recurses.
func (b *Breaker) dispatch() {
	if b.hasPending.Load() { // inlined fast path: nothing to report
		b.dispatchSlow()
	}
}

func (b *Breaker) dispatchSlow() {
	b.mu.Lock()
	if b.dispatching {
		b.mu.Unlock()
		return
	}
	b.dispatching = true
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.hasPending.Store(false)
		b.mu.Unlock()
		b.reportBatch(batch)
		b.mu.Lock()
	}
	// Cleared in the same critical section that found nothing pending, so a
	// transition recorded meanwhile is never left with no one to report it.
	b.dispatching = false
	b.mu.Unlock()
}

// reportBatch reports batch in order. If a hook panics, the transitions after
// the one that panicked go back to the front of pending, and dispatching is
// cleared, before the panic propagates.
func (b *Breaker) reportBatch(batch []transition) {
	i := 0
	defer func() {
		if i == len(batch) {
			return
		}
		rest := append([]transition(nil), batch[i+1:]...)
		b.mu.Lock()
		b.pending = append(rest, b.pending...)
		b.hasPending.Store(len(b.pending) > 0)
		b.dispatching = false
		b.mu.Unlock()
	}()
	for ; i < len(batch); i++ {
		b.report(batch[i])
	}
}

// report logs one line for t and calls the hook. No lock is held.
func (b *Breaker) report(t transition) {
	logger := b.logger
	if logger == nil {
		logger = slog.Default()
	}
	level := slog.LevelInfo
	if t.to == StateOpen {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("limiter", b.name),
		slog.String("kind", "breaker"),
		slog.String("from", t.from.String()),
		slog.String("to", t.to.String()),
	}
	if t.to == StateOpen {
		attrs = append(attrs, slog.Duration("open_for", t.openFor), slog.Int("trips", t.trips))
	}
	attrs = append(attrs,
		slog.Uint64("store_failures", t.delta.failures),
		slog.Uint64("rejected", t.delta.rejections),
		slog.Uint64("degraded", t.delta.degraded),
		slog.Uint64("fallbacks", t.delta.fallbacks),
	)
	logger.LogAttrs(context.Background(), level, "breaker: "+t.to.String(), attrs...)
	if b.onChange != nil {
		b.onChange(b.name, t.from, t.to)
	}
}

func (c counters) sub(d counters) counters {
	return counters{c.failures - d.failures, c.rejections - d.rejections, c.degraded - d.degraded, c.fallbacks - d.fallbacks}
}
