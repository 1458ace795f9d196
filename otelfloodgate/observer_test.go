package otelfloodgate_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/otelfloodgate"
)

var errStore = errors.New("store: down")

// TestObserveEachKind feeds one event of each kind, as the components send
// them, and checks every point it leaves, and that no other point appears.
func TestObserveEachKind(t *testing.T) {
	const (
		sem = "component=semaphore"
		dst = "component=distsem"
		brk = "component=breaker"
		bh  = "component=bulkhead,part=api"
		ad  = "component=adaptive"
	)
	for _, tc := range []struct {
		name string
		e    floodgate.Event
		want map[string]int64
	}{
		{"admit without a wait", floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 3},
			map[string]int64{
				"floodgate.admitted{" + sem + "}": 1,
				"floodgate.in_use{" + sem + "}":   3,
			}},
		{"admit after a wait, from the store", floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentDistsem, N: 2,
			Duration: 250 * time.Millisecond, Source: floodgate.SourceStore},
			map[string]int64{
				"floodgate.admitted{" + dst + "}":                       1,
				"floodgate.in_use{" + dst + "}":                         2,
				"floodgate.wait.duration{" + dst + ",kind=admit}#count": 1,
				"floodgate.wait.duration{" + dst + ",kind=admit}#ms":    250,
				"floodgate.decisions{" + dst + ",source=store}":         1,
			}},
		{"admit of a consumer holds nothing here", floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api", N: 1},
			map[string]int64{"floodgate.admitted{" + bh + "}": 1}},
		{"release with a hold time", floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentDistsem, N: 2, Duration: time.Second},
			map[string]int64{
				"floodgate.in_use{" + dst + "}":              -2,
				"floodgate.hold.duration{" + dst + "}#count": 1,
				"floodgate.hold.duration{" + dst + "}#ms":    1000,
			}},
		{"release of a consumer", floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentBulkhead, Part: "api", N: 1},
			map[string]int64{}},
		{"reject after a wait, degraded", floodgate.Event{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", N: 1,
			Reason: floodgate.ReasonMaxWait, Duration: 2 * time.Second, Source: floodgate.SourceFailLocal},
			map[string]int64{
				"floodgate.rejected{" + bh + ",reason=max_wait}":        1,
				"floodgate.wait.duration{" + bh + ",kind=reject}#count": 1,
				"floodgate.wait.duration{" + bh + ",kind=reject}#ms":    2000,
				"floodgate.decisions{" + bh + ",source=fail_local}":     1,
			}},
		{"cancel", floodgate.Event{Kind: floodgate.KindCancel, Component: floodgate.ComponentSemaphore, N: 1, Duration: 5 * time.Millisecond},
			map[string]int64{
				"floodgate.canceled{" + sem + "}":                        1,
				"floodgate.wait.duration{" + sem + ",kind=cancel}#count": 1,
				"floodgate.wait.duration{" + sem + ",kind=cancel}#ms":    5,
			}},
		{"store call ok", floodgate.Event{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: time.Millisecond, Source: floodgate.SourceStore},
			map[string]int64{
				"floodgate.store.call.duration{" + brk + ",outcome=ok,source=store}#count": 1,
				"floodgate.store.call.duration{" + brk + ",outcome=ok,source=store}#ms":    1,
			}},
		{"store call failed", floodgate.Event{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: 250 * time.Millisecond, Err: errStore},
			map[string]int64{
				"floodgate.store.call.duration{" + brk + ",outcome=failure}#count": 1,
				"floodgate.store.call.duration{" + brk + ",outcome=failure}#ms":    250,
			}},
		{"state change", floodgate.Event{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: floodgate.StateClosed, To: floodgate.StateOpen},
			map[string]int64{
				"floodgate.breaker.transitions{" + brk + ",state=open}": 1,
				"floodgate.breaker.state{" + brk + ",state=open}":       1,
				"floodgate.breaker.state{" + brk + ",state=closed}":     0,
				"floodgate.breaker.state{" + brk + ",state=half_open}":  0,
			}},
		{"renew ok", floodgate.Event{Kind: floodgate.KindRenew, Component: floodgate.ComponentDistsem},
			map[string]int64{"floodgate.lease.renewals{" + dst + ",outcome=ok}": 1}},
		{"renew failed", floodgate.Event{Kind: floodgate.KindRenew, Component: floodgate.ComponentDistsem, Err: errStore},
			map[string]int64{"floodgate.lease.renewals{" + dst + ",outcome=failure}": 1}},
		{"lease lost", floodgate.Event{Kind: floodgate.KindLeaseLost, Component: floodgate.ComponentDistsem, Err: errStore},
			map[string]int64{"floodgate.lease.lost{" + dst + "}": 1}},
		{"adaptive admit holds weight", floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentAdaptive, N: 2},
			map[string]int64{
				"floodgate.admitted{" + ad + "}": 1,
				"floodgate.in_use{" + ad + "}":   2,
			}},
		{"adaptive release with a hold time", floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentAdaptive, N: 2, Duration: 3 * time.Millisecond},
			map[string]int64{
				"floodgate.in_use{" + ad + "}":              -2,
				"floodgate.hold.duration{" + ad + "}#count": 1,
				"floodgate.hold.duration{" + ad + "}#ms":    3,
			}},
		{"limit", floodgate.Event{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: 12, Duration: 2500 * time.Microsecond},
			map[string]int64{
				"floodgate.limit{" + ad + "}":               12,
				"floodgate.latency.baseline{" + ad + "}#us": 2500,
			}},
		{"limit before a baseline is known", floodgate.Event{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: 1},
			map[string]int64{"floodgate.limit{" + ad + "}": 1}},
		{"an unknown kind", floodgate.Event{Kind: 200, Component: floodgate.ComponentSemaphore, N: 1}, map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, r := newMetrics(t)
			m.Observer("x").Observe(tc.e)
			diff(t, points(t, r), tc.want)
		})
	}
}

