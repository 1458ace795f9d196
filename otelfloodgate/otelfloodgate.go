package otelfloodgate

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of the Meter that New takes from the
// MeterProvider.
const ScopeName = "github.com/floodgate-go/floodgate/otelfloodgate"

// Instrument names (see the package doc for units and attributes).
const (
	NameAdmitted           = "floodgate.admitted"
	NameRejected           = "floodgate.rejected"
	NameCanceled           = "floodgate.canceled"
	NameInUse              = "floodgate.in_use"
	NameWaiting            = "floodgate.waiting"
	NameLimit              = "floodgate.limit"
	NameWaitDuration       = "floodgate.wait.duration"
	NameHoldDuration       = "floodgate.hold.duration"
	NameQueueDelay         = "floodgate.queue.delay"
	NameDecisions          = "floodgate.decisions"
	NameBreakerState       = "floodgate.breaker.state"
	NameBreakerTransitions = "floodgate.breaker.transitions"
	NameStoreCallDuration  = "floodgate.store.call.duration"
	NameStoreErrors        = "floodgate.store.errors"
	NameLeaseLost          = "floodgate.lease.lost"
	NameLeaseRenewals      = "floodgate.lease.renewals"
)

// Attribute keys.
const (
	KeyLimiter = attribute.Key("floodgate.limiter") // the name given when attaching
	KeyKind    = attribute.Key("floodgate.kind")    // semaphore, distsem, meter, queue, lease, breaker, bulkhead
	KeyReason  = attribute.Key("floodgate.reason")  // why a call was rejected
	KeySource  = attribute.Key("floodgate.source")  // where a decision came from
	KeyState   = attribute.Key("floodgate.state")   // a breaker state
	KeyOutcome = attribute.Key("floodgate.outcome") // ok or failure, of a store call or renewal
	KeyLayer   = attribute.Key("floodgate.layer")   // a bulkhead layer's name
	KeyClass   = attribute.Key("floodgate.class")   // a bulkhead.Workers or bulkheadpgx class
)

// Values of KeyReason.
const (
	ReasonQueueFull        = "queue_full"
	ReasonMaxWait          = "max_wait"
	ReasonDeadline         = "deadline"
	ReasonRate             = "rate"
	ReasonTooLarge         = "too_large"
	ReasonStoreUnavailable = "store_unavailable"
	ReasonNoCapacity       = "no_capacity"
	ReasonClosed           = "closed"
	ReasonLocalBusy        = "local_busy"
	ReasonConcurrency      = "concurrency"
	ReasonError            = "error"
	ReasonNoIdentity       = "no_identity"
	ReasonInvalidKey       = "invalid_key"
	ReasonNoPolicy         = "no_policy"
	ReasonPace             = "pace" // a Workers' Pace failed a job's start
	ReasonGate             = "gate" // a Workers' Gate failed a job's start
	ReasonHandedBack       = "handed_back"
)

// Values of KeySource.
const (
	SourceStore      = "store"
	SourceLocal      = "local"
	SourceFailOpen   = "fail_open"
	SourceFailClosed = "fail_closed"
)

// Values of KeyKind.
const (
	KindSemaphore = "semaphore"
	KindDistsem   = "distsem"
	KindMeter     = "meter"
	KindQueue     = "queue"
	KindLease     = "lease"
	KindBreaker   = "breaker"
	KindBulkhead  = "bulkhead"
	KindWorkers   = "workers"
	KindDBPool    = "db_pool" // a bulkheadpgx.DB
)

// Metrics holds the floodgate instruments of one OpenTelemetry Meter. Attach
// limiters to it with its methods; each returns a [metric.Registration] whose
// Unregister stops the observations (call it when the limiter is closed). A
// Metrics is safe for concurrent use.
type Metrics struct {
	meter metric.Meter

	admitted, rejected, canceled        metric.Int64ObservableCounter
	inUse, waiting                      metric.Int64ObservableUpDownCounter
	limit                               metric.Int64ObservableGauge
	decisions, transitions, storeErrors metric.Int64ObservableCounter
	breakerState                        metric.Int64ObservableGauge
	leaseLost, leaseRenewals            metric.Int64ObservableCounter

	waitDuration, holdDuration, queueDelay, storeCall metric.Float64Histogram
}

// DurationBuckets are the explicit bucket boundaries, in seconds, of every
// floodgate duration histogram: from 100 µs (a local grant after a short
// queue, a Redis round trip) to 60 s (a long MaxWait).
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New creates the floodgate instruments on the Meter named ScopeName of mp.
// It returns the first error the API reports (an instrument it could not
// create).
func New(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(ScopeName)}
	var errs []error
	c := func(name, unit, desc string) metric.Int64ObservableCounter {
		i, err := m.meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	u := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		i, err := m.meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	g := func(name, unit, desc string) metric.Int64ObservableGauge {
		i, err := m.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	h := func(name, desc string) metric.Float64Histogram {
		i, err := m.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(DurationBuckets...))
		errs = append(errs, err)
		return i
	}
	m.admitted = c(NameAdmitted, "{call}", "Calls admitted.")
	m.rejected = c(NameRejected, "{call}", "Calls rejected, by floodgate.reason.")
	m.canceled = c(NameCanceled, "{call}", "Calls whose context ended before they were admitted.")
	m.inUse = u(NameInUse, "{weight}", "Weight held now.")
	m.waiting = u(NameWaiting, "{call}", "Calls waiting now.")
	m.limit = g(NameLimit, "{weight}", "The current limit.")
	m.decisions = c(NameDecisions, "{call}", "Store-guarded calls, by floodgate.source.")
	m.breakerState = g(NameBreakerState, "1", "1 for the breaker's current floodgate.state, 0 for the others.")
	m.transitions = c(NameBreakerTransitions, "{transition}", "Breaker state transitions.")
	m.storeErrors = c(NameStoreErrors, "{call}", "Store calls that failed (timeouts included).")
	m.leaseLost = c(NameLeaseLost, "{lease}", "Leases lost.")
	m.leaseRenewals = c(NameLeaseRenewals, "{renewal}", "Lease renewals, by floodgate.outcome.")
	m.waitDuration = h(NameWaitDuration, "Time waited by calls that queued before being admitted.")
	m.holdDuration = h(NameHoldDuration, "Time a permit was held.")
	m.queueDelay = h(NameQueueDelay, "Delay of calls that waited in a queue for their slot.")
	m.storeCall = h(NameStoreCallDuration, "Duration of store calls, by floodgate.outcome.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// attrs is the attribute set of one limiter, with extra attributes.
func attrs(limiter, kind string, kv ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{KeyLimiter.String(limiter), KeyKind.String(kind)}, kv...)...)
}

// observe is an observation option computed once.
func observe(s attribute.Set) []metric.ObserveOption {
	return []metric.ObserveOption{metric.WithAttributeSet(s)}
}

// record is a recording option computed once, so that Record allocates nothing.
func record(s attribute.Set) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(s)}
}

// reasonOpts precomputes the options of floodgate.rejected for each reason.
func reasonOpts(limiter, kind string, reasons ...string) map[string][]metric.ObserveOption {
	out := make(map[string][]metric.ObserveOption, len(reasons))
	for _, r := range reasons {
		out[r] = observe(attrs(limiter, kind, KeyReason.String(r)))
	}
	return out
}

// seconds records d in h with opts. It allocates nothing.
func seconds(h metric.Float64Histogram, d time.Duration, opts []metric.RecordOption) {
	h.Record(context.Background(), d.Seconds(), opts...)
}

func i64(v uint64) int64 { return int64(min(v, 1<<63-1)) }
