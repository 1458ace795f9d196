package otelfloodgate

import (
	"context"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"go.opentelemetry.io/otel/metric"
)

// SemaphoreConfig returns cfg with an OnWait hook that records
// floodgate.wait.duration for the calls that queued, then calls cfg's own
// OnWait. A grant without queueing is left untouched (no hook, no clock
// read): floodgate.admitted counts it.
func (m *Metrics) SemaphoreConfig(name string, cfg semaphore.Config) semaphore.Config {
	opts := record(attrs(name, KindSemaphore))
	h, next := m.waitDuration, cfg.OnWait
	cfg.OnWait = func(n int64, waited time.Duration) {
		seconds(h, waited, opts)
		if next != nil {
			next(n, waited)
		}
	}
	return cfg
}

// Semaphore observes s's Stats as floodgate.admitted, floodgate.rejected
// (queue_full, max_wait, deadline, too_large), floodgate.canceled,
// floodgate.in_use, floodgate.waiting and floodgate.limit.
func (m *Metrics) Semaphore(name string, s *semaphore.Weighted) (metric.Registration, error) {
	base := observe(attrs(name, KindSemaphore))
	r := reasonOpts(name, KindSemaphore, ReasonQueueFull, ReasonMaxWait, ReasonDeadline, ReasonTooLarge)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(m.admitted, i64(st.Acquired), base...)
		o.ObserveInt64(m.canceled, i64(st.Canceled), base...)
		o.ObserveInt64(m.rejected, i64(st.RejectedQueueFull), r[ReasonQueueFull]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedMaxWait), r[ReasonMaxWait]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedDeadline), r[ReasonDeadline]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedTooLarge), r[ReasonTooLarge]...)
		o.ObserveInt64(m.inUse, st.InUse, base...)
		o.ObserveInt64(m.waiting, int64(st.Waiting), base...)
		o.ObserveInt64(m.limit, st.Limit, base...)
		return nil
	}, m.admitted, m.canceled, m.rejected, m.inUse, m.waiting, m.limit)
}

// QueueConfig returns cfg with an OnWait hook that records
// floodgate.queue.delay for the calls that waited for their slot, then calls
// cfg's own OnWait.
func (m *Metrics) QueueConfig(name string, cfg shaper.QueueConfig) shaper.QueueConfig {
	opts := record(attrs(name, KindQueue))
	h, next := m.queueDelay, cfg.OnWait
	cfg.OnWait = func(n int64, waited time.Duration) {
		seconds(h, waited, opts)
		if next != nil {
			next(n, waited)
		}
	}
	return cfg
}

// Queue observes q's Stats as floodgate.admitted (released), floodgate.rejected
// (queue_full, max_wait, deadline, too_large), floodgate.canceled and
// floodgate.waiting.
func (m *Metrics) Queue(name string, q *shaper.Queue) (metric.Registration, error) {
	base := observe(attrs(name, KindQueue))
	r := reasonOpts(name, KindQueue, ReasonQueueFull, ReasonMaxWait, ReasonDeadline, ReasonTooLarge)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := q.Stats()
		o.ObserveInt64(m.admitted, i64(st.Released), base...)
		o.ObserveInt64(m.canceled, i64(st.Cancelled), base...)
		o.ObserveInt64(m.rejected, i64(st.RejectedQueueFull), r[ReasonQueueFull]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedMaxWait), r[ReasonMaxWait]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedDeadline), r[ReasonDeadline]...)
		o.ObserveInt64(m.rejected, i64(st.RejectedTooLarge), r[ReasonTooLarge]...)
		o.ObserveInt64(m.waiting, int64(st.Waiting), base...)
		return nil
	}, m.admitted, m.canceled, m.rejected, m.waiting)
}

// A LocalMeter is any of shaper's in-process meters (Meter, TokenBucket,
// FixedWindow, SlidingLog, SlidingCounter).
type LocalMeter interface {
	Stats() shaper.MeterStats
}

// Meter observes a local meter's Stats as floodgate.admitted and
// floodgate.rejected (rate, too_large). Nothing is added to the meter's
// decision path.
func (m *Metrics) Meter(name string, lm LocalMeter) (metric.Registration, error) {
	base := observe(attrs(name, KindMeter))
	r := reasonOpts(name, KindMeter, ReasonRate, ReasonTooLarge)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := lm.Stats()
		o.ObserveInt64(m.admitted, i64(st.Allowed), base...)
		o.ObserveInt64(m.rejected, i64(st.Denied), r[ReasonRate]...)
		o.ObserveInt64(m.rejected, i64(st.TooLarge), r[ReasonTooLarge]...)
		return nil
	}, m.admitted, m.rejected)
}

