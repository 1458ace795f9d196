package shaper

// NewSlidingLog returns a keyed sliding-window log: it keeps the time of every
// admitted event in the last lim.Rate.Period and admits a call only if the
// events in the rolling window (now − Period, now], plus this one, number at
// most lim.Rate.Count.
//
// Policy it answers: "never more than Count in any rolling Period, exactly". Bursts
// are allowed up to Count and then rejected; there is no boundary approximation. The
// price is memory and work: O(N) per key, where N is the number of distinct
// microseconds holding admitted events in the window, at most Rate.Count (events at
// the same microsecond share one 16-byte entry). A key's log never holds more than
// Rate.Count entries, so memory per key is bounded by 16·Count bytes plus a constant;
// choose it only where Count per key is small (traffic small
// enough to store individual timestamps).
//
// Arithmetic (integer µs): entries (ts, n), oldest first; sum = Σn.
//
//	now = max(now, newest ts)
//	drop entries with ts ≤ now − P
//	sum + n ≤ N: allow, append (now, n) (merged with an entry at the same now)
//	retry (denied): the smallest ts_i + P − now₀ such that
//	        sum − (n_0 + … + n_i) + n ≤ N
//	remaining = max(N − sum, 0);  reset = newest ts + P − now₀, or 0 if empty
//
// where now₀ is the call's own time: a call dated before the newest entry is
// decided at that entry's time and told the whole wait from its own.
//
// SetLimit: the logged events are kept and judged against the new Count and
// Period.
//
// lim.Burst must be 0 or lim.Rate.Count. It panics on an invalid limit, as
// [NewMeter] does.
func NewSlidingLog(lim Limit) *Meter {
	c := newCore[slState]("NewSlidingLog", lim, newSL)
	return &Meter{c: c, clock: &c.clock, sl: c}
}

type logEntry struct {
	ts, n int64
}

// slState is a ring buffer of entries, oldest at head.
type slState struct {
	ring []logEntry
	head int
	len  int
	sum  int64
}

func (s *slState) at(i int) *logEntry { return &s.ring[(s.head+i)%len(s.ring)] }

// push appends e, growing the ring by doubling up to limit entries (a log never
// holds more than its limit: every entry has a cost of at least 1).
func (s *slState) push(e logEntry, limit int64) {
	if s.len == len(s.ring) {
		size := max(int64(s.len)+1, min(max(4, 2*int64(len(s.ring))), limit))
		grown := make([]logEntry, size)
		for i := range s.len {
			grown[i] = *s.at(i)
		}
		s.ring, s.head = grown, 0
	}
	*s.at(s.len) = e
	s.len++
}

type slAlgo struct {
	lim  Limit
	p, n int64
}

func newSL(what string, lim Limit) *slAlgo {
	p, n, _ := lim.validate(what, true)
	lim.Burst = n // explicit in Decision.Limit and Limit()
	return &slAlgo{lim: lim, p: p, n: n}
}

func (a *slAlgo) max() int64   { return a.n }
func (a *slAlgo) limit() Limit { return a.lim }

func (a *slAlgo) idle(s *slState, now int64) bool {
	return s.len == 0 || s.at(s.len-1).ts <= now-a.p
}

func (a *slAlgo) stamp(s *slState) int64 { return s.at(s.len - 1).ts }

// refund takes n off the entry at the admission's time, removing the entry
// if nothing is left in it; an entry already out of the log has nothing left
// to give back.
func (a *slAlgo) refund(s *slState, _, n, at int64) bool {
	for i := s.len - 1; i >= 0; i-- {
		e := s.at(i)
		if e.ts < at {
			return false
		}
		if e.ts != at {
			continue
		}
		k := min(n, e.n)
		e.n -= k
		s.sum -= k
		if e.n == 0 {
			for j := i; j < s.len-1; j++ {
				*s.at(j) = *s.at(j + 1)
			}
			s.len--
		}
		return true
	}
	return false
}

func (a *slAlgo) decide(s *slState, _ bool, now, n int64) bool {
	if s.len > 0 {
		now = max(now, s.at(s.len-1).ts)
	}
	for s.len > 0 && s.at(0).ts <= now-a.p {
		s.sum -= s.at(0).n
		s.head = (s.head + 1) % len(s.ring)
		s.len--
	}
	if s.len == 0 {
		s.head, s.sum = 0, 0
		if n == 0 {
			s.ring = nil // an idle key keeps no buffer
		}
	}
	if s.sum+n > a.n {
		return false
	}
	if n > 0 {
		if s.len > 0 && s.at(s.len-1).ts == now {
			s.at(s.len - 1).n += n
		} else {
			s.push(logEntry{ts: now, n: n}, a.n)
		}
		s.sum += n
	}
	return true
}

func (a *slAlgo) report(s *slState, now, n int64, ok bool) (remaining, retryUS, resetUS int64) {
	if s.len == 0 {
		return max(a.n-s.sum, 0), 0, 0
	}
	// The waits count from the call's own time, even if it was before the
	// newest entry (the call was decided at that entry's time).
	if !ok {
		freed := int64(0)
		for i := range s.len {
			e := s.at(i)
			freed += e.n
			if s.sum-freed+n <= a.n {
				retryUS = e.ts + a.p - now
				break
			}
		}
	}
	return max(a.n-s.sum, 0), retryUS, s.at(s.len-1).ts + a.p - now
}
