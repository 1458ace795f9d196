package floodgate

import (
	"context"

	"github.com/floodgate-go/floodgate/internal/core"
)

// The types are defined in internal/core, which imports only the standard
// library, so that semaphore and shaper (which import only the standard
// library and internal packages) can implement the contract and report
// events; these aliases are the same types under their public names. The
// docs of their methods and of Event's fields are in internal/core.

// A Gate caps how much runs at once: semaphore.Weighted and
// distsem.Semaphore are Gates. Hold waits, until ctx is done, for n to be
// free (how it queues is the gate's: FIFO for every floodgate gate); TryHold
// never waits (it may do I/O: distsem asks Redis). Both return the weight as
// a Held; on error nothing is held.
//
// No room now is a *RejectError with Reason ReasonNoCapacity (the gate's
// ErrNoCapacity), whose RetryAfter estimates when room could be free (0 when
// unknown); it is the one refusal of TryHold after which a consumer waits.
// Any other error (too large, too many keys, an invalid key, the store
// unavailable, closed) is final. A consumer that bounds the wait calls
// TryHold first and then Hold with a context that it cancels when the bound
// passes, so a gate must give back at once a grant whose context ends while
// it waits, and may return the context's error.
type Gate = core.Gate

// A KeyedGate is a Gate per key ("2 at once per tenant"): semaphore.Keyed and
// distsem.Keyed. A gate with rules for its keys refuses a key it cannot hold
// with its ErrInvalidKey and says so in advance through CheckKey(key) error.
type KeyedGate = core.KeyedGate

// Held is weight taken from a gate: Context is the context the held work runs
// under (a fleet gate cancels it when its lease is lost), N the weight, and
// Release gives the weight back. It is a small value, so that a local gate
// hands it out without allocating. Call Release once: a second Release of a
// local gate's Held gives back weight someone else holds, as x/sync's Release
// would (distsem's is idempotent). The zero Held holds nothing.
type Held = core.Held

// NewHeld returns a Held for a gate's implementation: the work runs under ctx
// and Release calls release(key, n). release is typically one function per
// gate, made once, so that a Held costs no allocation.
func NewHeld(ctx context.Context, release func(key string, n int64), key string, n int64) Held {
	return core.NewHeld(ctx, release, key, n)
}

// NewTaggedHeld returns a Held for a gate that needs, at release, to know
// something about the hold it gave out (the adaptive gate: when it began):
// Release calls release with the Held itself, whose Tag returns tag and whose
// Context and N are ctx and n. A tagged Held is unkeyed. As with NewHeld,
// release is one function per gate, made once, so a Held costs no allocation.
func NewTaggedHeld(ctx context.Context, release func(Held), n, tag int64) Held {
	return core.NewTaggedHeld(ctx, release, n, tag)
}

// DefaultMaxKeys bounds the live keys (keys with holders or waiters) of a
// keyed gate whose config leaves MaxKeys zero: semaphore.Keyed and
// distsem.Keyed both default to it.
const DefaultMaxKeys = core.DefaultMaxKeys

// An Observer is told what floodgate's components do, for metrics, logs and
// traces: the one observation hook of every package (Config.Observer).
// Observe is called synchronously, on the goroutine that did the thing,
// without any lock of the component held; it must be quick, must not block,
// and must be safe for concurrent use. otelfloodgate implements it.
type Observer = core.Observer

// ObserverFunc is a function that is an Observer.
type ObserverFunc = core.ObserverFunc

// An Event is one thing a component did (see Kind); which fields are set
// depends on its Kind. Part is a composer's layer or class, never a key.
type Event = core.Event

// A Kind says what an Event reports; String returns its word.
type Kind = core.Kind

// The kinds of Event.
const (
	KindAdmit       = core.KindAdmit       // admitted: weight granted, a rate admitted, a slot or a start; Duration is the wait
	KindRelease     = core.KindRelease     // held weight given back; Duration is the hold
	KindReject      = core.KindReject      // refused; Reason says why, Err is the *RejectError
	KindCancel      = core.KindCancel      // the caller's context ended before admission
	KindStoreCall   = core.KindStoreCall   // one store call returned; Err when it failed
	KindStateChange = core.KindStateChange // a breaker moved From one state To another
	KindRenew       = core.KindRenew       // a lease renewed in the store; Err when it failed
	KindLeaseLost   = core.KindLeaseLost   // a held lease expired in the store before release
	KindLimit       = core.KindLimit       // a gate moved its own limit: N the new limit, Duration the latency baseline
)

