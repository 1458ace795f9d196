package otelfloodgate

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	floodgate "github.com/floodgate-go/floodgate"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// observer is the floodgate.Observer of one limiter name.
type observer struct {
	m       *Metrics
	limiter attribute.KeyValue

	// cache maps each attribute combination seen to its recording options,
	// made once, so that recording allocates nothing. Read without a lock;
	// written copy-on-write under mu (the set is small and bounded: parts
	// and words, never keys).
	cache atomic.Pointer[map[attrKey]*opts]
	mu    sync.Mutex
}

// attrKey is one attribute set: the component, the part, and at most one
// word under the key named by word (reason, source, state, outcome or
// kind), plus a source for a store call.
type attrKey struct {
	component floodgate.Component
	part      string
	word      attribute.Key
	value     string
	source    floodgate.Source
}

// opts are the recording options of one attribute set.
type opts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func (o *observer) opts(k attrKey) *opts {
	if p, ok := (*o.cache.Load())[k]; ok {
		return p
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.cache.Load()
	if p, ok := old[k]; ok {
		return p
	}
	kv := []attribute.KeyValue{o.limiter, KeyComponent.String(string(k.component))}
	if k.part != "" {
		kv = append(kv, KeyPart.String(k.part))
	}
	if k.word != "" {
		kv = append(kv, k.word.String(k.value))
	}
	if k.source != "" {
		kv = append(kv, KeySource.String(string(k.source)))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	p := &opts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	next := maps.Clone(old)
	next[k] = p
	o.cache.Store(&next)
	return p
}

// Observe records e. Events of an unknown Kind are ignored; an unknown
// Reason is recorded as floodgate.ReasonError, an unknown Source as none,
// and a StateChange to an unknown state is ignored, so that every value
// recorded is a word of the vocabulary.
func (o *observer) Observe(e floodgate.Event) {
	ctx := context.Background()
	m := o.m
	base := attrKey{component: e.Component, part: e.Part}
	switch e.Kind {
	case floodgate.KindAdmit:
		m.admitted.Add(ctx, 1, o.opts(base).add...)
		if holdsWeight(e.Component) {
			m.inUse.Add(ctx, e.N, o.opts(base).add...)
		}
		o.waited(ctx, base, e)
		o.decided(ctx, base, e)
	case floodgate.KindRelease:
		if holdsWeight(e.Component) {
			m.inUse.Add(ctx, -e.N, o.opts(base).add...)
		}
		if e.Duration > 0 {
			m.holdDuration.Record(ctx, e.Duration.Seconds(), o.opts(base).rec...)
		}
	case floodgate.KindReject:
		k := base
		k.word, k.value = KeyReason, string(reasonWord(e.Reason))
		m.rejected.Add(ctx, 1, o.opts(k).add...)
		o.waited(ctx, base, e)
		o.decided(ctx, base, e)
	case floodgate.KindCancel:
		m.canceled.Add(ctx, 1, o.opts(base).add...)
		o.waited(ctx, base, e)
	case floodgate.KindStoreCall:
		k := base
		k.word, k.value = KeyOutcome, outcome(e.Err)
		k.source = sourceWord(e.Source)
		m.storeCall.Record(ctx, e.Duration.Seconds(), o.opts(k).rec...)
	case floodgate.KindStateChange:
		to, ok := stateWord(e.To)
		if !ok {
			return
		}
		k := base
		k.word, k.value = KeyState, to
		m.transitions.Add(ctx, 1, o.opts(k).add...)
		for _, s := range states {
			k.value = s
			v := int64(0)
			if s == to {
				v = 1
			}
			m.breakerState.Record(ctx, v, o.opts(k).rec...)
		}
	case floodgate.KindRenew:
		k := base
		k.word, k.value = KeyOutcome, outcome(e.Err)
		m.leaseRenewals.Add(ctx, 1, o.opts(k).add...)
	case floodgate.KindLeaseLost:
		m.leaseLost.Add(ctx, 1, o.opts(base).add...)
	}
}

// waited records the wait of an Admit, Reject or Cancel that queued.
func (o *observer) waited(ctx context.Context, base attrKey, e floodgate.Event) {
	if e.Duration <= 0 {
		return
	}
	base.word, base.value = KeyKind, e.Kind.String()
	o.m.waitDuration.Record(ctx, e.Duration.Seconds(), o.opts(base).rec...)
}

// decided counts the answer of a store-backed component.
func (o *observer) decided(ctx context.Context, base attrKey, e floodgate.Event) {
	if base.source = sourceWord(e.Source); base.source != "" {
		o.m.decisions.Add(ctx, 1, o.opts(base).add...)
	}
}

// holdsWeight reports whether c's Admit takes weight that a Release gives
// back: the gates. Consumers (bulkhead, workers, db) hold through a gate,
// which reports to its own observer.
func holdsWeight(c floodgate.Component) bool {
	return c == floodgate.ComponentSemaphore || c == floodgate.ComponentDistsem
}

func outcome(err error) string {
	if err != nil {
		return OutcomeFailure
	}
	return OutcomeOK
}

// states are the breaker states, in the order of the gauge's points.
var states = []string{floodgate.StateClosed, floodgate.StateOpen, floodgate.StateHalfOpen}

func stateWord(s string) (string, bool) {
	switch s {
	case floodgate.StateClosed, floodgate.StateOpen, floodgate.StateHalfOpen:
		return s, true
	}
	return "", false
}

func sourceWord(s floodgate.Source) floodgate.Source {
	switch s {
	case floodgate.SourceStore, floodgate.SourceFailOpen, floodgate.SourceFailLocal, floodgate.SourceFailClosed:
		return s
	}
	return ""
}

// reasons is the set of floodgate.Reasons.
var reasons = func() map[floodgate.Reason]bool {
	out := make(map[floodgate.Reason]bool, len(floodgate.Reasons))
	for _, r := range floodgate.Reasons {
		out[r] = true
	}
	return out
}()

func reasonWord(r floodgate.Reason) floodgate.Reason {
	if reasons[r] {
		return r
	}
	return floodgate.ReasonError
}