// DistsemConfig returns cfg with OnAcquire and OnRelease hooks that record
// floodgate.wait.duration (every successful acquire: its Redis calls are
// part of the wait) and floodgate.hold.duration, then call cfg's own hooks.
func (m *Metrics) DistsemConfig(name string, cfg distsem.Config) distsem.Config {
	opts := record(attrs(name, KindDistsem))
	wait, hold := m.waitDuration, m.holdDuration
	nextAcq, nextRel := cfg.OnAcquire, cfg.OnRelease
	cfg.OnAcquire = func(n int64, waited time.Duration) {
		seconds(wait, waited, opts)
		if nextAcq != nil {
			nextAcq(n, waited)
		}
	}
	cfg.OnRelease = func(n int64, held time.Duration) {
		seconds(hold, held, opts)
		if nextRel != nil {
			nextRel(n, held)
		}
	}
	return cfg
}

// Distsem observes s's LocalStats (no I/O: the counts of this process, not
// the fleet's) as floodgate.admitted, floodgate.decisions (grants by source:
// store, fail_open, local), floodgate.rejected (no_capacity, too_large,
// store_unavailable, closed, local_busy, error), floodgate.canceled,
// floodgate.in_use (the weight this process holds), floodgate.lease.lost and
// floodgate.lease.renewals (outcome ok, failure). The fleet-wide state
// (Semaphore.Stats) costs a Redis round trip and is not observed: every
// process would report the same value.
func (m *Metrics) Distsem(name string, s *distsem.Semaphore) (metric.Registration, error) {
	base := observe(attrs(name, KindDistsem))
	r := reasonOpts(name, KindDistsem, ReasonNoCapacity, ReasonTooLarge, ReasonStoreUnavailable, ReasonClosed, ReasonLocalBusy, ReasonError)
	src := func(s string) []metric.ObserveOption { return observe(attrs(name, KindDistsem, KeySource.String(s))) }
	store, open, local := src(SourceStore), src(SourceFailOpen), src(SourceLocal)
	ok := observe(attrs(name, KindDistsem, KeyOutcome.String("ok")))
	failed := observe(attrs(name, KindDistsem, KeyOutcome.String("failure")))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.LocalStats()
		o.ObserveInt64(m.admitted, st.Acquired, base...)
		o.ObserveInt64(m.canceled, st.Canceled, base...)
		o.ObserveInt64(m.rejected, st.RejectedNoCapacity, r[ReasonNoCapacity]...)
		o.ObserveInt64(m.rejected, st.RejectedTooLarge, r[ReasonTooLarge]...)
		o.ObserveInt64(m.rejected, st.RejectedUnavailable, r[ReasonStoreUnavailable]...)
		o.ObserveInt64(m.rejected, st.RejectedClosed, r[ReasonClosed]...)
		o.ObserveInt64(m.rejected, st.RejectedLocalBusy, r[ReasonLocalBusy]...)
		o.ObserveInt64(m.decisions, st.Acquired-st.FailOpen-st.FailLocal, store...)
		o.ObserveInt64(m.decisions, st.FailOpen, open...)
		o.ObserveInt64(m.decisions, st.FailLocal, local...)
		o.ObserveInt64(m.rejected, st.Errors, r[ReasonError]...)
		o.ObserveInt64(m.inUse, st.Held, base...)
		o.ObserveInt64(m.leaseLost, st.Lost, base...)
		o.ObserveInt64(m.leaseRenewals, st.Renewals, ok...)
		o.ObserveInt64(m.leaseRenewals, st.RenewalErrors, failed...)
		return nil
	}, m.admitted, m.canceled, m.rejected, m.inUse, m.leaseLost, m.leaseRenewals, m.decisions)
}

// BreakerConfig returns cfg with an OnStoreCall hook that records
// floodgate.store.call.duration (outcome ok or failure) for the breaker
// named name, then calls cfg's own hook.
func (m *Metrics) BreakerConfig(name string, cfg breaker.Config) breaker.Config {
	ok := record(attrs(name, KindBreaker, KeyOutcome.String("ok")))
	failed := record(attrs(name, KindBreaker, KeyOutcome.String("failure")))
	h, next := m.storeCall, cfg.OnStoreCall
	cfg.OnStoreCall = func(d time.Duration, fail bool) {
		if fail {
			seconds(h, d, failed)
		} else {
			seconds(h, d, ok)
		}
		if next != nil {
			next(d, fail)
		}
	}
	return cfg
}

