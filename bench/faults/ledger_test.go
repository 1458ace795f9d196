package main

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
)

// TestWatchLedger: the sampler keeps the first value and each change, with
// when it was seen (at most ledgerEvery late), and stops with its context.
func TestWatchLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v atomic.Int64
		ctx, cancel := context.WithCancel(t.Context())
		stop := watchLedger(ctx, 1, func(int) int64 { return v.Load() })
		t0 := time.Now()
		time.Sleep(12 * time.Millisecond)
		v.Store(3)
		time.Sleep(20 * time.Millisecond)
		v.Store(0)
		time.Sleep(20 * time.Millisecond)
		cancel()
		l := stop()
		want := []sample{{t0, 0}, {t0.Add(15 * time.Millisecond), 3}, {t0.Add(35 * time.Millisecond), 0}}
		if len(l[0]) != len(want) {
			t.Fatalf("ledger %v, want %v", l[0], want)
		}
		for i, s := range l[0] {
			if !s.t.Equal(want[i].t) || s.v != want[i].v {
				t.Errorf("sample %d = %v at +%v, want %v at +%v", i, s.v, s.t.Sub(t0), want[i].v, want[i].t.Sub(t0))
			}
		}
		if got := l.at(0, t0.Add(20*time.Millisecond)); got != 3 {
			t.Errorf("at(+20ms) = %d, want 3", got)
		}
		if got, ok := l.rose(0, t0.Add(time.Millisecond)); !ok || !got.Equal(t0.Add(15*time.Millisecond)) {
			t.Errorf("rose after +1ms = +%v, %v; want +15ms", got.Sub(t0), ok)
		}
		if _, ok := l.rose(0, t0.Add(20*time.Millisecond)); ok {
			t.Errorf("rose after +20ms: true, want false (it only fell)")
		}
		if back, up := l.backToZero(0); up || !back.Equal(t0.Add(35*time.Millisecond)) {
			t.Errorf("backToZero = +%v, still up %v; want +35ms, false", back.Sub(t0), up)
		}
		if w := l.byWindow(); len(w) != 1 || w[t0.Add(15*time.Millisecond).Unix()] != 3 {
			t.Errorf("byWindow = %v, want the one rise of 3 in its second", w)
		}
	})
}

// TestExactAccounting: an admission made without Redis is owed until its
// process carries it (its ledger rises after it) or Redis would have
// forgotten it (a fixed window's at its window's end); a refusal made
// without Redis owes nothing, though the stricter reading counts it.
func TestExactAccounting(t *testing.T) {
	p := params{limit: 100}
	ret := time.Unix(1_700_000_010, 0).Add(100 * time.Millisecond)
	tl := timeline{t0: time.Unix(1_700_000_000, 0), faultAt: time.Unix(1_700_000_005, 0), returnAt: ret, end: ret.Add(10 * time.Second)}
	ms := time.Millisecond
	local := func(proc int, at time.Duration, allowed bool) rateRec {
		return rateRec{proc: proc, start: ret.Add(at), end: ret.Add(at), d: decision{allowed: allowed, src: srcDegraded, remaining: -1}}
	}
	recs := []rateRec{local(0, 950*ms, true), local(1, 200*ms, true), local(2, 1500*ms, false)}
	carried := ledger{{{tl.t0, 0}, {ret.Add(1000 * ms), 4}}, {{tl.t0, 0}}, {{tl.t0, 0}}}
	var s rateStats
	s.exactAccounting(recs, carried, tl, p, fgWindow, breaker.FailLocal, ret)
	// Process 0 carried at +1s (its window ends at +1.9s); process 1 never
	// did: its window ends at the next whole second, +900ms; process 2 only
	// refused.
	if want := 1000 * ms; s.exact != want || !s.exactOK {
		t.Errorf("fixed window: exact again after %v (ok %v), want %v", s.exact, s.exactOK, want)
	}
	s.exactAccounting(recs, carried, tl, p, fgGCRA, breaker.FailLocal, ret)
	if want := 1200 * ms; s.exact != want { // a GCRA's debt is forgotten a second later
		t.Errorf("GCRA: exact again after %v, want %v", s.exact, want)
	}
	// Process 1's next decision admitted by Redis, begun after its
	// admission without Redis, carried whatever Redis lacked first.
	byRedis := rateRec{proc: 1, start: ret.Add(500 * ms), end: ret.Add(501 * ms), d: decision{allowed: true, src: srcStore, remaining: -1}}
	s.exactAccounting(append(recs, byRedis), carried, tl, p, fgGCRA, breaker.FailLocal, ret)
	if want := 1000 * ms; s.exact != want {
		t.Errorf("GCRA, process 1 decided by Redis since: exact again after %v, want %v (process 0's carry)", s.exact, want)
	}
	s.exactAccounting(append(recs, byRedis), carried, tl, p, fgGCRA, breaker.FailOpen, ret)
	if want := 1200 * ms; s.exact != want {
		t.Errorf("GCRA under FailOpen (no carry): exact again after %v, want %v", s.exact, want)
	}
	s.recover(recs, map[int64]*rateWindow{}, tl, p, fgGCRA, time.Time{})
	if want := 1500 * ms; s.recovery != want {
		t.Errorf("the stricter reading: %v, want %v (process 2's refusal without Redis)", s.recovery, want)
	}
}

