package otelfloodgate_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestPrometheusScrape serves /metrics through OpenTelemetry's Prometheus
// exporter and checks that a scrape lists every instrument, in its
// Prometheus form, with the documented labels.
func TestPrometheusScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	m, err := otelfloodgate.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	o := m.Observer("db")
	for _, e := range []floodgate.Event{
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 1, Duration: time.Millisecond},
		{Kind: floodgate.KindRelease, Component: floodgate.ComponentSemaphore, N: 1, Duration: time.Millisecond},
		{Kind: floodgate.KindReject, Component: floodgate.ComponentDistsem, Reason: floodgate.ReasonQueueFull, Source: floodgate.SourceFailOpen},
		{Kind: floodgate.KindCancel, Component: floodgate.ComponentSemaphore},
		{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: time.Millisecond},
		{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: floodgate.StateClosed, To: floodgate.StateOpen},
		{Kind: floodgate.KindRenew, Component: floodgate.ComponentDistsem},
		{Kind: floodgate.KindLeaseLost, Component: floodgate.ComponentDistsem},
		{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "api"},
		{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: 8, Duration: 2 * time.Millisecond},
	} {
		o.Observe(e)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, name := range []string{
		// OpenTelemetry → Prometheus: dots become underscores, counters get
		// _total, units a suffix (seconds; ratio for "1").
		"floodgate_admitted_total{",
		"floodgate_rejected_total{",
		"floodgate_canceled_total{",
		"floodgate_in_use{",
		"floodgate_decisions_total{",
		"floodgate_breaker_state_ratio{",
		"floodgate_breaker_transitions_total{",
		"floodgate_lease_lost_total{",
		"floodgate_lease_renewals_total{",
		"floodgate_wait_duration_seconds_bucket{",
		"floodgate_hold_duration_seconds_bucket{",
		"floodgate_store_call_duration_seconds_bucket{",
		"floodgate_limit{",
		"floodgate_latency_baseline_seconds{",
		`floodgate_component="adaptive"`,
		`floodgate_limiter="db"`,
		`floodgate_component="semaphore"`,
		`floodgate_part="api"`,
		`floodgate_reason="queue_full"`,
		`floodgate_source="fail_open"`,
		`floodgate_state="open"`,
		`floodgate_outcome="ok"`,
		`floodgate_kind="admit"`,
	} {
		if !strings.Contains(text, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}