// Breaker observes b's Stats, under b's name, as floodgate.decisions by source
// (store, fail_open, local, fail_closed: every call guarded by b, from every
// semaphore and meter that shares it), floodgate.breaker.state (1 for the
// current state, 0 for the others), floodgate.breaker.transitions and
// floodgate.store.errors.
func (m *Metrics) Breaker(b *breaker.Breaker) (metric.Registration, error) {
	name := b.Name()
	base := observe(attrs(name, KindBreaker))
	src := func(s string) []metric.ObserveOption { return observe(attrs(name, KindBreaker, KeySource.String(s))) }
	store, open, local, closed := src(SourceStore), src(SourceFailOpen), src(SourceLocal), src(SourceFailClosed)
	states := []breaker.State{breaker.StateClosed, breaker.StateHalfOpen, breaker.StateOpen}
	stateOpts := make([][]metric.ObserveOption, len(states))
	for i, s := range states {
		stateOpts[i] = observe(attrs(name, KindBreaker, KeyState.String(stateName(s))))
	}
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := b.Stats()
		o.ObserveInt64(m.decisions, i64(st.StoreAnswers), store...)
		o.ObserveInt64(m.decisions, i64(st.Degraded), open...)
		o.ObserveInt64(m.decisions, i64(st.Fallbacks), local...)
		o.ObserveInt64(m.decisions, i64(st.Rejections), closed...)
		for i, s := range states {
			v := int64(0)
			if st.State == s {
				v = 1
			}
			o.ObserveInt64(m.breakerState, v, stateOpts[i]...)
		}
		o.ObserveInt64(m.transitions, i64(st.Transitions), base...)
		o.ObserveInt64(m.storeErrors, i64(st.StoreFailures), base...)
		return nil
	}, m.decisions, m.breakerState, m.transitions, m.storeErrors)
}

// stateName is a breaker state as an attribute value.
func stateName(s breaker.State) string {
	switch s {
	case breaker.StateHalfOpen:
		return "half_open"
	case breaker.StateOpen:
		return "open"
	}
	return "closed"
}

// BulkheadConfig returns cfg with an OnWait hook that records
// floodgate.wait.duration, per layer (attribute floodgate.layer), for the
// requests that waited for a layer's gate and were granted it, then calls
// cfg's own OnWait. A request granted a gate at once calls no hook.
func (m *Metrics) BulkheadConfig(name string, cfg bulkhead.Config) bulkhead.Config {
	opts := make(map[string][]metric.RecordOption, len(cfg.Layers))
	for _, l := range cfg.Layers {
		opts[l.Name] = record(attrs(name, KindBulkhead, KeyLayer.String(l.Name)))
	}
	h, next := m.waitDuration, cfg.OnWait
	cfg.OnWait = func(layer string, waited time.Duration) {
		if o, ok := opts[layer]; ok {
			seconds(h, waited, o)
		}
		if next != nil {
			next(layer, waited)
		}
	}
	return cfg
}

// Bulkhead observes b's Stats, per layer (attribute floodgate.layer), as
// floodgate.admitted, floodgate.rejected (rate, concurrency,
// store_unavailable, error), floodgate.canceled, floodgate.in_use (requests
// holding the layer's gate) and floodgate.waiting; and the refusals before
// any layer (no_identity, invalid_key, no_policy) as floodgate.rejected
// without floodgate.layer. The layers are those of b at the time of the call.
func (m *Metrics) Bulkhead(name string, b *bulkhead.Bulkhead) (metric.Registration, error) {
	type layerOpts struct {
		base                                   []metric.ObserveOption
		limited, concurrency, unavailable, err []metric.ObserveOption
	}
	st0 := b.Stats()
	layers := make([]layerOpts, len(st0.Layers))
	for i, l := range st0.Layers {
		ly := KeyLayer.String(l.Name)
		rs := func(r string) []metric.ObserveOption {
			return observe(attrs(name, KindBulkhead, ly, KeyReason.String(r)))
		}
		layers[i] = layerOpts{
			base:        observe(attrs(name, KindBulkhead, ly)),
			limited:     rs(ReasonRate),
			concurrency: rs(ReasonConcurrency),
			unavailable: rs(ReasonStoreUnavailable),
			err:         rs(ReasonError),
		}
	}
	r := reasonOpts(name, KindBulkhead, ReasonNoIdentity, ReasonInvalidKey, ReasonNoPolicy)
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := b.Stats()
		for i, l := range st.Layers {
			if i >= len(layers) {
				break
			}
			lo := &layers[i]
			o.ObserveInt64(m.admitted, i64(l.Admitted), lo.base...)
			o.ObserveInt64(m.canceled, i64(l.Canceled), lo.base...)
			o.ObserveInt64(m.rejected, i64(l.Limited), lo.limited...)
			o.ObserveInt64(m.rejected, i64(l.Concurrency), lo.concurrency...)
			o.ObserveInt64(m.rejected, i64(l.Unavailable), lo.unavailable...)
			o.ObserveInt64(m.rejected, i64(l.Errors), lo.err...)
			o.ObserveInt64(m.inUse, l.InFlight, lo.base...)
			o.ObserveInt64(m.waiting, l.Waiting, lo.base...)
		}
		o.ObserveInt64(m.rejected, i64(st.NoIdentity), r[ReasonNoIdentity]...)
		o.ObserveInt64(m.rejected, i64(st.InvalidKey), r[ReasonInvalidKey]...)
		o.ObserveInt64(m.rejected, i64(st.NoPolicy), r[ReasonNoPolicy]...)
		return nil
	}, m.admitted, m.canceled, m.rejected, m.inUse, m.waiting)
}
