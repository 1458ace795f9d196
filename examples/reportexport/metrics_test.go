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
	"github.com/floodgate-go/floodgate/otelfloodgate"
)

// TestMetricsDocumented: docs/metrics.md documents every instrument and every
// attribute otelfloodgate records.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{
		otelfloodgate.NameAdmitted, otelfloodgate.NameRejected, otelfloodgate.NameCanceled,
		otelfloodgate.NameInUse, otelfloodgate.NameWaitDuration, otelfloodgate.NameHoldDuration,
		otelfloodgate.NameDecisions, otelfloodgate.NameStoreCallDuration,
		otelfloodgate.NameBreakerState, otelfloodgate.NameBreakerTransitions,
		otelfloodgate.NameLeaseLost, otelfloodgate.NameLeaseRenewals,
		otelfloodgate.NameLimit, otelfloodgate.NameLatencyBaseline,
		string(otelfloodgate.KeyLimiter), string(otelfloodgate.KeyComponent), string(otelfloodgate.KeyPart),
		string(otelfloodgate.KeyReason), string(otelfloodgate.KeySource), string(otelfloodgate.KeyState),
		string(otelfloodgate.KeyOutcome), string(otelfloodgate.KeyKind),
	} {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/metrics.md does not document `%s`", n)
		}
	}
}

// TestMetricsScrape starts the example (run), sends requests (one GET /items,
// six exports of one tenant: five pass, the sixth is refused by the export
// rate), scrapes GET /metrics over HTTP and checks that the scrape has the
// instruments these calls record, in the Prometheus form docs/metrics.md
// gives, with the example's observer names and the vocabulary's words as
// labels, and the exact counts of the export layer; in-process and through
// Redis.
func TestMetricsScrape(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	// OpenTelemetry name → Prometheus name (dots to underscores, _total on
	// counters, the unit as a suffix).
	common := [][2]string{
		{otelfloodgate.NameAdmitted, "floodgate_admitted_total"},
		{otelfloodgate.NameRejected, "floodgate_rejected_total"},
		{otelfloodgate.NameInUse, "floodgate_in_use"},
	}
	commonLabels := []string{
		`floodgate_limiter="api"`, `floodgate_component="bulkhead"`, `floodgate_part="export-pdf"`,
		`floodgate_part="tier"`, `floodgate_part="items"`, `floodgate_part="global"`,
		`floodgate_limiter="global"`, `floodgate_limiter="export-running"`, `floodgate_reason="limited"`,
	}
	for _, tc := range []struct {
		name   string
		cfg    func(t *testing.T) config
		names  [][2]string
		labels []string
	}{
		{"local", func(*testing.T) config { return config{Addr: "127.0.0.1:0", Export: time.Millisecond} },
			nil,
			[]string{`floodgate_component="semaphore"`}},
		{"redis", func(t *testing.T) config {
			db := redistest.Connect(t)
			return config{Addr: "127.0.0.1:0", Redis: db.Client.Options().Addr, Prefix: db.Prefix, Export: time.Millisecond}
		},
			[][2]string{
				{otelfloodgate.NameDecisions, "floodgate_decisions_total"},
				{otelfloodgate.NameStoreCallDuration, "floodgate_store_call_duration_seconds_bucket"},
				{otelfloodgate.NameHoldDuration, "floodgate_hold_duration_seconds_bucket"},
			},
			[]string{`floodgate_component="distsem"`, `floodgate_component="meter"`, `floodgate_component="breaker"`,
				`floodgate_limiter="items"`, `floodgate_limiter="export"`, `floodgate_limiter="tier-free"`,
				`floodgate_source="store"`, `floodgate_outcome="ok"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := serve(t, tc.cfg(t))
			if resp, _ := do(t, "GET", base+"/items", "demo-free"); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /items: %s", resp.Status)
			}
			for i := range exportPerMin + 1 {
				want := http.StatusOK
				if i == exportPerMin {
					want = http.StatusTooManyRequests
				}
				if resp, _ := do(t, "POST", base+"/reports/export-pdf", "demo-free"); resp.StatusCode != want {
					t.Fatalf("export %d: %s, want %d", i+1, resp.Status, want)
				}
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
				if !strings.Contains(string(doc), "`"+n[1]+"`") && !strings.Contains(string(doc), "`"+strings.TrimSuffix(n[1], "_bucket")+"`") {
					t.Errorf("docs/metrics.md does not give the Prometheus name of %s (%s)", n[0], n[1])
				}
				if !strings.Contains(scrape, "\n"+n[1]+"{") {
					t.Errorf("scrape lacks %s (%s)", n[1], n[0])
				}
			}
			for _, l := range append(append([]string{}, commonLabels...), tc.labels...) {
				if !strings.Contains(scrape, l) {
					t.Errorf("scrape lacks the label %s", l)
				}
			}
			// The exact counts of the export layer: five admitted, the
			// sixth refused by its rate.
			for _, c := range []struct{ what, re string }{
				{"admitted exports = 5", `\nfloodgate_admitted_total\{floodgate_component="bulkhead",floodgate_limiter="api",floodgate_part="export-pdf",[^}]*\} 5\n`},
				{"rejected exports = 1 (limited)", `\nfloodgate_rejected_total\{floodgate_component="bulkhead",floodgate_limiter="api",floodgate_part="export-pdf",floodgate_reason="limited",[^}]*\} 1\n`},
			} {
				if !regexp.MustCompile(c.re).MatchString(scrape) {
					t.Errorf("scrape lacks %s", c.what)
				}
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
