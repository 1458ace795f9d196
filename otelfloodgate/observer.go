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

	// cells maps each (instrument, attribute set) seen to its cell, made
	// once, so that recording allocates nothing. Read without a lock;
	// written copy-on-write under mu (the set is small and bounded: parts
	// and words, never keys).
	cells atomic.Pointer[map[attrKey]*cell]
	mu    sync.Mutex

	// groups holds, per component and part, the cells every grant and
	// release touches, found with one lookup of a smaller key. Written
	// copy-on-write under gmu.
	groups atomic.Pointer[map[groupKey]*group]
	gmu    sync.Mutex
}

type groupKey struct {
	component floodgate.Component
	part      string
}

// group is the cells of one component and part without a word, and
// (marked) those of the same with a class or in shadow mode, found from
// it, so that the events of neither (every leaf's) pay no longer key.
type group struct {
	admitted, canceled, inUse *cell
	base                      *cell // the attribute set, for synchronous instruments

	marked atomic.Pointer[map[mark]*group] // written copy-on-write under the observer's gmu
}

// mark is an event's class and shadow mode (bulkhead's).
type mark struct {
	class  string
	shadow bool
}

// group returns the cells of the component, part, class and shadow mode
// of an event.
func (o *observer) group(component floodgate.Component, part, class string, shadow bool) *group {
	gk := groupKey{component, part}
	g, ok := lookup(&o.groups, gk)
	if !ok {
		g = addGroup(o, &o.groups, gk, attrKey{component: component, part: part})
	}
	if class == "" && !shadow {
		return g
	}
	mk := mark{class, shadow}
	if mg, ok := lookup(&g.marked, mk); ok {
		return mg
	}
	return addGroup(o, &g.marked, mk, attrKey{component: component, part: part, class: class, shadow: shadow})
}

// lookup returns what the copy-on-write map in p holds for k.
func lookup[K comparable](p *atomic.Pointer[map[K]*group], k K) (*group, bool) {
	if m := p.Load(); m != nil {
		g, ok := (*m)[k]
		return g, ok
	}
	return nil, false
}

// addGroup returns the group of k in o's copy-on-write map in p, made for
// the attribute set ak (which has no word) if it is not there yet.
func addGroup[K comparable](o *observer, p *atomic.Pointer[map[K]*group], k K, ak attrKey) *group {
	o.gmu.Lock()
	defer o.gmu.Unlock()
	var old map[K]*group
	if m := p.Load(); m != nil {
		old = *m
	}
	if g, ok := old[k]; ok {
		return g
	}
	g := o.newGroup(ak)
	next := maps.Clone(old)
	if next == nil {
		next = map[K]*group{}
	}
	next[k] = g
	p.Store(&next)
	return g
}

// newGroup makes the cells of the group of k (which has no word).
func (o *observer) newGroup(k attrKey) *group {
	g := &group{base: o.cell(k)}
	k.counted = countAdmitted
	g.admitted = o.cell(k)
	k.counted = countCanceled
	g.canceled = o.cell(k)
	k.counted = countInUse
	g.inUse = o.cell(k)
	return g
}

// attrKey is one attribute set: the component, the part, the class and
// shadow mode (a bulkhead layer's), and at most one word under the key
// named by word (reason, source, state, outcome or kind), plus a source for
// a store call; and the counted instrument it is for (none: the set of a
// synchronous instrument).
type attrKey struct {
	counted   counted
	component floodgate.Component
	part      string
	class     string
	shadow    bool
	word      attribute.Key
	value     string
	source    floodgate.Source
}

// counted names an observable instrument whose cells count.
type counted uint8

const (
	notCounted counted = iota
	countAdmitted
	countRejected
	countCanceled
	countDecisions
	countInUse
)

// cell is one attribute set's recording options and, for a counted
// instrument, its count.
type cell struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption

	counter metric.Int64Observable // nil when not counted
	n       atomic.Int64
	touched atomic.Bool // an event counted here: the point exists
}

// count counts n.
func (c *cell) count(n int64) {
	c.n.Add(n)
	if !c.touched.Load() {
		c.touched.Store(true)
	}
}

