// Package otelfloodgate exports every floodgate limiter to OpenTelemetry with
// one vocabulary of instrument names, units and attributes (docs/metrics.md
// in the repository holds the same tables). Only its users import
// OpenTelemetry.
//
// # Usage
//
//	m, err := otelfloodgate.New(otel.GetMeterProvider())
//	s := semaphore.New(50, m.SemaphoreConfig("reports", semaphore.Config{MaxWait: 2 * time.Second}))
//	reg, err := m.Semaphore("reports", s)
//	defer reg.Unregister()
//
// The XxxConfig methods add the hooks that feed histograms to a leaf's
// config (chaining the hooks already there); the other methods register one
// callback that reads the object's Stats at collection time. No callback
// holds a lock of this package, and histograms record with attribute sets
// computed once, so recording allocates nothing. The admitted path of a
// semaphore or meter with metrics attached runs the same code as without:
// counts come from Stats, and only calls that queued are timed.
//
// # Instruments
//
//	floodgate.admitted              counter        {call}        limiter, kind [, layer|class]
//	floodgate.rejected              counter        {call}        limiter, kind, reason [, layer|class]
//	floodgate.canceled              counter        {call}        limiter, kind [, layer|class]
//	floodgate.in_use                updowncounter  {weight}      limiter, kind [, layer|class]
//	floodgate.waiting               updowncounter  {call}        limiter, kind [, layer|class]
//	floodgate.limit                 gauge          {weight}      limiter, kind
//	floodgate.wait.duration         histogram      s             limiter, kind [, layer|class]
//	floodgate.hold.duration         histogram      s             limiter, kind [, class]
//	floodgate.queue.delay           histogram      s             limiter, kind [, class]
//	floodgate.decisions             counter        {call}        limiter, kind, source
//	floodgate.breaker.state         gauge          1             limiter, kind, state
//	floodgate.breaker.transitions   counter        {transition}  limiter, kind
//	floodgate.store.call.duration   histogram      s             limiter, kind, outcome
//	floodgate.store.errors          counter        {call}        limiter, kind
//	floodgate.lease.lost            counter        {lease}       limiter, kind
//	floodgate.lease.renewals        counter        {renewal}     limiter, kind, outcome
//
// # Attributes
//
//	floodgate.limiter  the name given when attaching; never part of a metric name
//	floodgate.kind     semaphore, distsem, meter, queue, lease, breaker, bulkhead,
//	                   workers, db_pool
//	floodgate.reason   queue_full, max_wait, deadline, rate, too_large,
//	                   store_unavailable, no_capacity, local_busy, closed,
//	                   concurrency, error, no_identity, invalid_key, no_policy,
//	                   handed_back, pace, gate
//	floodgate.source   store, local, fail_open, fail_closed
//	floodgate.state    closed, half_open, open
//	floodgate.outcome  ok, failure
//	floodgate.layer    a bulkhead layer's name
//	floodgate.class    a bulkhead.Workers or bulkheadpgx class's name
//
// A distsem is observed through [distsem.Semaphore.LocalStats], which does
// no I/O: the counts of this process. Its fleet-wide Stats costs a Redis
// round trip and would be reported identically by every process.
//
// # Prometheus
//
// With OpenTelemetry's Prometheus exporter the names become
// floodgate_admitted_total, floodgate_wait_duration_seconds_bucket, ... with
// labels floodgate_limiter, floodgate_kind, floodgate_reason.
package otelfloodgate
