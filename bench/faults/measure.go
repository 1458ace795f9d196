package main

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// timeline is when a run's phases began. Windows are whole Unix seconds,
// as the limits' own (the fixed window's are aligned to the Unix epoch in
// Redis time; Redis runs on this machine, so on this clock). The first
// window of a run is its ramp and is left out of every window figure: a
// GCRA meter idle for a second before it admits its whole burst on top of
// its rate there, which is what a burst is, not a steady state.
type timeline struct {
	t0, faultAt, returnAt, end time.Time // faultAt and returnAt zero when steady
}

func (tl timeline) faulty() bool { return !tl.faultAt.IsZero() }

// measured reports whether window sec counts in the window figures.
func (tl timeline) measured(sec int64) bool {
	return sec >= tl.t0.Unix()+1 && sec < tl.end.Unix()
}

// inside reports whether window sec lies wholly within the fault.
func (tl timeline) inside(sec int64) bool {
	return tl.faulty() && time.Unix(sec, 0).Compare(tl.faultAt) >= 0 && !time.Unix(sec+1, 0).After(tl.returnAt)
}

// before reports whether window sec ended before the fault began.
func (tl timeline) before(sec int64) bool {
	return !tl.faulty() || !time.Unix(sec+1, 0).After(tl.faultAt)
}

// window returns the Unix second of the window r's admission counts in:
// for a fixed-window answer from Redis, the window Redis counted it in
// (its reset says when that window ends); for another answer from Redis,
// the middle of the call; for an answer made in the process (a degraded
// decision, an error a caller admits), its end.
func (r rateRec) window() int64 {
	mid := r.start.Add(r.end.Sub(r.start) / 2)
	switch {
	case r.d.src == srcStore && r.d.remaining >= 0:
		return mid.Add(r.d.reset).Round(time.Second).Unix() - 1
	case r.d.src == srcStore:
		return mid.Unix()
	}
	return r.end.Unix()
}

// rateWindow is what the fleet did in one window.
type rateWindow struct {
	sec                   int64
	store, degraded, errs int64 // admissions by Redis, by the policy; errors
	charged               int64 // fixed window: Redis's count in it (L - least remaining seen); -1 unknown
}

// rateStats are the figures of a rate scenario.
type rateStats struct {
	decisions, errors, degradedN int64
	// Per window, as multiples of L: the largest, the 99th percentile, and
	// the largest of the windows wholly inside the fault and of those before it.
	max, p99, maxInside, maxBefore float64
	// The same for a caller of a peer that fails closed on an error (the
	// figures above are its caller's that fails open: an error admits).
	closedMax, closedP99, closedInside float64
	steadyP50, steadyP99               time.Duration
	// The open phase: in each process, from its breaker's first open
	// state after the fault began until Redis returned (for a peer, the
	// whole fault). openN decisions, their latency percentiles, the 99th
	// of those that began while open (not half-open), and the share that
	// waited on the network (a half-open probe: longer than CallTimeout/2).
	openN                         int
	openP50, openP99, onlyOpenP99 time.Duration
	waitedShare                   float64
	// exact is from Redis's return until its accounting was whole again
	// (see exactAccounting); exactOK false if that was within the run's
	// last second.
	exact   time.Duration
	exactOK bool
	// closedExact is exact for a peer's caller that fails closed.
	closedExact time.Duration
	// recovery, the stricter reading, is from Redis's return to the last
	// decision not made by Redis (a refusal too), or the end of a window
	// above 1.01·L, or the last excess admission; recovered false if that
	// was within the run's last second.
	recovery  time.Duration
	recovered bool
	// floorMax (a GCRA) is the largest measured window, as a multiple of
	// L, of an exact GCRA of the run's limit deciding the same calls at
	// the moments they were decided (see gcraFloor).
	floorMax float64
	// exactSplitMax (a GCRA): the same with the calls decided on a share
	// decided by an exact GCRA of the share (see exactSplit).
	exactSplitMax float64
	// lost (fixed window): quota Redis charged that no caller was admitted
	// by: Σ over windows of Redis's count less the admissions by Redis seen
	// and the cost carried into the window after an outage (admissions made
	// without Redis, which it then counts).
	lost int64
	// calPre and calPost: admissions by Redis in one window when the fleet
	// offers 3·L in it, before the run and after it (the key's state intact
	// if they are equal); calOther the calls there not answered by Redis.
	calPre, calPost, calOther int64
	// slowBefore counts the decisions before the fault (all of a steady
	// run's) that took over CallTimeout/2: the machine, not Redis, was slow.
	slowBefore int64
	// excess counts the admissions an exact limiter would have refused: for
	// the fixed window, those beyond L in their window; for a GCRA, those
	// that an exact GCRA of the same limit, fed every admission of the fleet
	// in time order, refuses (see gcraExcess). closedExcess is a fail-closed
	// caller's of a peer.
	excess, closedExcess int64
	// series is the fleet's admissions per measured window, in order, as
	// multiples of L (a fail-open caller's for a peer), with the index of the
	// window the fault began in and the one Redis returned in (-1 if none).
	series              []float64
	faultWin, returnWin int
}

