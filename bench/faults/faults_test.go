package main

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bench/internal/redisproc"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/shaper"
)

// TestFaultsQuick runs -quick's phases end to end for floodgate's fixed
// window and GCRA at once (ten processes each, Redis frozen 3 s under
// FailLocal: about 15 s) and checks what the harness measured and wrote,
// and that the GCRA fleet kept to its limit at both edges of the outage
// against an exact GCRA fed its every admission. make test runs it.
func TestFaultsQuick(t *testing.T) {
	if redisproc.Binary() == "" {
		floodgatetest.Missing(t, "no redis-server: set REDIS_SERVER")
	}
	var log bytes.Buffer
	rep, err := measure(t.Context(), config{quick: true, parallel: 2, filter: regexp.MustCompile(`^floodgate (fixed window|GCRA)/frozen/fail_local$`)}, &log)
	if err != nil {
		t.Fatalf("measure: %v\n%s", err, log.String())
	}
	if len(rep.results) != 2 || rep.results[0].rate == nil || rep.results[1].rate == nil {
		t.Fatalf("measure returned %d results, want the two rate scenarios", len(rep.results))
	}
	g := rep.results[1].rate
	if rep.results[1].sc.subj != fgGCRA {
		t.Fatalf("second result %s, want floodgate GCRA's", rep.results[1].sc.name())
	}
	// At the outage's start (calls wait CallTimeout, then the shares decide)
	// and after it (Redis, idle meanwhile, has its whole burst unless the
	// shares' debt is carried into it), the fleet admits what an exact
	// GCRA would, within a tenth of L in all.
	if g.max > 1.10 || g.excess > rep.p.limit/10 || !g.exactOK {
		t.Errorf("GCRA through a frozen Redis under FailLocal: windows up to %.2f·L, %d admissions an exact GCRA refuses, exact again after %v (ok %v); want ≤ 1.10·L, ≤ %d, within the run",
			g.max, g.excess, g.exact, g.exactOK, rep.p.limit/10)
	}
	s := rep.results[0].rate
	L := rep.p.limit
	if rep.results[0].sc.subj != fgWindow {
		t.Fatalf("first result %s, want floodgate fixed window's", rep.results[0].sc.name())
	}
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
	if !s.recovered || !s.exactOK || s.lost != 0 {
		t.Errorf("exact again after %v (ok %v), every decision Redis's after %v (ok %v), quota lost %d: want both within the run and nothing lost", s.exact, s.exactOK, s.recovery, s.recovered, s.lost)
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

// TestGCRAExcess holds the harness's exact GCRA to shaper's in-process one
// (GCRA, same limit): the admissions shaper makes from random arrivals are
// never excess, and every arrival shaper refused, added as an admission in
// a measured window, is.
func TestGCRAExcess(t *testing.T) {
	p := params{limit: 100}
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(p.limit), Burst: p.limit})
	t0 := time.Unix(1_700_000_000, 0)
	tl := timeline{t0: t0, end: t0.Add(20 * time.Second)}
	rng := rand.New(rand.NewPCG(1, 2))
	var admitted, refused []rateRec
	gap := func() time.Duration { // mostly busy, now and then idle long enough to refill the burst
		if rng.IntN(400) == 0 {
			return 1200 * time.Millisecond
		}
		return time.Duration(rng.Int64N(int64(6 * time.Millisecond)))
	}
	for at := t0; at.Before(tl.end); at = at.Add(gap()) {
		r := rateRec{start: at, end: at, d: decision{allowed: true, src: srcStore, remaining: -1}}
		if d, _ := m.AllowNAt("k", at, 1); d.Allowed {
			admitted = append(admitted, r)
		} else if tl.measured(at.Unix()) {
			refused = append(refused, r)
		}
	}
	if n, _ := gcraExcess(admitted, tl, p, false); n != 0 {
		t.Errorf("gcraExcess of shaper's %d admissions = %d, want 0", len(admitted), n)
	}
	extra := refused[:len(refused)/3]
	if n, _ := gcraExcess(append(slices.Clone(admitted), extra...), tl, p, false); n != int64(len(extra)) {
		t.Errorf("gcraExcess with %d admissions shaper refused added = %d, want %d", len(extra), n, len(extra))
	}
}
