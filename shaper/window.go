package shaper

// NewFixedWindow returns a keyed fixed-window counter: time is cut into windows
// of length lim.Rate.Period aligned to the Unix epoch, and each key may use
// lim.Rate.Count per window.
//
// Policy it answers: "Count per calendar-like window; simplicity over precision".
// Bursts are allowed up to Count and then rejected until the window ends. It is not
// a rolling limit: as with any fixed window, a client can use the whole quota at
// the end of one window and again at the start of the next, so up to 2×Count can
// pass in a short span around a boundary. Memory is O(1) per key (two int64s).
//
// Arithmetic (integer µs):
//
//	P = Rate.Period in µs, N = Rate.Count; state: start (µs), count.
//	now = max(now, start);  w = now − (now mod P)  (floor)
//	w ≠ start: start = w, count = 0
//	count + n > N: deny; retry = start + P − now₀
//	else count += n
//	remaining = max(N − count, 0);  reset = start + P − now₀ if count > 0, else 0
//
// where now₀ is the call's own time: a call dated before the window's start is
// decided in that window and told the whole wait.
//
// SetLimit: a new Count applies to the counts already recorded in the current
// window; a new Period starts a new window for each key.
//
// lim.Burst must be 0 or lim.Rate.Count. It panics on an invalid limit, as
// [NewMeter] does.
func NewFixedWindow(lim Limit) *Meter {
	c := newCore[fwState]("NewFixedWindow", lim, newFW)
	return &Meter{c: c, clock: &c.clock, fw: c}
}

type fwState struct {
	start, count int64
}

type fwAlgo struct {
	lim  Limit
	p, n int64
}

func newFW(what string, lim Limit) *fwAlgo {
	p, n, _ := lim.validate(what, true)
	lim.Burst = n // explicit in Decision.Limit and Limit()
	return &fwAlgo{lim: lim, p: p, n: n}
}

func (a *fwAlgo) max() int64   { return a.n }
func (a *fwAlgo) limit() Limit { return a.lim }

// windowStart returns now rounded down to a multiple of p.
func windowStart(now, p int64) int64 {
	m := now % p
	if m < 0 {
		m += p
	}
	return now - m
}

func (a *fwAlgo) idle(s *fwState, now int64) bool { return s.count == 0 || now >= s.start+a.p }

func (a *fwAlgo) stamp(s *fwState) int64 { return s.start }

// refund uncounts n if the admission's window is still the key's window:
// once a window is over its count no longer matters.
func (a *fwAlgo) refund(s *fwState, _, n, at int64) bool {
	if s.start != at || s.count == 0 {
		return false
	}
	s.count = max(s.count-n, 0)
	return true
}

func (a *fwAlgo) decide(s *fwState, fresh bool, now, n int64) bool {
	if !fresh && now < s.start {
		now = s.start
	}
	if w := windowStart(now, a.p); fresh || w != s.start {
		s.start, s.count = w, 0
	}
	if s.count+n > a.n {
		return false
	}
	s.count += n
	return true
}

func (a *fwAlgo) report(s *fwState, now, _ int64, ok bool) (remaining, retryUS, resetUS int64) {
	end := s.start + a.p - now // from the call's own time, even if before start
	if !ok {
		retryUS = end
	}
	if s.count > 0 {
		resetUS = end
	}
	return max(a.n-s.count, 0), retryUS, resetUS
}