func measureRate(recs, pre, post []rateRec, carried ledger, tl timeline, p params, subj subject, pol breaker.Policy) rateStats {
	var s rateStats
	L := float64(p.limit)
	byWin := map[int64]*rateWindow{}
	win := func(sec int64) *rateWindow {
		w := byWin[sec]
		if w == nil {
			w = &rateWindow{sec: sec, charged: -1}
			byWin[sec] = w
		}
		return w
	}
	var steady []time.Duration
	for _, r := range recs {
		s.decisions++
		if r.start.Sub(tl.t0) >= time.Second && (!tl.faulty() || r.start.Before(tl.faultAt)) && r.end.Sub(r.start) > p.callTO/2 {
			s.slowBefore++
		}
		w := win(r.window())
		switch r.d.src {
		case srcStore:
			if r.d.allowed {
				w.store++
			}
			if r.d.remaining >= 0 {
				w.charged = max(w.charged, p.limit-r.d.remaining)
			}
			if r.start.Sub(tl.t0) >= time.Second && (!tl.faulty() || r.start.Before(tl.faultAt)) {
				steady = append(steady, r.end.Sub(r.start))
			}
		case srcDegraded:
			s.degradedN++
			if r.d.allowed {
				w.degraded++
			}
		case srcError:
			s.errors++
			w.errs++
		}
	}
	s.steadyP50, s.steadyP99 = pct(steady, 50), pct(steady, 99)

	carriedIn := carried.byWindow()
	var open, closed []float64
	for sec, w := range byWin {
		if !tl.measured(sec) {
			continue
		}
		o := float64(w.store+w.degraded+w.errs*b2i(subj.peer())) / L
		c := float64(w.store+w.degraded) / L
		open, closed = append(open, o), append(closed, c)
		if tl.inside(sec) {
			s.maxInside = max(s.maxInside, o)
			s.closedInside = max(s.closedInside, c)
		}
		if tl.before(sec) {
			s.maxBefore = max(s.maxBefore, o)
		}
		if c := w.store + carriedIn[sec]; w.charged >= 0 && w.charged > c {
			s.lost += w.charged - c
		}
	}
	s.max, s.p99 = maxF(open), pctF(open, 99)
	s.closedMax, s.closedP99 = maxF(closed), pctF(closed, 99)
	s.faultWin, s.returnWin = -1, -1
	for sec := tl.t0.Unix() + 1; sec < tl.end.Unix(); sec++ {
		if tl.faulty() && sec == tl.faultAt.Unix() {
			s.faultWin = len(s.series)
		}
		if tl.faulty() && sec == tl.returnAt.Unix() {
			s.returnWin = len(s.series)
		}
		var n int64
		if w := byWin[sec]; w != nil {
			n = w.store + w.degraded + w.errs*b2i(subj.peer())
		}
		s.series = append(s.series, float64(n)/L)
	}
	var lastExcess time.Time
	if subj == fgWindow {
		for sec, w := range byWin {
			if tl.measured(sec) {
				s.excess += max(0, w.store+w.degraded-p.limit)
			}
		}
		s.closedExcess = s.excess
	} else {
		s.excess, lastExcess = gcraExcess(recs, tl, p, subj.peer())
		var closedLast time.Time
		s.closedExcess, closedLast = gcraExcess(recs, tl, p, false)
		s.closedExact = max(0, closedLast.Sub(tl.returnAt)) // nothing owed: an error is a refusal
		s.floorMax = gcraFloor(recs, tl, p)
		s.exactSplitMax = exactSplit(recs, tl, p)
	}
	if tl.faulty() {
		s.openPhase(recs, tl, p, subj)
		lastOver := s.recover(recs, byWin, tl, p, subj, lastExcess)
		s.exactAccounting(recs, carried, tl, p, subj, pol, lastOver)
	}
	s.calPre, s.calOther = calibration(pre)
	var other int64
	s.calPost, other = calibration(post)
	s.calOther += other
	return s
}

