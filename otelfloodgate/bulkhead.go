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

// DBConfig returns cfg with OnWait and OnHold hooks that record, per class
// (attribute floodgate.class), floodgate.wait.duration for the calls that
// waited for their class's gate and were granted it, and
// floodgate.hold.duration for every admitted call of a limited class; then
// they call cfg's own hooks.
func (m *Metrics) DBConfig(name string, cfg bulkheadpgx.Config) bulkheadpgx.Config {
	classes := make([]string, len(cfg.Classes))
	for i, c := range cfg.Classes {
		classes[i] = c.Name
	}
	opts := classRecord(name, KindDBPool, classes)
	wait, hold := m.waitDuration, m.holdDuration
	nextWait, nextHold := cfg.OnWait, cfg.OnHold
	cfg.OnWait = func(class string, d time.Duration) {
		if o, ok := opts[class]; ok {
			seconds(wait, d, o)
		}
		if nextWait != nil {
			nextWait(class, d)
		}
	}
	cfg.OnHold = func(class string, d time.Duration) {
		if o, ok := opts[class]; ok {
			seconds(hold, d, o)
		}
		if nextHold != nil {
			nextHold(class, d)
		}
	}
	return cfg
}

// DB observes db's Stats, per class (attribute floodgate.class), as
// floodgate.admitted, floodgate.in_use (weight held by calls whose database
// work has not ended), floodgate.waiting, floodgate.canceled and
// floodgate.rejected (max_wait, too_large, error). An unlimited class
// counts nothing but its calls: it reports zeros. The pool's own statistics
// (pgxpool.Stat) are not observed.
func (m *Metrics) DB(name string, db *bulkheadpgx.DB) (metric.Registration, error) {
	type classOpts struct {
		db                       *bulkheadpgx.ClassDB
		base                     []metric.ObserveOption
		maxWait, tooLarge, error []metric.ObserveOption
	}
	st0 := db.Stats()
	classes := make([]classOpts, len(st0.Classes))
	for i, c := range st0.Classes {
		cl := KeyClass.String(c.Name)
		rs := func(r string) []metric.ObserveOption {
			return observe(attrs(name, KindDBPool, cl, KeyReason.String(r)))
		}
		classes[i] = classOpts{
			db:       db.Class(c.Name),
			base:     observe(attrs(name, KindDBPool, cl)),
			maxWait:  rs(ReasonMaxWait),
			tooLarge: rs(ReasonTooLarge),
			error:    rs(ReasonError),
		}
	}
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i := range classes {
			c := &classes[i]
			st := c.db.Stats()
			o.ObserveInt64(m.admitted, i64(st.Admitted), c.base...)
			o.ObserveInt64(m.inUse, st.InUse, c.base...)
			o.ObserveInt64(m.waiting, st.Waiting, c.base...)
			o.ObserveInt64(m.canceled, i64(st.Canceled), c.base...)
			o.ObserveInt64(m.rejected, i64(st.RejectedMaxWait), c.maxWait...)
			o.ObserveInt64(m.rejected, i64(st.RejectedTooLarge), c.tooLarge...)
			o.ObserveInt64(m.rejected, i64(st.Errors), c.error...)
		}
		return nil
	}, m.admitted, m.inUse, m.waiting, m.canceled, m.rejected)
}
