package core

import "time"

// An Observer is told what floodgate's components do, for metrics, logs and
// traces: the one observation hook of every package (Config.Observer), as
// go-redis has one Hook. otelfloodgate implements it for OpenTelemetry.
//
// Observe is called synchronously, on the goroutine that did the thing,
// without any lock of the component held; it must be quick, must not block,
// and must be safe for concurrent use. It must not keep e.Err past its
// return if it mutates it. Hooks that change behaviour (bulkhead.Workers'
// OnUnstarted) are not observers and stay apart.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc is a function that is an Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// An Event is one thing a component did. Which fields are set depends on
// Kind; the others are zero.
type Event struct {
	Kind      Kind
	Component Component

	// Part names the part of a composer the event is about: a bulkhead
	// layer, a bulkhead.Workers class, a bulkheadpgx class. "" for a leaf.
	// Never a key: keys are unbounded, metric attributes must not be.
	Part string

	// N is the weight (or rate units) of Admit, Release, Reject and Cancel.
	N int64

	// Duration is, for Admit, Reject and Cancel, the time the call waited
	// (0 when it did not queue; the clock is not read then); for Release,
	// the time the weight was held (0 when the component does not measure
	// it); for StoreCall, the call's duration.
	Duration time.Duration

	// Reason says why, for Reject.
	Reason Reason

	// Source says where an answer came from, for Admit and Reject of a
	// store-backed component and for StoreCall ("" when not store-backed).
	Source Source

	// From and To are the breaker states of a StateChange: StateClosed,
	// StateOpen or StateHalfOpen.
	From, To string

	// Err is the error of a Reject (the *RejectError), of a failed
	// StoreCall, of a failed Renew, and the cause of a LeaseLost.
	Err error

	// Class is the criticality class of the request an Admit, Reject,
	// Release or Cancel of a bulkhead layer with classes is about (a name
	// from the layer's Classes; a bounded set, like Part). "" otherwise.
	Class string

	// Shadow is set on the events of a layer in shadow mode: a Reject says
	// what the layer would have refused; the request went on.
	Shadow bool
}

// A Kind says what an Event reports.
type Kind uint8

const (
	// KindAdmit: a call was admitted: a gate granted weight, a rate
	// admitted, a queue gave a start slot, a job started. Duration is the
	// wait.
	KindAdmit Kind = iota + 1
	// KindRelease: held weight was given back. Duration is the hold.
	KindRelease
	// KindReject: a call was refused; Reason says why, Err is the
	// *RejectError (or the error the call failed with).
	KindReject
	// KindCancel: the caller's context ended before the call was admitted.
	KindCancel
	// KindStoreCall: one call to the store (Redis) returned; Err is set
	// when it failed (a timeout included).
	KindStoreCall
	// KindStateChange: a breaker moved From one state To another.
	KindStateChange
	// KindRenew: a lease was renewed in the store; Err is set when the
	// renewal failed.
	KindRenew
	// KindLeaseLost: a held lease expired in the store before it was
	// released; the work's context is cancelled with Err.
	KindLeaseLost
	// KindLimit: a gate moved its own limit (the adaptive gates). N is the
	// new limit, Duration the latency baseline it was computed from.
	KindLimit
)

var kindNames = [...]string{"", "admit", "release", "reject", "cancel", "store_call", "state_change", "renew", "lease_lost", "limit"}

// String returns the kind as a word: "admit", "release", "reject", "cancel",
// "store_call", "state_change", "renew", "lease_lost" or "limit".
func (k Kind) String() string {
	if int(k) < len(kindNames) && k > 0 {
		return kindNames[k]
	}
	return "unknown"
}

// A Component names the kind of thing an Event comes from.
type Component string