// NewSlidingCounter returns a keyed sliding-window counter (a weighted window,
// which approximates a rolling one) admitting about lim.Rate.Count per rolling
// lim.Rate.Period for every key: it keeps the counts of the current and the
// previous fixed window and estimates the count over the rolling window as
//
//	C_estimated = C_current + C_previous · (1 − (t − t_window_start) / window_size)
//
// Policy it answers: "about Count per rolling Period, in O(1) memory". Bursts are
// allowed up to Count and then rejected; it removes most of the fixed window's
// boundary burst. The estimate assumes the previous window's events were spread
// evenly. If they were, no rolling window of length Period holds more than Count
// (+1 for rounding); in the worst case (the previous window's events all at its very
// end) a rolling window can hold up to 2×Count, the same bound as [NewFixedWindow], but
// only for that adversarial pattern. Memory is O(1) per key (three int64s).
//
// Arithmetic (integer µs, no division in the test, so no rounding):
//
//	P = Rate.Period in µs, N = Rate.Count; state: start, prev, cur.
//	now = max(now, start);  w = now − (now mod P)
//	w ≠ start: prev = cur if w = start + P else 0;  cur = 0;  start = w
//	e = now − start
//	(cur + n)·P + prev·(P − e) ≤ N·P: allow, cur += n
//	remaining = max(0, ⌊(N·P − prev·(P−e))/P⌋ − cur)
//	retry (denied), with r = N − cur − n:
//	  r ≥ 0: (P − e) − ⌊r·P/prev⌋
//	  r < 0: (P − e) + max(0, P − ⌊(N − n)·P/cur⌋)
//	reset = start + 2P − now if cur > 0; start + P − now if prev > 0; else 0
//	a call dated before start (now₀ < start): retry and reset + (start − now₀)
//
// The retry is exact for this decision function (the admission test is linear in
// e within a window, and the next window starts with prev = cur).
//
// SetLimit: a new Count applies to the counts already recorded; a new Period
// starts new windows.
//
// lim.Burst must be 0 or lim.Rate.Count. It panics on an invalid limit, as
// [NewMeter] does.
func NewSlidingCounter(lim Limit) *Meter {
	c := newCore[scState]("NewSlidingCounter", lim, newSC)
	return &Meter{c: c, clock: &c.clock, sc: c}
}

type scState struct {
	start, prev, cur int64
}

type scAlgo struct {
	lim  Limit
	p, n int64
	np   int64 // N·P
}

func newSC(what string, lim Limit) *scAlgo {
	p, n, _ := lim.validate(what, true)
	lim.Burst = n // explicit in Decision.Limit and Limit()
	return &scAlgo{lim: lim, p: p, n: n, np: n * p}
}

func (a *scAlgo) max() int64   { return a.n }
func (a *scAlgo) limit() Limit { return a.lim }

func (a *scAlgo) idle(s *scState, now int64) bool {
	return (s.cur == 0 && s.prev == 0) || now >= s.start+2*a.p
}

func (a *scAlgo) stamp(s *scState) int64 { return s.start }

// refund uncounts n from the window the admission was counted in, whether it
// is still the current window or has become the previous one.
func (a *scAlgo) refund(s *scState, _, n, at int64) bool {
	switch {
	case s.start == at && s.cur > 0:
		s.cur = max(s.cur-n, 0)
	case s.start == at+a.p && s.prev > 0:
		s.prev = max(s.prev-n, 0)
	default:
		return false
	}
	return true
}

func (a *scAlgo) decide(s *scState, fresh bool, now, n int64) bool {
	if !fresh && now < s.start {
		now = s.start
	}
	if w := windowStart(now, a.p); fresh || w != s.start {
		if !fresh && w == s.start+a.p {
			s.prev = s.cur
		} else {
			s.prev = 0
		}
		s.start, s.cur = w, 0
	}
	if (s.cur+n)*a.p+s.prev*(a.p-(now-s.start)) > a.np {
		return false
	}
	s.cur += n
	return true
}

func (a *scAlgo) report(s *scState, now, n int64, ok bool) (remaining, retryUS, resetUS int64) {
	late := max(s.start-now, 0) // a call dated before start was decided at start
	now += late
	e := now - s.start
	weighted := s.prev * (a.p - e)
	if !ok {
		if r := a.n - s.cur - n; r >= 0 {
			retryUS = a.p - e - r*a.p/s.prev
		} else {
			retryUS = a.p - e + max(0, a.p-(a.n-n)*a.p/s.cur)
		}
		retryUS += late
	}
	remaining = max(0, (a.np-weighted)/a.p-s.cur)
	switch {
	case s.cur > 0:
		resetUS = late + s.start + 2*a.p - now
	case s.prev > 0:
		resetUS = late + s.start + a.p - now
	}
	return remaining, retryUS, resetUS
}
