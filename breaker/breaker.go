package breaker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/sony/gobreaker/v2"
)

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

	// Calls the store could not answer, by the policy that answered them
	// (their Source): FailClosed with an error, FailOpen admitting without
	// the store, FailLocal with the fallback. Degraded is FailOpen +
	// FailLocal, as everywhere in floodgate.
	FailClosed, FailOpen, FailLocal uint64
	Degraded                        uint64

	// StoreAnswers counts calls the store answered (Source FromStore, an
	// error that is not a store failure included; caller cancellations not).
	StoreAnswers uint64

	// Probes counts the breaker's own probes (Config.Probe, or the PING a
	// floodgate limiter installed), and ProbeFailures those whose outcome
	// was a store failure (also counted in StoreFailures). Callers' calls
	// let through as probes, without a Probe, are counted as calls.
	Probes, ProbeFailures uint64
}

// A Breaker is a circuit breaker guarding calls to a shared store (one Redis
// endpoint). One gobreaker state machine, driven through its exported API
// only, decides the states: the trip rules, the open timer, the half-open
// probes. Breaker adds what guarding a store needs and gobreaker does not
// have: the per-call timeout, with the caller's own cancellation told apart
// from a slow store; the store-failure classifier; a policy per call, with a
// fallback; open periods that grow on repeated trips and are jittered (a
// period gobreaker's fixed Timeout cannot express, so Breaker keeps callers
// away from gobreaker until it ends); transitions reported, logged and
// observed without gobreaker's lock held; and counters by Source. One
// Breaker is meant to be shared by every semaphore and meter using the same
// endpoint, each with its own policy.
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
	obs         floodgate.Observer
	logger      *slog.Logger
	openBase    time.Duration
	openMax     time.Duration
	jitter      float64

	state      atomic.Uint32 // gobreaker's state, mirrored by onTransition
	openUntil  atomic.Int64  // end of the open period, ns since epoch; valid while state is open
	hasPending atomic.Bool   // pending is not empty

	trips, transitions, failures    atomic.Uint64
	failClosed, failOpen, failLocal atomic.Uint64
	answers                         atomic.Uint64
	probes, probeFailures           atomic.Uint64

	probe   atomic.Pointer[func(context.Context) error] // Config.Probe, or one a store installed
	probing atomic.Bool                                 // a probe goroutine is running

	mu sync.Mutex
	// mu guards:
	openTrips   int          // trips since the last close
	pending     []transition // recorded under gobreaker's lock, not yet reported
	dispatching bool         // a goroutine is reporting pending transitions
	last        counters     // counters at the last transition, for the log line
}

// New returns a Breaker named name (used in logs and errors; for example the
// Redis address) configured by cfg. It
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

func (b *Breaker) setup(name string, cfg Config) {
	b.name = name
	b.epoch = time.Now()
	b.callTimeout = cfg.callTimeout()
	b.isFailure = cfg.IsFailure
	if b.isFailure == nil {
		b.isFailure = IsStoreFailure
	}
	b.obs = cfg.Observer
	b.logger = cfg.Logger
	b.openBase = cfg.openDuration()
	b.openMax = cfg.maxOpenDuration()
	b.jitter = cfg.jitter()
	if cfg.Probe != nil {
		b.probe.Store(&cfg.Probe)
	}

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
		IsExcluded:    func(err error) bool { return err != nil && (err == errCaller || err == errExcluded) },
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
	st.FailClosed = b.failClosed.Load()
	st.FailOpen = b.failOpen.Load()
	st.FailLocal = b.failLocal.Load()
	st.Degraded = st.FailOpen + st.FailLocal
	st.StoreAnswers = b.answers.Load()
	st.Probes = b.probes.Load()
	st.ProbeFailures = b.probeFailures.Load()
	return st
}

// LongestOpen returns the longest one open period of the breaker can last:
// MaxOpenDuration (OpenDuration if the open time does not grow) lengthened
// by the whole of Jitter. Breakers of one configuration that tripped on the
// same outage have all ended their open periods within it of the store's
// return (distsem holds a process to its local share that long after an
// outage, while the rest of the fleet finds Redis again).
func (b *Breaker) LongestOpen() time.Duration {
	b.init()
	return b.openMax + time.Duration(b.jitter*float64(b.openMax))
}

// CallTimeout returns the per-call timeout [Do] applies ([Config.CallTimeout]
// after defaults), or 0 if calls are not bounded.
func (b *Breaker) CallTimeout() time.Duration {
	b.init()
	return b.callTimeout
}