// The components.
const (
	ComponentSemaphore Component = "semaphore" // semaphore.Weighted, semaphore.Keyed
	ComponentDistsem   Component = "distsem"   // distsem.Semaphore, distsem.Keyed
	ComponentMeter     Component = "meter"     // a shaperredis meter
	ComponentQueue     Component = "queue"     // shaper.Queue, shaperredis.Queue
	ComponentLease     Component = "lease"     // shaperredis.Lease
	ComponentBreaker   Component = "breaker"   // breaker.Breaker
	ComponentBulkhead  Component = "bulkhead"  // bulkhead.Bulkhead (Part: the layer)
	ComponentWorkers   Component = "workers"   // bulkhead.Workers (Part: the class)
	ComponentDB        Component = "db"        // bulkheadpgx.DB (Part: the class)
	ComponentAdaptive  Component = "adaptive"  // adaptive.Gate, adaptiveredis.Gate
	ComponentBackoff   Component = "backoff"   // backoff.Client (Part: the Client's Name)
)

// The breaker states, as Event.From and Event.To and in metrics.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half_open"
)

// A Source says where an answer came from: the store, or the policy that
// answered while the store could not. An answer is degraded when it came
// from FailOpen or FailLocal (see Degraded).
type Source string

// The sources.
const (
	SourceStore      Source = "store"       // the store answered
	SourceFailOpen   Source = "fail_open"   // store unavailable; FailOpen admitted
	SourceFailLocal  Source = "fail_local"  // store unavailable; FailLocal's in-process fallback answered
	SourceFailClosed Source = "fail_closed" // store unavailable; FailClosed refused
)

// Degraded reports whether s is an answer made without the store that
// still admitted or decided: SourceFailOpen or SourceFailLocal. Every
// package's "degraded" (Decision.Degraded, Permit.Degraded, the degraded
// counters, bulkhead's DegradedHeader) means this.
func (s Source) Degraded() bool { return s == SourceFailOpen || s == SourceFailLocal }

// A Reason says why a call was refused: RejectError.Reason, Event.Reason,
// the metrics' reason attribute. Each package's sentinel errors map to one.
type Reason string

// The reasons.
const (
	ReasonLimited     Reason = "limited"       // a rate denied (ErrLimited)
	ReasonNoCapacity  Reason = "no_capacity"   // a non-waiting call found no room (ErrNoCapacity)
	ReasonQueueFull   Reason = "queue_full"    // the bounded backlog is full (ErrQueueFull)
	ReasonMaxWait     Reason = "max_wait"      // the wait would be, or was, longer than MaxWait (ErrMaxWait)
	ReasonDeadline    Reason = "deadline"      // the wait would end after the context's deadline (ErrDeadline)
	ReasonTooLarge    Reason = "too_large"     // n can never be admitted (ErrTooLarge)
	ReasonTooManyKeys Reason = "too_many_keys" // a new key beyond MaxKeys (ErrTooManyKeys)
	ReasonInvalidKey  Reason = "invalid_key"   // a key a component refuses (ErrInvalidKey)
	ReasonUnavailable Reason = "unavailable"   // the store is unavailable and the policy refuses (breaker.ErrUnavailable)
	ReasonClosed      Reason = "closed"        // the component was closed or shut down (ErrClosed)
	ReasonNoIdentity  Reason = "no_identity"   // bulkhead: no identity (ErrNoIdentity)
	ReasonNoPolicy    Reason = "no_policy"     // bulkhead: no rate for the identity's tier (ErrNoPolicy)
	ReasonShed        Reason = "shed"          // bulkhead: refused by criticality to keep room for more critical requests (ErrShed)
	ReasonThrottled   Reason = "throttled"     // backoff: the client refused the call itself, the downstream refusing (ErrThrottled)
	ReasonError       Reason = "error"         // a component could not decide for any other reason
)

// Reasons lists every Reason, in the order above.
var Reasons = []Reason{ReasonLimited, ReasonNoCapacity, ReasonQueueFull, ReasonMaxWait, ReasonDeadline,
	ReasonTooLarge, ReasonTooManyKeys, ReasonInvalidKey, ReasonUnavailable, ReasonClosed,
	ReasonNoIdentity, ReasonNoPolicy, ReasonShed, ReasonThrottled, ReasonError}
