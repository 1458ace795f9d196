package breaker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/floodgate-go/floodgate/internal/calltimeout"
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
}

// A Breaker is a circuit breaker guarding calls to a shared store (one Redis
// endpoint). It is a thin layer over one gobreaker state machine that adds the
// per-call timeout, the store-failure classifier, per-call policies, growing
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
	ts          *gobreaker.TwoStepCircuitBreaker[struct{}]
	cb          *gobreaker.CircuitBreaker[struct{}] // ts's own state machine, for Execute; nil if unreachable
	epoch       time.Time                           // monotonic origin of openUntil
	callTimeout time.Duration
	isFailure   func(error) bool
	policy      Policy
	onChange    func(name string, from, to State)
	logger      *slog.Logger
	openBase    time.Duration
	openMax     time.Duration
	jitter      float64

	state      atomic.Uint32       // gobreaker's state, mirrored by onTransition
	openUntil  atomic.Int64        // end of the open period, ns since epoch; valid while state is open
	hasPending atomic.Bool         // pending is not empty
	seen       atomic.Int64        // a time since epoch observed by callContext: a lower bound of now
	shared     calltimeout.Bounder // the deadline shared by calls whose ctx is never done

	trips, transitions, failures    atomic.Uint64
	rejections, degraded, fallbacks atomic.Uint64

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
	errExcluded = errors.New("breaker: not counted")
)

func (b *Breaker) setup(name string, cfg Config) {
	b.name = name
	b.epoch = time.Now()
	b.callTimeout = cfg.callTimeout()
	b.shared.Timeout = b.callTimeout
	b.isFailure = cfg.IsFailure
	if b.isFailure == nil {
		b.isFailure = IsStoreFailure
	}
	b.policy = cfg.Policy
	b.onChange = cfg.OnStateChange
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
		IsExcluded:    func(err error) bool { return err == errExcluded },
	}
	if ratio > 0 {
		// A rolling window. Without the ratio rule counts are never cleared
		// while closed (Interval 0): only a run of consecutive failures trips.
		st.Interval = cfg.window()
		st.BucketPeriod = cfg.window() / time.Duration(cfg.windowBuckets())
	}
	b.ts = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	b.cb = innerBreaker(b.ts)
	b.ready.Store(true)
}

