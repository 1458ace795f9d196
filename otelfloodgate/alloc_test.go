//go:build !race

package otelfloodgate_test

import (
	"testing"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
)

// TestObserveAllocs checks that recording an event whose attributes were
// seen before allocates nothing, so that an observed hot path (a semaphore's
// grant and release) stays allocation-free.
func TestObserveAllocs(t *testing.T) {
	m, _ := newMetrics(t)
	o := m.Observer("x")
	events := []floodgate.Event{
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 1},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentDistsem, N: 1, Duration: time.Millisecond, Source: floodgate.SourceStore},
		{Kind: floodgate.KindRelease, Component: floodgate.ComponentSemaphore, N: 1, Duration: time.Millisecond},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", Reason: floodgate.ReasonLimited, Source: floodgate.SourceFailOpen},
		{Kind: floodgate.KindCancel, Component: floodgate.ComponentSemaphore, Duration: time.Millisecond},
		{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: time.Millisecond, Err: errStore},
		{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: floodgate.StateOpen, To: floodgate.StateHalfOpen},
		{Kind: floodgate.KindRenew, Component: floodgate.ComponentDistsem},
		{Kind: floodgate.KindLeaseLost, Component: floodgate.ComponentDistsem, Err: errStore},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentAdaptive, N: 1},
		{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: 12, Duration: 2 * time.Millisecond},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api", N: 1, Class: "critical", Duration: time.Millisecond},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", Class: "sheddable", Reason: floodgate.ReasonShed},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead, Part: "api", Shadow: true, Reason: floodgate.ReasonLimited},
		{Kind: floodgate.KindCancel, Component: floodgate.ComponentBulkhead, Part: "api", Class: "default", Shadow: true, Duration: time.Millisecond},
	}
	for _, e := range events {
		o.Observe(e) // fills the attribute cache
		if a := testing.AllocsPerRun(100, func() { o.Observe(e) }); a != 0 {
			t.Errorf("Observe(%v of %s): %.1f allocs, want 0", e.Kind, e.Component, a)
		}
	}
}