func (o *observer) cell(k attrKey) *cell {
	if c, ok := (*o.cells.Load())[k]; ok {
		return c
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.cells.Load()
	if c, ok := old[k]; ok {
		return c
	}
	kv := []attribute.KeyValue{o.limiter, KeyComponent.String(string(k.component))}
	if k.part != "" {
		kv = append(kv, KeyPart.String(k.part))
	}
	if k.class != "" {
		kv = append(kv, KeyClass.String(k.class))
	}
	if k.shadow {
		kv = append(kv, KeyShadow.Bool(true))
	}
	if k.word != "" {
		kv = append(kv, k.word.String(k.value))
	}
	if k.source != "" {
		kv = append(kv, KeySource.String(string(k.source)))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	c := &cell{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}, obs: []metric.ObserveOption{opt}}
	switch k.counted {
	case countAdmitted:
		c.counter = o.m.admitted
	case countRejected:
		c.counter = o.m.rejected
	case countCanceled:
		c.counter = o.m.canceled
	case countDecisions:
		c.counter = o.m.decisions
	case countInUse:
		c.counter = o.m.inUse
	}
	next := maps.Clone(old)
	next[k] = c
	o.cells.Store(&next)
	return c
}

// count adds n to the counted instrument's cell of k.
func (o *observer) count(what counted, k attrKey, n int64) {
	k.counted = what
	o.cell(k).count(n)
}

// Observe records e. Events of an unknown Kind are ignored; an unknown
// Reason is recorded as floodgate.ReasonError, an unknown Source as none,
// and a StateChange to an unknown state is ignored, so that every value
// recorded is a word of the vocabulary.
func (o *observer) Observe(e floodgate.Event) {
	ctx := context.Background()
	m := o.m
	base := attrKey{component: e.Component, part: e.Part, class: e.Class, shadow: e.Shadow}
	switch e.Kind {
	case floodgate.KindAdmit:
		g := o.group(e.Component, e.Part, e.Class, e.Shadow)
		g.admitted.count(1)
		if holdsWeight(e.Component) {
			g.inUse.count(e.N)
		}
		o.waited(ctx, &base, &e)
		o.decided(&base, &e)
	case floodgate.KindRelease:
		g := o.group(e.Component, e.Part, e.Class, e.Shadow)
		if holdsWeight(e.Component) {
			g.inUse.count(-e.N)
		}
		if e.Duration > 0 {
			m.holdDuration.Record(ctx, e.Duration.Seconds(), g.base.rec...)
		}
	case floodgate.KindReject:
		k := base
		k.word, k.value = KeyReason, string(reasonWord(e.Reason))
		o.count(countRejected, k, 1)
		o.waited(ctx, &base, &e)
		o.decided(&base, &e)
	case floodgate.KindCancel:
		o.group(e.Component, e.Part, e.Class, e.Shadow).canceled.count(1)
		o.waited(ctx, &base, &e)
	case floodgate.KindStoreCall:
		k := base
		k.word, k.value = KeyOutcome, outcome(e.Err)
		k.source = sourceWord(e.Source)
		m.storeCall.Record(ctx, e.Duration.Seconds(), o.cell(k).rec...)
	case floodgate.KindStateChange:
		to, ok := stateWord(e.To)
		if !ok {
			return
		}
		k := base
		k.word, k.value = KeyState, to
		m.transitions.Add(ctx, 1, o.cell(k).add...)
		for _, s := range states {
			k.value = s
			v := int64(0)
			if s == to {
				v = 1
			}
			m.breakerState.Record(ctx, v, o.cell(k).rec...)
		}
	case floodgate.KindRenew:
		k := base
		k.word, k.value = KeyOutcome, outcome(e.Err)
		m.leaseRenewals.Add(ctx, 1, o.cell(k).add...)
	case floodgate.KindLeaseLost:
		m.leaseLost.Add(ctx, 1, o.cell(base).add...)
	case floodgate.KindLimit:
		c := o.cell(base)
		m.limit.Record(ctx, e.N, c.rec...)
		if e.Duration > 0 { // 0: no baseline known yet
			m.baseline.Record(ctx, e.Duration.Seconds(), c.rec...)
		}
	}
}

// waited records the wait of an Admit, Reject or Cancel that queued.
func (o *observer) waited(ctx context.Context, base *attrKey, e *floodgate.Event) {
	if e.Duration <= 0 {
		return
	}
	k := *base
	k.word, k.value = KeyKind, e.Kind.String()
	o.m.waitDuration.Record(ctx, e.Duration.Seconds(), o.cell(k).rec...)
}

// decided counts the answer of a store-backed component.
func (o *observer) decided(base *attrKey, e *floodgate.Event) {
	if src := sourceWord(e.Source); src != "" {
		k := *base
		k.source = src
		o.count(countDecisions, k, 1)
	}
}

// holdsWeight reports whether c's Admit takes weight that a Release gives
// back: the gates. Consumers (bulkhead, workers, db) hold through a gate,
// which reports to its own observer.
func holdsWeight(c floodgate.Component) bool {
	return c == floodgate.ComponentSemaphore || c == floodgate.ComponentDistsem || c == floodgate.ComponentAdaptive
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
