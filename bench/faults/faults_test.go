package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/floodgate-go/floodgate/floodgatetest"
)

// TestFaultsQuick runs -quick's scenario end to end (floodgate's fixed
// window, ten processes, Redis frozen 3 s under FailLocal: about 15 s) and
// checks what the harness measured and wrote. make test runs it.
func TestFaultsQuick(t *testing.T) {
	if redisproc.Binary() == "" {
		floodgatetest.Missing(t, "no redis-server: set REDIS_SERVER")
	}
	var log bytes.Buffer
	rep, err := measure(t.Context(), config{quick: true, parallel: 1, filter: regexp.MustCompile("")}, &log)
	if err != nil {
		t.Fatalf("measure: %v\n%s", err, log.String())
	}
	if len(rep.results) != 1 || rep.results[0].rate == nil {
		t.Fatalf("measure returned %d results, want the one rate scenario", len(rep.results))
	}
	s := rep.results[0].rate
	L := rep.p.limit
	if s.decisions < 1000 || s.degradedN == 0 {
		t.Errorf("%d decisions, %d degraded: want the fleet's load, and FailLocal deciding while Redis was frozen", s.decisions, s.degradedN)
	}
	if s.openN == 0 {
		t.Errorf("no decision in an open phase: the breakers never opened")
	}
	// Inside the outage each process admits at most its share, L/N.
	if s.maxInside > 1.0 || s.maxInside < 0.5 {
		t.Errorf("windows inside the outage admitted up to %.2f·L, want about 1·L (N × LocalShare)", s.maxInside)
	}
	if s.maxBefore > 1.0 || s.maxBefore < 0.9 {
		t.Errorf("windows before the fault admitted up to %.2f·L, want L (the fixed window is exact)", s.maxBefore)
	}
	if !s.recovered || s.lost != 0 {
		t.Errorf("exact again after %v (recovered %v), quota lost %d: want recovery within the run and nothing lost", s.recovery, s.recovered, s.lost)
	}
	if s.calPre != L || s.calPost != L || s.calOther != 0 {
		t.Errorf("calibration %d → %d (%d not by Redis), want %d → %d", s.calPre, s.calPost, s.calOther, L, L)
	}
	var doc bytes.Buffer
	writeReport(&doc, rep)
	for _, want := range []string{"## Targets", "## How it is measured", "### Redis frozen", "| floodgate fixed window | fail_local |"} {
		if !strings.Contains(doc.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}