// openPhase measures the decisions of the open phase (see rateStats).
func (s *rateStats) openPhase(recs []rateRec, tl timeline, p params, subj subject) {
	firstOpen := map[int]time.Time{}
	if !subj.peer() {
		for _, r := range recs {
			if r.state == breaker.StateOpen && !r.start.Before(tl.faultAt) && r.start.Before(tl.returnAt) {
				if t, ok := firstOpen[r.proc]; !ok || r.start.Before(t) {
					firstOpen[r.proc] = r.start
				}
			}
		}
	}
	var all, onlyOpen []time.Duration
	waited := 0
	for _, r := range recs {
		from, ok := firstOpen[r.proc]
		if subj.peer() {
			from, ok = tl.faultAt, true
		}
		if !ok || r.start.Before(from) || !r.start.Before(tl.returnAt) {
			continue
		}
		d := r.end.Sub(r.start)
		all = append(all, d)
		if r.state == breaker.StateOpen {
			onlyOpen = append(onlyOpen, d)
		}
		if d > p.callTO/2 {
			waited++
		}
	}
	s.openN = len(all)
	s.openP50, s.openP99, s.onlyOpenP99 = pct(all, 50), pct(all, 99), pct(onlyOpen, 99)
	if len(all) > 0 {
		s.waitedShare = float64(waited) / float64(len(all))
	}
}

// recover finds when every decision was Redis's again after Redis
// returned (the stricter reading): the last decision not answered by Redis,
// and for the fixed window the end of the last window over 1.01·L, for a
// GCRA the last admission an exact GCRA refuses (lastExcess): a GCRA may
// admit its burst on top of its rate in a window after an idle second, so
// its windows are not the measure. It returns the last over-admission
// after Redis returned (the window's end, or lastExcess; returnAt if none).
func (s *rateStats) recover(recs []rateRec, byWin map[int64]*rateWindow, tl timeline, p params, subj subject, lastExcess time.Time) time.Time {
	last := tl.returnAt
	for _, r := range recs {
		if !r.start.Before(tl.returnAt) && r.d.src != srcStore && r.end.After(last) {
			last = r.end
		}
	}
	over := tl.returnAt
	if lastExcess.After(over) {
		over = lastExcess
	}
	L := float64(p.limit)
	for sec, w := range byWin {
		if subj != fgWindow {
			break
		}
		end := time.Unix(sec+1, 0)
		if !tl.measured(sec) || !end.After(tl.returnAt) {
			continue
		}
		n := w.store + w.degraded + w.errs*b2i(subj.peer())
		if float64(n) > 1.01*L && end.After(over) {
			over = end
		}
	}
	if over.After(last) {
		last = over
	}
	s.recovery = last.Sub(tl.returnAt)
	s.recovered = last.Before(tl.end.Add(-time.Second))
	return over
}

