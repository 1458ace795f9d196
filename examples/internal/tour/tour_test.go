package tour

import (
	"bytes"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/tour/tourcheck"
)

func TestTourLocal(t *testing.T) {
	const d = 3 * time.Second // the default: long enough for job 2's cap to bind
	var out bytes.Buffer
	start := time.Now()
	if err := Run(t.Context(), Config{Duration: d}, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Logf("tour took %v:\n%s", time.Since(start), out.String())
	secs := tourcheck.Parse(t, out.String(), 4)
	for i, s := range secs[:3] {
		if got := s.Rows["limiters"]; len(got) != 1 || got[0] != "this process" {
			t.Errorf("job %d columns %q, want [this process]", i+1, got)
		}
	}
	tourcheck.CheckShared(t, secs, d)
	// The adaptive section runs in real time beside the rest of the suite:
	// its settled limits must be within ×2.5 of each capacity (on a quiet
	// machine they are within ±10%).
	tourcheck.CheckAdaptive(t, secs[3], adaptiveWorkers, 2.5)
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no duration", Config{}},
		{"shared with one pod", Config{Shared: LocalBackend("x"), Pods: 1, Duration: time.Second}},
	} {
		var out bytes.Buffer
		if err := Run(t.Context(), tc.cfg, &out); err == nil {
			t.Errorf("%s: Run = nil, want an error", tc.name)
		}
		if out.Len() != 0 {
			t.Errorf("%s: Run wrote %q before refusing", tc.name, out.String())
		}
	}
}
