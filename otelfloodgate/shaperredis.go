package otelfloodgate

// The adapters of shaperredis, kept in this one file.

import (
	"context"

	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"go.opentelemetry.io/otel/metric"
)

// Lease observes a token lease's Stats as floodgate.admitted (cost served from
// leased tokens or the local allowance), floodgate.rejected (rate) and
// floodgate.lease.renewals (refill calls, outcome ok or failure). The Redis
// meter behind it reports its decisions through its breaker (see
// [Metrics.Breaker]).
func (m *Metrics) Lease(name string, l *shaperredis.Lease) (metric.Registration, error) {
	base := observe(attrs(name, KindLease))
	rate := observe(attrs(name, KindLease, KeyReason.String(ReasonRate)))
	ok := observe(attrs(name, KindLease, KeyOutcome.String("ok")))
	failed := observe(attrs(name, KindLease, KeyOutcome.String("failure")))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := l.Stats()
		o.ObserveInt64(m.admitted, st.Served+st.Local, base...)
		o.ObserveInt64(m.rejected, st.Rejected, rate...)
		o.ObserveInt64(m.leaseRenewals, st.Refills-st.Errors, ok...)
		o.ObserveInt64(m.leaseRenewals, st.Errors, failed...)
		return nil
	}, m.admitted, m.rejected, m.leaseRenewals)
}

// RedisMeter observes a Redis meter's Stats (this process's decisions) as
// floodgate.admitted, floodgate.rejected (rate, too_large, store_unavailable,
// invalid_key, error), floodgate.canceled and floodgate.decisions by source
// (store and local: decisions Redis or the FailLocal meter made, admitted or
// denied; fail_open: admitted without Redis; fail_closed: refused because
// Redis could not answer). Its breaker reports the same calls with every
// other user of the breaker (see [Metrics.Breaker]).
func (m *Metrics) RedisMeter(name string, rm *shaperredis.Meter) (metric.Registration, error) {
	base := observe(attrs(name, KindMeter))
	r := reasonOpts(name, KindMeter, ReasonRate, ReasonTooLarge, ReasonStoreUnavailable, ReasonInvalidKey, ReasonError)
	src := func(s string) []metric.ObserveOption { return observe(attrs(name, KindMeter, KeySource.String(s))) }
	store, local, open, closed := src(SourceStore), src(SourceLocal), src(SourceFailOpen), src(SourceFailClosed)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := rm.Stats()
		o.ObserveInt64(m.admitted, st.Admitted, base...)
		o.ObserveInt64(m.canceled, st.Canceled, base...)
		o.ObserveInt64(m.rejected, st.Limited, r[ReasonRate]...)
		o.ObserveInt64(m.rejected, st.TooLarge, r[ReasonTooLarge]...)
		o.ObserveInt64(m.rejected, st.Unavailable, r[ReasonStoreUnavailable]...)
		o.ObserveInt64(m.rejected, st.InvalidKey, r[ReasonInvalidKey]...)
		o.ObserveInt64(m.rejected, st.Errors, r[ReasonError]...)
		o.ObserveInt64(m.decisions, st.Store, store...)
		o.ObserveInt64(m.decisions, st.Local, local...)
		o.ObserveInt64(m.decisions, st.FailOpen, open...)
		o.ObserveInt64(m.decisions, st.Unavailable, closed...)
		return nil
	}, m.admitted, m.canceled, m.rejected, m.decisions)
}

// RedisQueue observes a Redis queue's Stats (this process's calls) as
// floodgate.admitted, floodgate.rejected (queue_full, max_wait, deadline,
// too_large, store_unavailable, closed, error), floodgate.canceled,
// floodgate.waiting and floodgate.decisions by source of the admitted calls
// (store, local, fail_open) and of the refusals for want of Redis
// (fail_closed). Queue.Stats takes the queue's mutex to count the waiting
// calls; the callback holds it for no longer than that. The Redis queue has
// no wait hook, so no floodgate.queue.delay.
func (m *Metrics) RedisQueue(name string, q *shaperredis.Queue) (metric.Registration, error) {
	base := observe(attrs(name, KindQueue))
	r := reasonOpts(name, KindQueue, ReasonQueueFull, ReasonMaxWait, ReasonDeadline, ReasonTooLarge,
		ReasonStoreUnavailable, ReasonClosed, ReasonError)
	src := func(s string) []metric.ObserveOption { return observe(attrs(name, KindQueue, KeySource.String(s))) }
	store, local, open, closed := src(SourceStore), src(SourceLocal), src(SourceFailOpen), src(SourceFailClosed)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := q.Stats()
		o.ObserveInt64(m.admitted, st.Admitted(), base...)
		o.ObserveInt64(m.canceled, st.Canceled, base...)
		o.ObserveInt64(m.waiting, st.Waiting, base...)
		o.ObserveInt64(m.rejected, st.RejectedQueueFull, r[ReasonQueueFull]...)
		o.ObserveInt64(m.rejected, st.RejectedMaxWait, r[ReasonMaxWait]...)
		o.ObserveInt64(m.rejected, st.RejectedDeadline, r[ReasonDeadline]...)
		o.ObserveInt64(m.rejected, st.RejectedTooLarge, r[ReasonTooLarge]...)
		o.ObserveInt64(m.rejected, st.RejectedUnavailable, r[ReasonStoreUnavailable]...)
		o.ObserveInt64(m.rejected, st.RejectedClosed, r[ReasonClosed]...)
		o.ObserveInt64(m.rejected, st.Errors, r[ReasonError]...)
		o.ObserveInt64(m.decisions, st.Store, store...)
		o.ObserveInt64(m.decisions, st.Local, local...)
		o.ObserveInt64(m.decisions, st.FailOpen, open...)
		o.ObserveInt64(m.decisions, st.RejectedUnavailable, closed...)
		return nil
	}, m.admitted, m.canceled, m.waiting, m.rejected, m.decisions)
}