// exactAccounting finds when Redis's accounting was whole again after it
// returned: when Redis had been told of, or had forgotten, every admission
// made without it, and the fleet was over its limit no more (lastOver,
// from recover). An admission made without Redis (a degraded one; a
// peer's error that its fail-open caller admits) is owed to Redis until
// the process carries it there (its meter's Stats().Carried rises after
// it: carried, or the first decision Redis admits for the process after
// it, which carries what Redis lacks of it first) or Redis would have
// forgotten it anyway: a fixed window's at the end of its window, a GCRA's
// one second later (a burst of L at L a second; what Redis missed of it
// until then shows as excess admissions, in lastOver). Refusals made
// without Redis (the share's while recovering, FailClosed's) owe nothing:
// they are the stricter reading's (recover), not this one's.
func (s *rateStats) exactAccounting(recs []rateRec, carried ledger, tl timeline, p params, subj subject, pol breaker.Policy, lastOver time.Time) {
	lastOwed := map[int]time.Time{}
	for _, r := range recs {
		if r.d.allowed && r.d.src == srcDegraded || subj.peer() && r.d.src == srcError {
			if r.end.After(lastOwed[r.proc]) {
				lastOwed[r.proc] = r.end
			}
		}
	}
	settled := map[int]time.Time{}
	for proc, a := range lastOwed {
		t := a.Add(time.Second)
		if subj == fgWindow {
			t = time.Unix(a.Unix()+1, 0)
		}
		if proc < len(carried) {
			if c, ok := carried.rose(proc, a); ok && c.Before(t) {
				t = c
			}
		}
		settled[proc] = t
	}
	if !subj.peer() && pol == breaker.FailLocal {
		// floodgate under FailLocal carries on the first decision Redis admits after an
		// admission made without it, before answering it: what is carried
		// then (nothing, if Redis is as spent as the share says the fleet
		// is) leaves Redis counting the debt.
		for _, r := range recs {
			a, owed := lastOwed[r.proc]
			if owed && r.d.src == srcStore && r.d.allowed && r.start.After(a) && r.end.Before(settled[r.proc]) {
				settled[r.proc] = r.end
			}
		}
	}
	last := lastOver
	for _, t := range settled {
		if t.After(last) {
			last = t
		}
	}
	s.exact = max(0, last.Sub(tl.returnAt))
	s.exactOK = last.Before(tl.end.Add(-time.Second))
}

// gcraExcess feeds every admission of the run (for a peer's fail-open
// caller, an error too), from its first window on, in time order to an
// exact GCRA of the run's limit (L/s, burst L), and counts those in the
// measured windows that it refuses; it returns that count and the time of
// the last one after Redis returned. Redis decided an answer it gave at some
// moment of its call: the exact GCRA checks the admission at the call's end
// and charges it from the call's start, the two most lenient choices, so
// that an exact GCRA's own admissions are never counted (an answer made in
// the process is at its end). The run starts after a second without calls,
// so the GCRA in Redis then has its whole burst, as the exact one.
func gcraExcess(recs []rateRec, tl timeline, p params, errsAdmit bool) (int64, time.Time) {
	type adm struct{ lo, hi time.Time }
	var as []adm
	for _, r := range recs {
		if !(r.d.allowed || errsAdmit && r.d.src == srcError) || r.end.Before(tl.t0) {
			continue
		}
		a := adm{r.end, r.end}
		if r.d.src == srcStore {
			a.lo = r.start
		}
		as = append(as, a)
	}
	slices.SortFunc(as, func(a, b adm) int { return a.hi.Compare(b.hi) })
	T := time.Second / time.Duration(p.limit)
	tau := time.Duration(p.limit-1) * T
	var tat, last time.Time
	var n int64
	for _, a := range as {
		if tat.Sub(a.hi) > tau {
			if tl.measured(a.hi.Unix()) {
				n++
				if tl.faulty() && !a.hi.Before(tl.returnAt) {
					last = a.hi
				}
			}
			continue
		}
		if tat.Before(a.lo) {
			tat = a.lo
		}
		tat = tat.Add(T)
	}
	return n, last
}

// gcraFloor decides every call of the run from its first window on, at the
// moment it was decided (an answer from Redis at the middle of its call,
// one made in the process at its end), with an exact GCRA of the run's
// limit (L/s, burst L), and returns the largest number it admits in a
// measured window, as a multiple of L: what a limiter that is never wrong
// admits in a window given the same calls when they came to be decided.
// A GCRA with a burst of L admits up to 2·L in a window after the fleet
// was idle (the seconds in which breakers open and callers wait are such),
// so this, not L, is the floor of a GCRA's largest window.
func gcraFloor(recs []rateRec, tl timeline, p params) float64 {
	return maxWindow(exactGCRA(recs, tl, p.limit, func(rateRec) bool { return true }), p)
}

// exactSplit is gcraFloor for a fleet that the design splits in two: the
// calls a process decided on its own share (src not Redis: process 0's
// while it was cut off) decided by an exact GCRA of that share (L/N a
// second, burst L/N), every other call by one of the run's limit, and each
// window the sum of the two. With one process partitioned the fleet's
// bound is L plus that share, and a GCRA's emissions are not aligned to
// the windows, so a share of 10 a second can put 11 in one. It is not a
// floor of floodgate's row: an exact share starts with its whole burst,
// floodgate's from what Redis last said remained.
func exactSplit(recs []rateRec, tl timeline, p params) float64 {
	own := func(r rateRec) bool { return r.d.src != srcStore }
	fleet := exactGCRA(recs, tl, p.limit, func(r rateRec) bool { return !own(r) })
	for sec, n := range exactGCRA(recs, tl, max(1, p.limit/int64(p.procs)), own) {
		fleet[sec] += n
	}
	return maxWindow(fleet, p)
}

