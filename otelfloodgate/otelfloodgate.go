package otelfloodgate

import (
	"context"
	"errors"
	"sync"

	floodgate "github.com/floodgate-go/floodgate"
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
	NameWaitDuration       = "floodgate.wait.duration"
	NameHoldDuration       = "floodgate.hold.duration"
	NameDecisions          = "floodgate.decisions"
	NameStoreCallDuration  = "floodgate.store.call.duration"
	NameBreakerState       = "floodgate.breaker.state"
	NameBreakerTransitions = "floodgate.breaker.transitions"
	NameLeaseLost          = "floodgate.lease.lost"
	NameLeaseRenewals      = "floodgate.lease.renewals"
	NameLimit              = "floodgate.limit"
	NameLatencyBaseline    = "floodgate.latency.baseline"
)

// Attribute keys. The values of KeyComponent, KeyReason, KeySource,
// KeyState, KeyOutcome and KeyKind are the words of docs/vocabulary.md
// (Metric words); KeyLimiter, KeyPart and KeyClass carry names the user
// chose; KeyShadow is a boolean, present only when true.
const (
	KeyLimiter   = attribute.Key("floodgate.limiter")   // the name given to Observer
	KeyComponent = attribute.Key("floodgate.component") // a floodgate.Component word
	KeyPart      = attribute.Key("floodgate.part")      // Event.Part: a layer or class name; absent for a leaf
	KeyClass     = attribute.Key("floodgate.class")     // Event.Class: a bulkhead request's criticality class; absent when unset
	KeyShadow    = attribute.Key("floodgate.shadow")    // true on the events of a layer in shadow mode (Event.Shadow); absent otherwise
	KeyReason    = attribute.Key("floodgate.reason")    // a floodgate.Reason word
	KeySource    = attribute.Key("floodgate.source")    // a floodgate.Source word
	KeyState     = attribute.Key("floodgate.state")     // a breaker state: floodgate.StateClosed, ...
	KeyOutcome   = attribute.Key("floodgate.outcome")   // OutcomeOK or OutcomeFailure
	KeyKind      = attribute.Key("floodgate.kind")      // the Event.Kind a wait ended in: admit, reject, cancel
)

// Values of KeyOutcome: whether a store call or a renewal succeeded.
const (
	OutcomeOK      = "ok"
	OutcomeFailure = "failure"
)

// DurationBuckets are the explicit bucket boundaries, in seconds, of every
// floodgate duration histogram: from 100 µs (a local grant after a short
// queue, a Redis round trip) to 60 s (a long MaxWait).
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds the floodgate instruments of one OpenTelemetry Meter. Its
// Observer method gives each component its [floodgate.Observer]. A Metrics
// is safe for concurrent use.
//
// The counts of every call (admitted, rejected, canceled, in_use,
// decisions) are added, per attribute set, to an atomic counter that the
// Meter reads at collection time (observable instruments): a synchronous
// Add of the SDK costs some hundreds of nanoseconds, which an observed
// semaphore grant (about 20 ns) would pay on every call. The histograms
// (recorded only for calls that queued, and for store calls) and the rare
// events (breaker transitions and state, lease losses and renewals, an
// adaptive gate's changes of limit) are synchronous instruments.
type Metrics struct {
	admitted, rejected, canceled, decisions metric.Int64ObservableCounter
	inUse                                   metric.Int64ObservableUpDownCounter
	transitions, leaseLost, leaseRenewals   metric.Int64Counter
	breakerState, limit                     metric.Int64Gauge
	baseline                                metric.Float64Gauge

	waitDuration, holdDuration, storeCall metric.Float64Histogram

	mu        sync.Mutex
	observers map[string]*observer
}

// New creates the floodgate instruments on the Meter named ScopeName of mp.
// It returns the first errors the API reports (an instrument it could not
// create), joined.
func New(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter(ScopeName)
	var errs []error
	c := func(name, unit, desc string) metric.Int64Counter {
		i, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	oc := func(name, unit, desc string) metric.Int64ObservableCounter {
		i, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	h := func(name, desc string) metric.Float64Histogram {
		i, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(DurationBuckets...))
		errs = append(errs, err)
		return i
	}
	m := &Metrics{
		admitted:      oc(NameAdmitted, "{call}", "Calls admitted."),
		rejected:      oc(NameRejected, "{call}", "Calls refused, by floodgate.reason."),
		canceled:      oc(NameCanceled, "{call}", "Calls whose context ended before they were admitted."),
		decisions:     oc(NameDecisions, "{call}", "Admissions and refusals of store-backed components, by floodgate.source."),
		transitions:   c(NameBreakerTransitions, "{transition}", "Breaker state transitions, by the floodgate.state entered."),
		leaseLost:     c(NameLeaseLost, "{lease}", "Leases lost before they were released."),
		leaseRenewals: c(NameLeaseRenewals, "{renewal}", "Lease renewals, by floodgate.outcome."),
		waitDuration:  h(NameWaitDuration, "Time waited by calls that queued, by the floodgate.kind the wait ended in."),
		holdDuration:  h(NameHoldDuration, "Time weight was held, where the component measures it."),
		storeCall:     h(NameStoreCallDuration, "Duration of store calls, by floodgate.outcome."),
		observers:     map[string]*observer{},
	}
	var err error
	m.inUse, err = meter.Int64ObservableUpDownCounter(NameInUse, metric.WithUnit("{weight}"),
		metric.WithDescription("Weight of semaphore, distsem and adaptive gates held now, counted through this observer."))
	errs = append(errs, err)
	g := func(name, unit, desc string) metric.Int64Gauge {
		i, err := meter.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	m.breakerState = g(NameBreakerState, "1", "1 for the breaker's current floodgate.state, 0 for the others.")
	m.limit = g(NameLimit, "{weight}", "The limit an adaptive gate set itself last.")
	m.baseline, err = meter.Float64Gauge(NameLatencyBaseline, metric.WithUnit("s"),
		metric.WithDescription("An adaptive gate's latency baseline (the downstream's no-queue latency) when it last moved its limit."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := meter.RegisterCallback(m.collect, m.admitted, m.rejected, m.canceled, m.decisions, m.inUse); err != nil {
		return nil, err
	}
	return m, nil
}

// collect reports every counted attribute set of every observer.
func (m *Metrics) collect(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	obs := make([]*observer, 0, len(m.observers))
	for _, ob := range m.observers {
		obs = append(obs, ob)
	}
	m.mu.Unlock()
	for _, ob := range obs {
		for _, c := range *ob.cells.Load() {
			if c.counter != nil && c.touched.Load() {
				o.ObserveInt64(c.counter, c.n.Load(), c.obs...)
			}
		}
	}
	return nil
}

// Observer returns the floodgate.Observer that records what a component
// reports into m's instruments, every point with KeyLimiter set to name.
// Give one to each component's Config.Observer; components may share one
// (their events are told apart by KeyComponent and KeyPart), and Observer
// returns the same one for the same name. name, like Event.Part, must come
// from a bounded set: never a key. A nil *Metrics returns a nil Observer,
// so that metrics that are off leave every Config.Observer nil.
func (m *Metrics) Observer(name string) floodgate.Observer {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.observers[name]; ok {
		return o
	}
	o := &observer{m: m, limiter: KeyLimiter.String(name)}
	empty := map[attrKey]*cell{}
	o.cells.Store(&empty)
	m.observers[name] = o
	return o
}
