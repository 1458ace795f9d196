package otelfloodgate_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestPrometheusScrape serves /metrics through OpenTelemetry's Prometheus
// exporter and checks that a scrape lists the documented names.
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
	s := semaphore.New(1, m.SemaphoreConfig("db", semaphore.Config{}))
	m.Semaphore("db", s)
	q := shaper.NewQueue(shaper.PerSecond(1000), m.QueueConfig("jobs", shaper.QueueConfig{}))
	defer q.Close()
	m.Queue("jobs", q)
	mt := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)})
	m.Meter("api", mt)
	br := breaker.New("redis", m.BreakerConfig("redis", breaker.Config{}))
	m.Breaker(br)
	// Feed the histograms once (a histogram has no series before its first record).
	cfg := m.SemaphoreConfig("db", semaphore.Config{})
	cfg.OnWait(1, 1)
	m.QueueConfig("jobs", shaper.QueueConfig{}).OnWait(1, 1)
	m.BreakerConfig("redis", breaker.Config{}).OnStoreCall(1, false)
	dcfg := m.DistsemConfig("sem", distsemConfig())
	dcfg.OnRelease(1, 1)

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
		// _total, units a suffix (seconds, ratio for "1").
		"floodgate_admitted_total{",
		"floodgate_rejected_total{",
		"floodgate_canceled_total{",
		"floodgate_in_use{",
		"floodgate_waiting{",
		"floodgate_limit{",
		"floodgate_decisions_total{",
		"floodgate_breaker_state_ratio{",
		"floodgate_breaker_transitions_total{",
		"floodgate_store_errors_total{",
		"floodgate_wait_duration_seconds_bucket{",
		"floodgate_hold_duration_seconds_bucket{",
		"floodgate_queue_delay_seconds_bucket{",
		"floodgate_store_call_duration_seconds_bucket{",
		`floodgate_limiter="db"`,
		`floodgate_kind="semaphore"`,
		`floodgate_reason="queue_full"`,
		`floodgate_source="fail_open"`,
	} {
		if !strings.Contains(text, name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

func distsemConfig() distsem.Config { return distsem.Config{} }
