package otelfloodgate

// The adapters of bulkhead.Workers and bulkheadpgx.

import (
	"context"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"go.opentelemetry.io/otel/metric"
)

// classRecord precomputes the recording options of each class.
func classRecord(name, kind string, classes []string) map[string][]metric.RecordOption {
	out := make(map[string][]metric.RecordOption, len(classes))
	for _, c := range classes {
		out[c] = record(attrs(name, kind, KeyClass.String(c)))
	}
	return out
}

// WorkersConfig returns cfg with an OnStart hook that records
// floodgate.queue.delay per class (attribute floodgate.class) for every job
// that starts, then calls cfg's own OnStart.
func (m *Metrics) WorkersConfig(name string, cfg bulkhead.WorkersConfig) bulkhead.WorkersConfig {
	classes := []string{bulkhead.DefaultClass}
	if len(cfg.Classes) > 0 {
		classes = classes[:0]
		for _, c := range cfg.Classes {
			classes = append(classes, c.Name)
		}
	}
	opts := classRecord(name, KindWorkers, classes)
	h, next := m.queueDelay, cfg.OnStart
	cfg.OnStart = func(class string, queued time.Duration) {
		if o, ok := opts[class]; ok {
			seconds(h, queued, o)
		}
		if next != nil {
			next(class, queued)
		}
	}
	return cfg
}

// Workers observes w's Stats, per class (attribute floodgate.class), as
// floodgate.admitted (jobs started), floodgate.waiting (jobs queued now),
// floodgate.in_use (jobs running now), floodgate.canceled (Do jobs whose
// context ended while queued) and floodgate.rejected (queue_full, closed,
// handed_back, pace, gate); and w's limit as floodgate.limit (no class).
// Workers.Stats takes w's mutex for the copy: the callback holds it no
// longer than that.
func (m *Metrics) Workers(name string, w *bulkhead.Workers) (metric.Registration, error) {
	type classOpts struct {
		base                                         []metric.ObserveOption
		queueFull, closed, handedBack, pace, gateErr []metric.ObserveOption
	}
	st0 := w.Stats()
	classes := make([]classOpts, len(st0.Classes))
	for i, c := range st0.Classes {
		cl := KeyClass.String(c.Name)
		rs := func(r string) []metric.ObserveOption {
			return observe(attrs(name, KindWorkers, cl, KeyReason.String(r)))
		}
		classes[i] = classOpts{
			base:       observe(attrs(name, KindWorkers, cl)),
			queueFull:  rs(ReasonQueueFull),
			closed:     rs(ReasonClosed),
			handedBack: rs(ReasonHandedBack),
			pace:       rs(ReasonPace),
			gateErr:    rs(ReasonGate),
		}
	}
	base := observe(attrs(name, KindWorkers))
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := w.Stats()
		o.ObserveInt64(m.limit, st.Limit, base...)
		for i, c := range st.Classes {
			if i >= len(classes) {
				break
			}
			co := &classes[i]
			o.ObserveInt64(m.admitted, i64(c.Started), co.base...)
			o.ObserveInt64(m.waiting, int64(c.Queued), co.base...)
			o.ObserveInt64(m.inUse, c.Running, co.base...)
			o.ObserveInt64(m.canceled, i64(c.Canceled), co.base...)
			o.ObserveInt64(m.rejected, i64(c.QueueFull), co.queueFull...)
			o.ObserveInt64(m.rejected, i64(c.Closed), co.closed...)
			o.ObserveInt64(m.rejected, i64(c.HandedBack), co.handedBack...)
			o.ObserveInt64(m.rejected, i64(c.PaceErrors), co.pace...)
			o.ObserveInt64(m.rejected, i64(c.GateErrors), co.gateErr...)
		}
		return nil
	}, m.limit, m.admitted, m.waiting, m.inUse, m.canceled, m.rejected)
}

var _ = bulkheadpgx.Buckets
