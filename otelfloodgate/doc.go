// Package otelfloodgate records what floodgate's components do as
// OpenTelemetry metrics: one implementation of [floodgate.Observer], given
// to any component's Config.Observer. It is a module of its own
// (github.com/floodgate-go/floodgate/otelfloodgate), so that only its users
// have OpenTelemetry in their go.mod.
//
// # Usage
//
//	m, err := otelfloodgate.New(otel.GetMeterProvider())
//	s := semaphore.New(50, semaphore.Config{MaxWait: 2 * time.Second, Observer: m.Observer("reports")})
//
// Everything is recorded from the events, as they happen, with attribute
// sets made once per combination, so recording allocates nothing; nothing
// reads a component's Stats. The counts of every call (admitted, rejected,
// canceled, in_use, decisions) go to atomic counters that the Meter reads
// when it collects (an observed grant and release cost about 100 ns, where
// the SDK's synchronous Add would cost some hundreds each); the histograms,
// the breaker and lease instruments and an adaptive gate's limit and
// baseline are synchronous. A component that is
// not given an Observer costs nothing.
//
// # Instruments
//
//	name                           instrument     unit          attributes                from
//	floodgate.admitted             counter        {call}        limiter, component, part  KindAdmit
//	floodgate.rejected             counter        {call}        ..., reason               KindReject
//	floodgate.canceled             counter        {call}        ...                       KindCancel
//	floodgate.in_use               updowncounter  {weight}      ...                       KindAdmit +N, KindRelease -N (semaphore, distsem, adaptive)
//	floodgate.wait.duration        histogram      s             ..., kind                 KindAdmit, KindReject, KindCancel that queued
//	floodgate.hold.duration        histogram      s             ...                       KindRelease with a hold time
//	floodgate.decisions            counter        {call}        ..., source               KindAdmit, KindReject with a Source
//	floodgate.store.call.duration  histogram      s             ..., outcome [, source]   KindStoreCall
//	floodgate.breaker.state        gauge          1             ..., state                KindStateChange: 1 for To, 0 for the others
//	floodgate.breaker.transitions  counter        {transition}  ..., state (entered)      KindStateChange
//	floodgate.lease.lost           counter        {lease}       ...                       KindLeaseLost
//	floodgate.lease.renewals       counter        {renewal}     ..., outcome              KindRenew
//	floodgate.limit                gauge          {weight}      ...                       KindLimit: N, the limit an adaptive gate set
//	floodgate.latency.baseline     gauge          s             ...                       KindLimit: Duration, the gate's latency baseline
//
// floodgate.in_use counts the weight held through this observer: it adds N
// when a semaphore, distsem or adaptive gate grants and subtracts it when
// that weight is released, so it starts at 0 when the observer is attached
// and is exact only for a gate that had it from its creation. A distsem's
// in_use is this process's share, not the fleet's. The consumers (bulkhead,
// workers, db) hold through their gates, whose own observers count that
// weight. floodgate.breaker.state has no point until the breaker's first
// transition; floodgate.limit and floodgate.latency.baseline have none until
// the adaptive gate first moves its limit (a KindLimit with Duration 0, no
// baseline known yet, records the limit only). Waits and holds of 0 (a call
// that did not queue, a component that does not time holds) are not
// recorded: the histograms count the calls that queued, floodgate.admitted
// counts every call.
//
// # Attributes
//
//	floodgate.limiter    the name given to Observer
//	floodgate.component  a floodgate.Component: semaphore, distsem, meter, queue, lease, breaker, bulkhead, workers, db, adaptive, backoff
//	floodgate.part       Event.Part: a bulkhead layer, a Workers or bulkheadpgx class; absent for a leaf
//	floodgate.class      Event.Class: a bulkhead request's criticality class; absent when unset
//	floodgate.shadow     true on a shadow layer's events (Event.Shadow); absent otherwise
//	floodgate.reason     a floodgate.Reason word (an unknown one is recorded as "error")
//	floodgate.source     a floodgate.Source word: store, fail_open, fail_local, fail_closed
//	floodgate.state      closed, open, half_open
//	floodgate.outcome    ok, failure
//	floodgate.kind       the Event.Kind a wait ended in: admit, reject, cancel
//
// Every instrument's points carry floodgate.class and floodgate.shadow when
// the event has them: a bulkhead layer with criticality classes is counted
// by class, and a shadow layer's points (its rejected: what it would have
// refused) stay apart from an enforcing layer's.
//
// The words are those of docs/vocabulary.md (Metric words); a test fails
// when a value recorded for any event is not listed there.
//
// # Prometheus
//
// With OpenTelemetry's Prometheus exporter the names become
// floodgate_admitted_total, floodgate_wait_duration_seconds_bucket,
// floodgate_limit, floodgate_latency_baseline_seconds, ... with
// labels floodgate_limiter, floodgate_component, floodgate_reason.
package otelfloodgate