// exactGCRA decides the calls of recs that keep selects, from the run's
// first window on, at the moment each was decided (an answer from Redis at
// the middle of its call, one made in the process at its end), with an
// exact GCRA of limit a second and a burst of limit, and returns what it
// admits in each measured window.
func exactGCRA(recs []rateRec, tl timeline, limit int64, keep func(rateRec) bool) map[int64]int64 {
	var at []time.Time
	for _, r := range recs {
		if r.end.Before(tl.t0) || !keep(r) {
			continue
		}
		t := r.end
		if r.d.src == srcStore {
			t = r.start.Add(r.end.Sub(r.start) / 2)
		}
		at = append(at, t)
	}
	slices.SortFunc(at, time.Time.Compare)
	T := time.Second / time.Duration(limit)
	tau := time.Duration(limit-1) * T
	var tat time.Time
	byWin := map[int64]int64{}
	for _, t := range at {
		if tat.Sub(t) > tau {
			continue
		}
		if tat.Before(t) {
			tat = t
		}
		tat = tat.Add(T)
		if tl.measured(t.Unix()) {
			byWin[t.Unix()]++
		}
	}
	return byWin
}

// maxWindow is the largest count of byWin as a multiple of L.
func maxWindow(byWin map[int64]int64, p params) float64 {
	var m int64
	for _, n := range byWin {
		m = max(m, n)
	}
	return float64(m) / float64(p.limit)
}

// calibration counts the admissions by Redis in the calibration window (the
// only whole window of recs), and the calls not answered by Redis.
func calibration(recs []rateRec) (admitted, other int64) {
	if len(recs) == 0 {
		return -1, 0
	}
	w := slices.MinFunc(recs, func(a, b rateRec) int { return a.start.Compare(b.start) }).start.Add(time.Second / 2).Unix()
	for _, r := range recs {
		if r.d.src != srcStore {
			other++
			continue
		}
		if r.d.allowed && r.window() == w {
			admitted++
		}
	}
	return admitted, other
}

// gateStats are the figures of a gate scenario, in multiples of C.
type gateStats struct {
	acquires, grants, degradedGrants, refused, errors int64
	lostLeases, releaseFailed                         int64
	// Held at once (the harness's count): the largest, the 99th percentile
	// over time, the largest within the fault and before it.
	max, p99, maxInside, maxBefore float64
	grantsSteady, grantsFault      float64 // per second
	steadyP50                      time.Duration
	openN                          int
	openP50, openP99               time.Duration
	// exact, recovery and their oks: as rateStats' (see measureGate).
	exact, recovery    time.Duration
	exactOK, recovered bool
	check              gateCheck
}