// innerBreaker returns the CircuitBreaker inside ts, so that Do can use its
// Execute, which does not allocate, while Allow uses ts's two-step form, which
// allocates a closure per call: both drive the same state machine. gobreaker
// v2.4.0 has no exported way to get it, so this reads the struct's only field
// after checking its type by reflection. If a later gobreaker changes that
// layout, it returns nil and Do uses ts.Allow (one more allocation per call,
// same behaviour); TestInnerBreakerReachable fails to say so.
func innerBreaker(ts *gobreaker.TwoStepCircuitBreaker[struct{}]) *gobreaker.CircuitBreaker[struct{}] {
	v := reflect.ValueOf(ts).Elem()
	if v.NumField() != 1 {
		return nil
	}
	f := v.Field(0)
	if f.Type() != reflect.TypeFor[*gobreaker.CircuitBreaker[struct{}]]() {
		return nil
	}
	return (*gobreaker.CircuitBreaker[struct{}])(f.UnsafePointer())
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
	s := State(b.ts.State())
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
	return st
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
// Otherwise Do calls call with a context bounded by Config.CallTimeout. The
// outcome is classified and counted:
//   - nil error: a success; Do returns call's result, [FromStore], nil;
//   - the call outlived CallTimeout, or [Config.IsFailure] says the error is
//     a store failure: a failure; Do answers by policy p as above, except that
//     under FailClosed the error is a [*StoreError] wrapping call's error;
//   - the caller's own ctx is done (cancelled or past its deadline): not
//     counted; Do returns call's result and error as they are, [FromStore];
//   - any other error (a denial, redis.Nil): the store answered, a success;
//     Do returns call's result and error as they are, [FromStore].
//
// The fallback may be nil unless p is FailLocal; Do panics if p is FailLocal
// and fallback is nil, or if p is not a valid Policy. If call panics, the
// panic counts as a failure and is re-raised (gobreaker's Execute).
//
// Cost: on the success path (breaker closed, call succeeds) Do adds a few
// atomic loads and a closure call to gobreaker's Execute, and allocates
// nothing when it derives no per-call context: when CallTimeout is negative,
// or when ctx already has a deadline no later than CallTimeout from now
// (usually decided without calling time.Now). A ctx that can never be done
// shares one deadline context with the calls starting within CallTimeout/16
// (each gets between 15/16 of CallTimeout and all of it): that costs nothing
// for context.Background, and one small wrapper that keeps ctx's values for
// any other (context.WithoutCancel, values on Background). Otherwise (a cancellable
// ctx without a sooner deadline, such as an HTTP request's) it derives the
// call's context with context.WithDeadline, which costs that function's usual
// 4 allocations and a runtime timer (about 1µs on a small VM; a Redis round
// trip is about 50–100µs): a context that must be done when either the
// caller's or the call's time is up needs a Done channel of its own. To avoid
// that cost, give ctx a deadline at most CallTimeout away, or set CallTimeout
// negative and let the Redis client bound each command itself (go-redis
// ReadTimeout/WriteTimeout): those timeouts surface as net timeout errors,
// which IsStoreFailure counts.
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
		var cancel context.CancelFunc
		cctx, cancel, deadline = b.callContext(ctx)
		if cancel != nil {
			defer cancel()
		}
	}
	var (
		out     T
		callErr error
		ran     bool
		src     Source // the policy's answer if the call failed, else FromStore
		gerr    error
	)
	if b.cb != nil {
		_, gerr = b.cb.Execute(func() (struct{}, error) {
			ran = true
			out, callErr = call(cctx)
			if callErr == nil {
				return struct{}{}, nil
			}
			v := b.verdict(ctx, deadline, callErr)
			if v == errFailure {
				// Count before gobreaker sees the failure, so that the log
				// line of a transition it causes includes it.
				src = b.countFailure(p)
			}
			return struct{}{}, v
		})
	} else {
		out, callErr, ran, src, gerr = twoStep(b, ctx, cctx, deadline, p, call)
	}
	b.dispatch()
	switch {
	case !ran:
		if src := b.count(p); src != Rejected {
			return answer(ctx, src, fallback)
		}
		return zero, Rejected, b.rejection(gerr)
	case src == Rejected:
		return zero, Rejected, &StoreError{Name: b.name, Err: callErr}
	case src != FromStore:
		return answer(ctx, src, fallback)
	}
	return out, FromStore, callErr
}