// TestGateExactAccounting: a FailLocal permit counts against exact
// accounting until the process's Uncarried weight is back to 0; a FailOpen
// permit until it is released.
func TestGateExactAccounting(t *testing.T) {
	p := params{limit: gateLimit}
	ret := time.Unix(1_700_000_010, 0)
	tl := timeline{t0: time.Unix(1_700_000_000, 0), faultAt: time.Unix(1_700_000_005, 0), returnAt: ret, end: ret.Add(10 * time.Second)}
	ms := time.Millisecond
	recs := []gateRec{{proc: 0, start: ret.Add(-time.Second), end: ret.Add(-time.Second), done: ret.Add(900 * ms), granted: true, src: srcDegraded}}
	uncarried := ledger{{{tl.t0, 0}, {ret.Add(-time.Second), 1}, {ret.Add(400 * ms), 0}}}
	s := measureGate(recs, uncarried, tl, p, breaker.FailLocal, gateCheck{})
	if s.exact != 400*ms || !s.exactOK {
		t.Errorf("FailLocal: exact again after %v (ok %v), want 400ms (carried then)", s.exact, s.exactOK)
	}
	if s.recovery != 900*ms {
		t.Errorf("FailLocal, the stricter reading: %v, want 900ms (the degraded permit's release)", s.recovery)
	}
	s = measureGate(recs, ledger{{{tl.t0, 0}}}, tl, p, breaker.FailOpen, gateCheck{})
	if s.exact != 900*ms {
		t.Errorf("FailOpen: exact again after %v, want 900ms (its permit's release)", s.exact)
	}
	s = measureGate(recs, ledger{{{tl.t0, 0}, {ret.Add(-time.Second), 1}}}, tl, p, breaker.FailLocal, gateCheck{})
	if s.exactOK {
		t.Errorf("FailLocal weight never carried: exact again %v with ok, want not ok", s.exact)
	}
}

// TestGCRAFloor holds the floor to shaper's in-process GCRA: given every
// arrival (admitted or refused), the floor's largest window is the largest
// number shaper admitted in a measured window.
func TestGCRAFloor(t *testing.T) {
	p := params{limit: 100}
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(p.limit), Burst: p.limit})
	t0 := time.Unix(1_700_000_000, 0)
	tl := timeline{t0: t0, end: t0.Add(20 * time.Second)}
	rng := rand.New(rand.NewPCG(3, 4))
	var recs []rateRec
	byWin := map[int64]int64{}
	for at := t0; at.Before(tl.end); {
		d, _ := m.AllowNAt("k", at, 1)
		// The record's answer is the opposite of shaper's: the floor decides
		// the calls itself, whatever the fleet answered.
		recs = append(recs, rateRec{start: at, end: at, d: decision{allowed: !d.Allowed, src: srcDegraded, remaining: -1}})
		if d.Allowed && tl.measured(at.Unix()) {
			byWin[at.Unix()]++
		}
		if rng.IntN(300) == 0 {
			at = at.Add(1500 * time.Millisecond) // idle: the burst refills
		} else {
			at = at.Add(time.Duration(rng.Int64N(int64(8 * time.Millisecond))))
		}
	}
	var want int64
	for _, n := range byWin {
		want = max(want, n)
	}
	if want <= p.limit {
		t.Fatalf("the arrivals never made shaper admit over L in a window (%d): the test needs a burst on top of the rate", want)
	}
	if got := gcraFloor(recs, tl, p); got != float64(want)/float64(p.limit) {
		t.Errorf("gcraFloor = %.2f·L, want shaper's largest window %.2f·L", got, float64(want)/float64(p.limit))
	}
}

// TestExactSplit checks exactSplit against two shaper meters (exact GCRAs)
// deciding the two halves of the calls apart: the calls answered by Redis
// with one of L, those decided on a share (process 0 cut off) with one of
// L/N, each window the sum.
func TestExactSplit(t *testing.T) {
	p := params{limit: 100, procs: 10}
	fleet := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(p.limit), Burst: p.limit})
	share := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(p.limit / 10), Burst: p.limit / 10})
	t0 := time.Unix(1_700_000_000, 0)
	tl := timeline{t0: t0, end: t0.Add(20 * time.Second)}
	rng := rand.New(rand.NewPCG(5, 6))
	var recs []rateRec
	byWin := map[int64]int64{}
	for at := t0; at.Before(tl.end); at = at.Add(time.Duration(rng.Int64N(int64(6 * time.Millisecond)))) {
		own := rng.IntN(10) == 0 // process 0, on its share
		m, src := fleet, srcStore
		if own {
			m, src = share, srcDegraded
		}
		d, _ := m.AllowNAt("k", at, 1)
		recs = append(recs, rateRec{start: at, end: at, d: decision{allowed: !d.Allowed, src: src, remaining: -1}})
		if d.Allowed && tl.measured(at.Unix()) {
			byWin[at.Unix()]++
		}
	}
	var want int64
	for _, n := range byWin {
		want = max(want, n)
	}
	if want <= p.limit {
		t.Fatalf("the two meters never admitted over L in a window (%d): the test needs the share on top of L", want)
	}
	if got := exactSplit(recs, tl, p); got != float64(want)/float64(p.limit) {
		t.Errorf("exactSplit = %.2f·L, want the two meters' largest window %.2f·L", got, float64(want)/float64(p.limit))
	}
	if got := gcraFloor(recs, tl, p); got > 1.01 {
		t.Errorf("gcraFloor = %.2f·L: one GCRA of L for every call should keep about L", got)
	}
}
