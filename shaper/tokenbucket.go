package shaper

// NewTokenBucket returns a keyed token bucket meter with capacity lim.Burst
// (Rate.Count if zero) refilled at lim.Rate, one bucket per key, with the
// semantics of the usual Redis Lua token-bucket script (refill on every call, then take): a bucket holds at
// most Burst tokens, earns Rate tokens over time up to that capacity, starts
// full, and admits a call of cost n only if n tokens are there; the clock
// never moves backwards (a call dated before the last one is taken at the
// last one's time).
//
// Policy it answers: "bursts up to the capacity are fine, but average use is limited
// to Rate". Bursts are allowed up to Burst, then rejected; quiet time refills the
// bucket but never above Burst. This is not a strict rolling-window limit: over a
// period P a key can get Burst + Rate·P. Memory is O(1) per key (three int64s). It
// admits exactly what GCRA ([NewMeter]) admits; it exists for users who think in tokens and
// for parity with that script.
//
// Arithmetic (integer µs, exact; no floats, unlike that script's refill_rate_ms):
//
//	P = Rate.Period in µs, C = Rate.Count, K = Burst (capacity).
//	Tokens are scaled by P: one token = P units; refill = C units per µs.
//	state: tokens (scaled), last (µs), per (the P the tokens are scaled by).
//	fresh:  tokens = K·P, last = now
//	else:   if per ≠ P: tokens = ⌊tokens/per⌋·P      (the limit changed)
//	        tokens = min(tokens, K·P);  now = max(now, last);  e = now − last
//	        tokens = K·P if e ≥ ⌈(K·P − tokens)/C⌉ else tokens + e·C;  last = now
//	tokens ≥ n·P: allow, tokens −= n·P
//	remaining = ⌊tokens/P⌋, reset = late + ⌈(K·P − tokens)/C⌉,
//	retry (when denied) = late + ⌈(n·P − tokens)/C⌉
//	where late = last − now if the call's now was before last, else 0
//
// The refill is written on a denial too, as that script does, so a denial
// moves the key's time forward; a zero-cost peek writes nothing, not even its
// time. retry and reset count from the call's own time, so a call dated before
// the last one is told the whole wait.
//
// SetLimit changes the capacity and refill rate for every key: balances are
// rescaled to the new units and clamped to the new capacity on each key's next
// call. It panics on an invalid limit, as [NewMeter] does.
func NewTokenBucket(lim Limit) *Meter {
	c := newCore[tbState]("NewTokenBucket", lim, newTB)
	return &Meter{c: c, clock: &c.clock, tb: c}
}

type tbState struct {
	tokens int64 // scaled by per
	last   int64 // µs
	per    int64 // P (µs) when tokens was written; 0 for a fresh state
}

type tbAlgo struct {
	lim     Limit
	p, c, k int64
	full    int64 // K·P
	fillUS  int64 // ⌈K·P/C⌉: time to fill an empty bucket
}

func newTB(what string, lim Limit) *tbAlgo {
	p, c, k := lim.validate(what, false)
	lim.Burst = k // explicit in Decision.Limit and Limit()
	return &tbAlgo{lim: lim, p: p, c: c, k: k, full: k * p, fillUS: ceilDiv(k*p, c)}
}

func (a *tbAlgo) max() int64   { return a.k }
func (a *tbAlgo) limit() Limit { return a.lim }

// refill brings s up to now and returns the balance.
func (a *tbAlgo) refill(s *tbState, fresh bool, now int64) {
	if fresh || s.per == 0 {
		s.tokens, s.last, s.per = a.full, now, a.p
		return
	}
	if s.per != a.p {
		s.tokens = s.tokens / s.per * a.p // whole tokens survive a unit change
		s.per = a.p
	}
	s.tokens = min(s.tokens, a.full)
	if now < s.last {
		now = s.last
	}
	// Same as: full if e ≥ ⌈(K·P − tokens)/C⌉, else tokens + e·C; without the
	// division (e < fillUS keeps e·C below K·P + C).
	if e := now - s.last; e >= a.fillUS {
		s.tokens = a.full
	} else {
		s.tokens = min(s.tokens+e*a.c, a.full)
	}
	s.last = now
}

func (a *tbAlgo) idle(s *tbState, now int64) bool {
	if s.per != a.p {
		return false // let the next call convert it
	}
	return now >= s.last && now-s.last >= ceilDiv(a.full-min(s.tokens, a.full), a.c)
}

func (a *tbAlgo) stamp(*tbState) int64 { return 0 }

// refund puts n tokens back, up to the capacity, after the refill up to now.
func (a *tbAlgo) refund(s *tbState, now, n, _ int64) bool {
	a.refill(s, false, now)
	if s.tokens == a.full {
		return false
	}
	s.tokens = min(s.tokens+n*a.p, a.full)
	return true
}

func (a *tbAlgo) decide(s *tbState, fresh bool, now, n int64) bool {
	a.refill(s, fresh, now)
	if need := n * a.p; s.tokens >= need {
		s.tokens -= need
		return true
	}
	return false
}

func (a *tbAlgo) report(s *tbState, now, n int64, ok bool) (remaining, retryUS, resetUS int64) {
	// A call dated before the state's time was decided at last: its waits
	// count from its own time.
	late := max(s.last-now, 0)
	if !ok {
		retryUS = late + ceilDiv(n*a.p-s.tokens, a.c)
	}
	return s.tokens / a.p, retryUS, late + ceilDiv(a.full-s.tokens, a.c)
}