// twoStep is Do's call path through gobreaker's two-step form, used only if
// innerBreaker could not reach the CircuitBreaker. Like Execute, it records a
// panic of call as a failure and re-raises it.
func twoStep[T any](b *Breaker, ctx, cctx context.Context, deadline time.Time, p Policy, call func(context.Context) (T, error)) (out T, callErr error, ran bool, src Source, gerr error) {
	done, gerr := b.ts.Allow()
	if gerr != nil {
		return out, nil, false, FromStore, gerr
	}
	reported := false
	defer func() {
		if !reported {
			done(errFailure) // call panicked
		}
	}()
	out, callErr = call(cctx)
	v := b.verdict(ctx, deadline, callErr)
	if v == errFailure {
		src = b.countFailure(p)
	}
	reported = true
	done(v)
	return out, callErr, true, src, nil
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

// countFailure counts a call that failed and will be answered by policy p.
func (b *Breaker) countFailure(p Policy) Source {
	b.failures.Add(1)
	return b.count(p)
}

func checkPolicy(p Policy) {
	if p > FailLocal {
		panic("breaker: invalid Policy " + p.String())
	}
}

// Allow is the two-step form of [Do], for middleware that cannot wrap the
// store call in a function. It never blocks and does no I/O.
//
// If the breaker lets the call through, Allow returns a done func, [FromStore]
// and a nil error: make the store call, then call done exactly once with its
// error (a second call would count the outcome twice). done classifies the
// error like Do, except that Allow applies no CallTimeout and knows no caller
// context: nil is a success, an error [Config.IsFailure] accepts is a
// failure, a context error is not counted, and any other error is a success.
// A failure reported through done is counted, but the policy is not applied
// to it: the caller has its error.
//
// If the breaker is open, or half-open with its probes in flight, the caller
// must not call the store, and Allow answers by policy p: FailClosed returns
// [Rejected] and an [*OpenError]; FailOpen returns [Degraded] (admit);
// FailLocal returns [FromFallback] (use your local fallback), both with a nil
// error. done is then a no-op. done is never nil.
//
// Allow allocates (gobreaker's two-step closure and Allow's own). It panics
// if p is not a valid Policy.
func (b *Breaker) Allow(p Policy) (done func(err error), src Source, err error) {
	b.init()
	checkPolicy(p)
	b.dispatch()
	if rem, open := b.openRemaining(); open {
		if src := b.count(p); src != Rejected {
			return noop, src, nil
		}
		return noop, Rejected, b.openError(StateOpen, rem)
	}
	gdone, gerr := b.ts.Allow()
	b.dispatch()
	if gerr != nil {
		if src := b.count(p); src != Rejected {
			return noop, src, nil
		}
		return noop, Rejected, b.rejection(gerr)
	}
	return func(err error) {
		v := b.verdict(nil, time.Time{}, err)
		if v == errFailure {
			b.failures.Add(1)
		}
		gdone(v)
		b.dispatch()
	}, FromStore, nil
}

func noop(error) {}

// verdict classifies the outcome of a call for gobreaker: nil (success),
// errFailure or errExcluded. ctx is the caller's context (nil for Allow) and
// deadline the per-call deadline Do set (zero if none).
func (b *Breaker) verdict(ctx context.Context, deadline time.Time, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil {
		now := time.Now()
		// Compare times rather than look at ctx.Err(): a socket deadline set
		// from a context deadline can fire before the context's own timer.
		if !deadline.IsZero() && !now.Before(deadline) {
			return errFailure // our per-call timeout expired: the store was slow
		}
		if ctx.Err() != nil {
			return errExcluded // the caller cancelled
		}
		if d, ok := ctx.Deadline(); ok && !now.Before(d) {
			return errExcluded // the caller's own deadline expired
		}
	}
	if b.isFailure(err) {
		return errFailure
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errExcluded // a context error we can't attribute: no information
	}
	return nil // the store answered
}

// callContext derives the context of one call: ctx bounded by CallTimeout,
// which must be on. It returns ctx itself, with no cancel func and a zero
// deadline, if ctx's own deadline is not later; the shared deadline context
// (see calltimeout.Bounder.Share), with no cancel func, if ctx can never be
// done; otherwise a context.WithDeadline child and its cancel func.
func (b *Breaker) callContext(ctx context.Context) (context.Context, context.CancelFunc, time.Time) {
	pd, ok := ctx.Deadline()
	// seen is a time observed earlier, so seen+CallTimeout <= now+CallTimeout:
	// a caller deadline before it is sooner than ours, and time.Now (a large
	// part of the whole cost on some VMs) is not needed. The comparison is
	// refreshed whenever it fails.
	if ok && pd.Sub(b.epoch) <= time.Duration(b.seen.Load())+b.callTimeout {
		return ctx, nil, time.Time{}
	}
	now := time.Now()
	b.seen.Store(int64(now.Sub(b.epoch))) // a racing older store is still a lower bound
	deadline := now.Add(b.callTimeout)
	if ok && !pd.After(deadline) {
		return ctx, nil, time.Time{}
	}
	if ctx.Done() == nil {
		// A ctx that can never be done (Background, WithoutCancel): share one
		// deadline context with the calls starting within CallTimeout/16, so
		// this common case costs no allocation and no timer of its own.
		cctx, shared := b.shared.Share(ctx, now)
		return cctx, nil, shared
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	return cctx, cancel, deadline
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
		slog.String("breaker", b.name),
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