// TestObserveOffVocabulary checks that a value outside the vocabulary never
// becomes an attribute value: an unknown reason is recorded as "error", an
// unknown source as none, a transition to an unknown state not at all.
func TestObserveOffVocabulary(t *testing.T) {
	m, r := newMetrics(t)
	o := m.Observer("x")
	o.Observe(floodgate.Event{Kind: floodgate.KindReject, Component: floodgate.ComponentSemaphore, Reason: "rate", Source: "local"})
	o.Observe(floodgate.Event{Kind: floodgate.KindReject, Component: floodgate.ComponentSemaphore})
	o.Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentMeter, Source: "degraded"})
	o.Observe(floodgate.Event{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: "closed", To: "tripped"})
	diff(t, points(t, r), map[string]int64{
		"floodgate.rejected{component=semaphore,reason=error}": 2,
		"floodgate.admitted{component=meter}":                  1,
	})
}

// TestInUseFollowsHeldWeight checks that in_use is the weight granted minus
// the weight released, per component and part, and that two observers of
// one Metrics keep their limiters apart, while two observers of one name
// count together.
func TestInUseFollowsHeldWeight(t *testing.T) {
	m, r := newMetrics(t)
	a, b := m.Observer("a"), m.Observer("b")
	m.Observer("b").Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 1})
	for range 3 {
		a.Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 2})
	}
	a.Observe(floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentSemaphore, N: 2})
	b.Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 5})
	got := map[string]int64{}
	for _, md := range collect(t, r) {
		if md.Name != otelfloodgate.NameInUse {
			continue
		}
		for _, p := range sumPoints(md) {
			l, _ := p.Attributes.Value(otelfloodgate.KeyLimiter)
			got[l.AsString()] = p.Value
		}
	}
	diff(t, got, map[string]int64{"a": 4, "b": 6})
}

// TestObserveConcurrently has many goroutines record under many parts at
// once (the attribute cache fills while it is read) and checks every count.
func TestObserveConcurrently(t *testing.T) {
	m, r := newMetrics(t)
	o := m.Observer("x")
	const goroutines, parts, each = 8, 5, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				part := fmt.Sprint("p", (g+i)%parts)
				o.Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentWorkers, Part: part, N: 1})
				o.Observe(floodgate.Event{Kind: floodgate.KindReject, Component: floodgate.ComponentWorkers, Part: part, Reason: floodgate.ReasonQueueFull})
			}
		})
	}
	wg.Wait()
	want := map[string]int64{}
	for p := range parts {
		want[fmt.Sprintf("floodgate.admitted{component=workers,part=p%d}", p)] = goroutines * each / parts
		want[fmt.Sprintf("floodgate.rejected{component=workers,part=p%d,reason=queue_full}", p)] = goroutines * each / parts
	}
	diff(t, points(t, r), want)
}