// measureGate measures a gate run. uncarried is each process's
// LocalStats().Uncarried over the run. Exact accounting is back when no
// process holds a permit Redis does not count (uncarried FailLocal weight;
// a FailOpen permit, never counted, until released), no grant is made
// without Redis, and the fleet holds C at most. The stricter reading
// (recovery) is the last decision not made by Redis, a refusal too (the
// share's while recovering), and a degraded permit's release.
func measureGate(recs []gateRec, uncarried ledger, tl timeline, p params, policy breaker.Policy, check gateCheck) gateStats {
	s := gateStats{check: check}
	C := float64(gateLimit)
	type ev struct {
		t time.Time
		d int
	}
	var evs []ev
	var steady []time.Duration
	var inFault, inSteady int64
	last, exactLast := tl.returnAt, tl.returnAt
	firstOpen := map[int]time.Time{}
	for _, r := range recs {
		if tl.faulty() && r.state == breaker.StateOpen && !r.start.Before(tl.faultAt) && r.start.Before(tl.returnAt) {
			if t, ok := firstOpen[r.proc]; !ok || r.start.Before(t) {
				firstOpen[r.proc] = r.start
			}
		}
	}
	var open []time.Duration
	for _, r := range recs {
		s.acquires++
		switch {
		case r.granted:
			s.grants++
			evs = append(evs, ev{r.end, +1}, ev{r.done, -1})
			if r.src == srcDegraded {
				s.degradedGrants++
			}
		case r.refused:
			s.refused++
		}
		if r.src == srcError {
			s.errors++
		}
		if r.lost {
			s.lostLeases++
		}
		if r.releaseFailed {
			s.releaseFailed++
		}
		isSteady := r.start.Sub(tl.t0) >= time.Second && (!tl.faulty() || r.start.Before(tl.faultAt))
		if isSteady {
			steady = append(steady, r.end.Sub(r.start))
			if r.granted {
				inSteady++
			}
		}
		if tl.faulty() && r.granted && !r.start.Before(tl.faultAt) && r.start.Before(tl.returnAt) {
			inFault++
		}
		if from, ok := firstOpen[r.proc]; ok && !r.start.Before(from) && r.start.Before(tl.returnAt) {
			open = append(open, r.end.Sub(r.start))
		}
		if tl.faulty() && !r.start.Before(tl.returnAt) && r.src != srcStore && r.end.After(last) {
			last = r.end // a grant or refusal made without Redis, or an error
		}
		if tl.faulty() && r.granted && r.src == srcDegraded && r.done.After(tl.returnAt) && r.done.After(last) {
			last = r.done // a permit granted without Redis, still held
		}
		if tl.faulty() && r.granted && r.src == srcDegraded {
			exactLast = later(exactLast, r.end) // a grant made without Redis
			if policy == breaker.FailOpen {
				exactLast = later(exactLast, r.done) // a FailOpen permit: never counted by Redis
			}
		}
	}
	stillUp := false
	for i := range uncarried {
		back, up := uncarried.backToZero(i)
		stillUp = stillUp || up
		if back.After(exactLast) {
			exactLast = back // the last of the process's FailLocal weight counted (carried or released)
		}
	}
	s.steadyP50 = pct(steady, 50)
	s.openN = len(open)
	s.openP50, s.openP99 = pct(open, 50), pct(open, 99)
	if tl.faulty() {
		s.grantsSteady = float64(inSteady) / tl.faultAt.Sub(tl.t0.Add(time.Second)).Seconds()
		s.grantsFault = float64(inFault) / tl.returnAt.Sub(tl.faultAt).Seconds()
	} else {
		s.grantsSteady = float64(inSteady) / tl.end.Sub(tl.t0.Add(time.Second)).Seconds()
	}

	// The held count as a step function of time.
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(a.t.Compare(b.t), cmp.Compare(a.d, b.d)) })
	from, to := tl.t0.Add(time.Second), tl.end
	level := 0
	var levels []float64 // per 1ms of measured time: the level (for the percentile)
	var prev time.Time
	over := false
	for _, e := range evs {
		if e.t.After(from) && e.t.Before(to) && !prev.IsZero() {
			since := prev
			if since.Before(from) {
				since = from
			}
			for n := e.t.Sub(since) / time.Millisecond; n > 0; n-- {
				levels = append(levels, float64(level)/C)
			}
		}
		level += e.d
		prev = e.t
		if e.t.Before(from) || !e.t.Before(to) {
			continue
		}
		x := float64(level) / C
		s.max = max(s.max, x)
		if tl.faulty() && !e.t.Before(tl.faultAt) && e.t.Before(tl.returnAt) {
			s.maxInside = max(s.maxInside, x)
		}
		if !tl.faulty() || e.t.Before(tl.faultAt) {
			s.maxBefore = max(s.maxBefore, x)
		}
		if tl.faulty() && !e.t.Before(tl.returnAt) {
			if level > gateLimit {
				over = true
			} else if over {
				over = false
				last, exactLast = later(last, e.t), later(exactLast, e.t) // back within C
			}
		}
	}
	s.p99 = pctF(levels, 99)
	if tl.faulty() {
		s.recovery = last.Sub(tl.returnAt)
		s.recovered = !over && last.Before(tl.end.Add(-time.Second))
		s.exact = exactLast.Sub(tl.returnAt)
		s.exactOK = !over && !stillUp && exactLast.Before(tl.end.Add(-time.Second))
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// pct returns the q-th percentile of ds (0 if empty).
func pct(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

func pctF(xs []float64, q int) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(float64(len(s)*q)/100))-1)]
}

func maxF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}
