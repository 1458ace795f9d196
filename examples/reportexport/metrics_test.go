package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestMetricsScrape starts the example (run), sends a few requests, scrapes
// GET /metrics over HTTP and checks that the scrape lists the instruments
// documented in docs/metrics.md, in their Prometheus form, with the
// example's limiter names as attributes; in-process and through Redis.
func TestMetricsScrape(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	// OpenTelemetry name → Prometheus name (dots to underscores, _total on
	// counters, the unit as a suffix).
	common := [][2]string{
		{"floodgate.admitted", "floodgate_admitted_total"},
		{"floodgate.rejected", "floodgate_rejected_total"},
		{"floodgate.canceled", "floodgate_canceled_total"},
		{"floodgate.in_use", "floodgate_in_use"},
		{"floodgate.waiting", "floodgate_waiting"},
	}
	for _, tc := range []struct {
		name   string
		cfg    func(t *testing.T) config
		names  [][2]string
		labels []string
	}{
		{"local", func(*testing.T) config { return config{Addr: "127.0.0.1:0", Export: time.Millisecond} },
			[][2]string{{"floodgate.limit", "floodgate_limit"}},
			[]string{`floodgate_kind="semaphore"`, `floodgate_kind="meter"`}},
		{"redis", func(t *testing.T) config {
			db := redistest.Connect(t)
			return config{Addr: "127.0.0.1:0", Redis: db.Client.Options().Addr, Prefix: db.Prefix, Export: time.Millisecond}
		},
			[][2]string{
				{"floodgate.decisions", "floodgate_decisions_total"},
				{"floodgate.breaker.state", "floodgate_breaker_state_ratio"},
				{"floodgate.breaker.transitions", "floodgate_breaker_transitions_total"},
				{"floodgate.store.errors", "floodgate_store_errors_total"},
				{"floodgate.lease.lost", "floodgate_lease_lost_total"},
				{"floodgate.store.call.duration", "floodgate_store_call_duration_seconds_bucket"},
				{"floodgate.wait.duration", "floodgate_wait_duration_seconds_bucket"},
				{"floodgate.hold.duration", "floodgate_hold_duration_seconds_bucket"},
			},
			[]string{`floodgate_kind="distsem"`, `floodgate_kind="meter"`, `floodgate_kind="breaker"`, `floodgate_source="store"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := serve(t, tc.cfg(t))
			if resp, _ := do(t, "GET", base+"/items", "demo-free"); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /items: %s", resp.Status)
			}
			if resp, _ := do(t, "POST", base+"/reports/export-pdf", "demo-free"); resp.StatusCode != http.StatusOK {
				t.Fatalf("POST /reports/export-pdf: %s", resp.Status)
			}
			if resp, _ := do(t, "GET", base+"/items", ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("GET /items without a key: %s", resp.Status)
			}
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /metrics: %s", resp.Status)
			}
			scrape := string(body)
			for _, n := range append(append([][2]string{}, common...), tc.names...) {
				if !strings.Contains(string(doc), "`"+n[0]+"`") {
					t.Errorf("docs/metrics.md does not document %s", n[0])
				}
				if !strings.Contains(scrape, "\n"+n[1]+"{") {
					t.Errorf("scrape lacks %s (%s)", n[1], n[0])
				}
			}
			for _, l := range append([]string{
				`floodgate_limiter="api"`, `floodgate_kind="bulkhead"`, `floodgate_layer="export-pdf"`,
				`floodgate_limiter="global"`, `floodgate_limiter="items"`, `floodgate_limiter="export"`,
				`floodgate_limiter="tier-free"`, `floodgate_limiter="tier-gold"`,
			}, tc.labels...) {
				if !strings.Contains(scrape, l) {
					t.Errorf("scrape lacks the label %s", l)
				}
			}
			// The exact count of one series: the one admitted export.
			one := regexp.MustCompile(`\nfloodgate_admitted_total\{floodgate_kind="bulkhead",floodgate_layer="export-pdf",floodgate_limiter="api"[^}]*\} 1\n`)
			if !one.MatchString(scrape) {
				t.Errorf("scrape lacks floodgate_admitted_total of layer export-pdf = 1")
			}
			if t.Failed() {
				t.Logf("scrape:\n%s", scrape)
			}
			if testing.Verbose() {
				t.Log(scrape)
			}
		})
	}
}
