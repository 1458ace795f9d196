package shaper

// NewMeter returns a GCRA meter (the generic cell rate algorithm, the leaky
// bucket used as a meter) enforcing lim for every key: the default algorithm.
//
// Policy it answers: "at most Rate in the long run, with up to Burst at once after a
// quiet period; over that, reject now with an exact retry-after". Bursts are allowed
// up to Burst and then rejected; admitted traffic is spread at no more than Rate.
// The state per key is one theoretical arrival time (two int64s), so memory is O(1)
// per key and there is no window boundary to exploit. It admits the same sequences
// as [NewTokenBucket] with capacity Burst; prefer GCRA, whose state is a single
// time that is trivially "idle" once it is in the past.
//
// Arithmetic (integer µs, exact; the Redis store runs the same lines in Lua):
//
//	P = Rate.Period in µs, C = Rate.Count, B = Burst; emission interval T = P/C µs.
//	Times are scaled by C so T·C = P is an integer; τ = B·P.
//	state: tat (µs), rem ∈ [0, C): the theoretical arrival time is tat + rem/C;
//	       last (µs): the time of the admission that wrote them.
//	rem = min(rem, C−1);  if (tat − last)·C + rem > τ: tat + rem/C = last + τ/C
//	d  = (tat − now)·C + rem, or 0 if tat < now
//	nd = d + n·P
//	nd > τ: deny;  retry = ⌈(nd−τ)/C⌉, remaining = max(τ−d, 0)/P, reset = ⌈d/C⌉
//	else:   allow; tat = now + ⌊nd/C⌋, rem = nd mod C, last = now,
//	        remaining = ⌊(τ−nd)/P⌋, reset = ⌈nd/C⌉
//
// An admission leaves a debt of at most τ after its time (tat − last ≤ τ/C), so
// the cap in the second line only acts after a limit change: the stored state is
// read as if its debt had been capped to the new burst when it was written. After
// SetLimit from PerHour(1) to PerSecond(10) (burst 10), a key that used its hour
// at t0 has used its whole new burst at t0: it is admitted again at t0 + 100 ms, as
// the token bucket and x/time/rate do, and a denial before that says exactly when.
// The cap is a function of the stored state only, not of now, so every denial's
// retry is exact and stays true as time passes; a denial writes nothing.
//
// d is not capped otherwise: a call dated before the state's time (AllowNAt with
// an earlier time, or a Redis clock that steps back) owes the whole debt and is
// told the whole wait from its own time. Debt is never forgiven: whatever the order
// of the times, no half-open interval of length T holds more than Burst admitted. A call dated far
// ahead of the others is admitted and moves the key's time there: calls at the
// real time then wait for it, and are told so.
//
// It panics if lim.Rate.Count ≤ 0, lim.Rate.Period < 1µs, lim.Burst < 0, or if
// Burst×Period or Count×Period exceeds 2^53 µs (about 285 years); SetLimit
// panics alike.
func NewMeter(lim Limit) *Meter {
	c := newCore[gcraState]("NewMeter", lim, newGCRA)
	return &Meter{c: c, clock: &c.clock, gcra: c}
}

type gcraState struct {
	tat  int64 // µs
	rem  int64 // in units of 1/C µs
	last int64 // µs: the time of the admission that wrote tat and rem
}

type gcraAlgo struct {
	lim       Limit
	p, c, b   int64
	tau       int64 // B·P
	tauMicros int64 // ⌊τ/C⌋ + 1: a (tat − now) at least this is a debt d > τ
	tUS       int64 // T = P/C when C divides P (most limits), else 0
	tauUS     int64 // B·T when tUS > 0
}

func newGCRA(what string, lim Limit) *gcraAlgo {
	p, c, b := lim.validate(what, false)
	lim.Burst = b // explicit in Decision.Limit and Limit()
	a := &gcraAlgo{lim: lim, p: p, c: c, b: b, tau: b * p, tauMicros: b*p/c + 1}
	if p%c == 0 {
		a.tUS, a.tauUS = p/c, b*(p/c)
	}
	return a
}

func (a *gcraAlgo) max() int64   { return a.b }
func (a *gcraAlgo) limit() Limit { return a.lim }

func (a *gcraAlgo) idle(s *gcraState, now int64) bool { return s.tat < now }

func (a *gcraAlgo) stamp(*gcraState) int64 { return 0 }

// refund moves the theoretical arrival time back by n·T, but never before now:
// a key's time in the past is a fresh key, and a refund never gives more.
func (a *gcraAlgo) refund(s *gcraState, now, n, _ int64) bool {
	tat, rem := a.arrival(s)
	if tat < now {
		return false // idle: nothing is owed any more
	}
	np := n * a.p // ≤ B·P
	tat, rem = tat-np/a.c, rem-np%a.c
	if rem < 0 {
		tat, rem = tat-1, rem+a.c
	}
	if tat < now {
		tat, rem = now, 0
	}
	s.tat, s.rem = tat, rem
	return true
}

// arrival returns the state's theoretical arrival time tat + rem/C under the
// current limit: as stored, but at most last + τ/C, as if the debt had been
// capped to the current burst when it was written. Without a limit change since
// that write it is the stored time (an admission leaves at most τ of debt).
func (a *gcraAlgo) arrival(s *gcraState) (tat, rem int64) {
	tat, rem = s.tat, min(s.rem, a.c-1)
	if dt := tat - s.last; dt >= a.tauMicros || dt*a.c+rem > a.tau {
		return s.last + a.tau/a.c, a.tau % a.c
	}
	return tat, rem
}

func (a *gcraAlgo) decide(s *gcraState, _ bool, now, n int64) bool {
	if a.tUS > 0 && s.rem == 0 {
		// The same arithmetic divided through by C, exact when T is a whole
		// number of µs and there is no fraction: no division on the hot path.
		nd := max(min(s.tat, s.last+a.tauUS)-now, 0) + n*a.tUS
		if nd > a.tauUS {
			return false
		}
		if n > 0 {
			s.tat, s.last = now+nd, now
		}
		return true
	}
	tat, rem := a.arrival(s)
	dt := tat - now
	if dt >= a.tauMicros {
		return false // d > τ
	}
	nd := n * a.p
	if dt >= 0 {
		nd += dt*a.c + rem
	}
	if nd > a.tau {
		return false
	}
	if n > 0 {
		s.tat, s.rem, s.last = now+nd/a.c, nd%a.c, now
	}
	return true
}

func (a *gcraAlgo) report(s *gcraState, now, n int64, ok bool) (remaining, retryUS, resetUS int64) {
	tat, rem := a.arrival(s) // after an allowed call, d is nd
	dt := tat - now
	switch {
	case dt < 0:
		return a.b, 0, 0
	case dt >= a.tauMicros:
		// d = dt·C + rem > τ: a call dated before the state's time. The
		// wait is dt + ⌈(rem + n·P − τ)/C⌉, computed without dt·C.
		return 0, dt + ceilDivSigned(rem+n*a.p-a.tau, a.c), dt + ceilDiv(rem, a.c)
	}
	d := dt*a.c + rem
	if !ok {
		retryUS = ceilDiv(d+n*a.p-a.tau, a.c)
	}
	return max(a.tau-d, 0) / a.p, retryUS, ceilDiv(d, a.c)
}

// ceilDivSigned returns ⌈a/b⌉ for any a, b > 0.
func ceilDivSigned(a, b int64) int64 {
	if a < 0 {
		return a / b // truncation toward zero is the ceiling for a < 0
	}
	return ceilDiv(a, b)
}
