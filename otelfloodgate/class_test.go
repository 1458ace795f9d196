package otelfloodgate_test

import (
	"testing"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
)

// TestObserveClassAndShadow: an event's Class and Shadow become the
// attributes floodgate.class and floodgate.shadow (true) on every point it
// leaves, and only when set: a classed, a shadow and a plain layer of the
// same name are three series.
func TestObserveClassAndShadow(t *testing.T) {
	m, r := newMetrics(t)
	o := m.Observer("x")
	const bh = "component=bulkhead,part=api"
	for _, e := range []floodgate.Event{
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Class: "critical", Duration: 20 * time.Millisecond},
		{Kind: floodgate.KindRelease, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Class: "critical"},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Class: "sheddable", Reason: floodgate.ReasonShed},
		{Kind: floodgate.KindCancel, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Class: "default", Duration: 5 * time.Millisecond},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Shadow: true},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Shadow: true, Reason: floodgate.ReasonLimited},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Shadow: true, Class: "batch", Reason: floodgate.ReasonShed},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api", N: 1},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBackoff, Part: "payments", Reason: floodgate.ReasonThrottled},
	} {
		o.Observe(e)
	}
	diff(t, points(t, r), map[string]int64{
		"floodgate.admitted{" + bh + ",class=critical}":                        1,
		"floodgate.wait.duration{" + bh + ",class=critical,kind=admit}#count":  1,
		"floodgate.wait.duration{" + bh + ",class=critical,kind=admit}#ms":     20,
		"floodgate.rejected{" + bh + ",class=sheddable,reason=shed}":           1,
		"floodgate.canceled{" + bh + ",class=default}":                         1,
		"floodgate.wait.duration{" + bh + ",class=default,kind=cancel}#count":  1,
		"floodgate.wait.duration{" + bh + ",class=default,kind=cancel}#ms":     5,
		"floodgate.admitted{" + bh + ",shadow=true}":                           1,
		"floodgate.rejected{" + bh + ",reason=limited,shadow=true}":            1,
		"floodgate.rejected{" + bh + ",class=batch,reason=shed,shadow=true}":   1,
		"floodgate.admitted{" + bh + "}":                                       1,
		"floodgate.rejected{component=backoff,part=payments,reason=throttled}": 1,
	})
}