// A Component names the kind of thing an Event comes from.
type Component = core.Component

// The components.
const (
	ComponentSemaphore = core.ComponentSemaphore // semaphore.Weighted, semaphore.Keyed
	ComponentDistsem   = core.ComponentDistsem   // distsem.Semaphore, distsem.Keyed
	ComponentMeter     = core.ComponentMeter     // a shaperredis meter
	ComponentQueue     = core.ComponentQueue     // shaper.Queue, shaperredis.Queue
	ComponentLease     = core.ComponentLease     // shaperredis.Lease
	ComponentBreaker   = core.ComponentBreaker   // breaker.Breaker
	ComponentBulkhead  = core.ComponentBulkhead  // bulkhead.Bulkhead (Part: the layer)
	ComponentWorkers   = core.ComponentWorkers   // bulkhead.Workers (Part: the class)
	ComponentDB        = core.ComponentDB        // bulkheadpgx.DB (Part: the class)
	ComponentAdaptive  = core.ComponentAdaptive  // adaptive.Gate, adaptiveredis.Gate
	ComponentBackoff   = core.ComponentBackoff   // backoff.Client (Part: the Client's Name)
)

// The breaker states, as Event.From and Event.To and in metrics.
const (
	StateClosed   = core.StateClosed
	StateOpen     = core.StateOpen
	StateHalfOpen = core.StateHalfOpen
)

// A Source says where an answer came from: the store, or the policy that
// answered while the store could not. Degraded reports FailOpen or FailLocal,
// which is what "degraded" means in every package.
type Source = core.Source

// The sources.
const (
	SourceStore      = core.SourceStore      // the store answered
	SourceFailOpen   = core.SourceFailOpen   // store unavailable; FailOpen admitted
	SourceFailLocal  = core.SourceFailLocal  // store unavailable; FailLocal's in-process fallback answered
	SourceFailClosed = core.SourceFailClosed // store unavailable; FailClosed refused
)

// A Reason says why a call was refused: RejectError.Reason, Event.Reason, the
// metrics' reason attribute. Each package's sentinel errors map to one.
type Reason = core.Reason

// The reasons.
const (
	ReasonLimited     = core.ReasonLimited     // a rate denied (ErrLimited)
	ReasonNoCapacity  = core.ReasonNoCapacity  // a non-waiting call found no room (ErrNoCapacity)
	ReasonQueueFull   = core.ReasonQueueFull   // the bounded backlog is full (ErrQueueFull)
	ReasonMaxWait     = core.ReasonMaxWait     // the wait would be, or was, longer than MaxWait (ErrMaxWait)
	ReasonDeadline    = core.ReasonDeadline    // the wait would end after the context's deadline (ErrDeadline)
	ReasonTooLarge    = core.ReasonTooLarge    // n can never be admitted (ErrTooLarge)
	ReasonTooManyKeys = core.ReasonTooManyKeys // a new key beyond MaxKeys (ErrTooManyKeys)
	ReasonInvalidKey  = core.ReasonInvalidKey  // a key a component refuses (ErrInvalidKey)
	ReasonUnavailable = core.ReasonUnavailable // the store is unavailable and the policy refuses (breaker.ErrUnavailable)
	ReasonClosed      = core.ReasonClosed      // the component was closed or shut down (ErrClosed)
	ReasonNoIdentity  = core.ReasonNoIdentity  // bulkhead: no identity (ErrNoIdentity)
	ReasonNoPolicy    = core.ReasonNoPolicy    // bulkhead: no rate for the identity's tier (ErrNoPolicy)
	ReasonShed        = core.ReasonShed        // bulkhead: refused by criticality, for more critical requests (ErrShed)
	ReasonThrottled   = core.ReasonThrottled   // backoff: the client refused the call itself (ErrThrottled)
	ReasonError       = core.ReasonError       // a component could not decide for any other reason
)

// Reasons lists every Reason. Do not modify it.
var Reasons = core.Reasons

// A RejectError reports that a call was refused (Reason, a word; Err, the
// refusing package's sentinel or an error wrapping one, which errors.Is sees
// through), and when a retry could succeed (Delay, also RetryAfter). Layer
// and Status are set by a composer (bulkhead). It is the one refusal type of
// every floodgate package, each of which re-exports it as RejectError, so one
// errors.AsType[*floodgate.RejectError](err) finds the refusal whichever
// package made it.
type RejectError = core.RejectError
