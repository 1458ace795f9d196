package shaperredis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/rateconv"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/floodgate-go/floodgate/shaper"
)

// The edges of an outage under FailLocal. The local share and Redis count
// apart, so without care each edge of an outage admits the fleet's limit
// twice over in one window: at its start, the local shares are full while
// Redis has just admitted the whole limit; when Redis returns, its count
// (or GCRA state) never saw what the shares admitted meanwhile. A meter
// under FailLocal therefore
//
//   - keeps its local share in step with the fleet while Redis answers
//     (follow): after each decision Redis answers, the key's local share holds
//     at most its part of what Redis says remains (Remaining × share / limit),
//     so an outage starts from what the fleet has left, not from a full share;
//   - after an outage, recovers each key the share decided without Redis:
//     for as long as the share takes to forget what it admitted (one period
//     of the share: its window, or its burst's worth of its rate; two
//     windows for the sliding counter), counted from the share's last
//     decision of that key, a decision of the key must be admitted by the
//     local share and then by Redis (a Redis refusal gives
//     the share's charge back), so each process keeps to its share while
//     Redis has not heard of the outage;
//   - carries the outage's debt into Redis (GCRA, token bucket and fixed
//     window): the first decision Redis admits for a key the share decided
//     during the outage charges Redis once more with what the share admitted
//     without Redis since the last carry, as far as Redis does not count it
//     (a fixed window: what the share admitted in the current window, both
//     windows being aligned to the Unix epoch; a GCRA or token bucket: down
//     to the share's part of the fleet, see carryDebt), so that Redis counts
//     what the fleet already spent instead of handing it out again. The
//     sliding algorithms, whose previous window weighs on the current one,
//     are not carried: they forget the outage with their windows, which the
//     recovery covers.
//
// The cost: while Redis answers, two in-process decisions of the share per
// decision; while recovering, each process is held to its share (a process
// busier than its share is refused for up to one period after an outage, on
// the keys it decided without Redis; a key it did not is Redis's alone);
// one extra round trip per key carried, once per outage; at most maxCarry
// keys are remembered.
type recovery struct {
	epoch  time.Time
	forget time.Duration // how long the local share remembers an admission
	until  atomic.Int64  // end of the latest key's recovery, ns since epoch
	local  int64         // the share's burst or window count
	carry  bool          // the debt is carried (GCRA, token bucket, fixed window)
	window bool          // fixed window: the debt is this window's

	// failing is whether the share decided the latest decision Redis did
	// not answer, and Redis has not answered one since: the outage may not
	// be over, and a decision may wait its CallTimeout on Redis.
	failing atomic.Bool

	mu   sync.Mutex
	keys map[string]keyRecovery // the keys the share decided without Redis
	n    atomic.Int64           // len(keys), stored under mu
}

// keyRecovery is one key's recovery: its end, and the cost the share
// admitted for it without Redis, not yet carried (GCRA, token bucket).
type keyRecovery struct{ until, owed int64 }

// maxCarry bounds the keys remembered: an outage over a huge key space
// keeps the edges of the first maxCarry keys it decided.
const maxCarry = 1 << 16

func newRecovery(kind algoKind, ll shaper.Limit) *recovery {
	b := rateconv.Burst(ll.Rate.Count, ll.Burst)
	r := &recovery{epoch: time.Now(), local: b}
	switch kind {
	case kindGCRA, kindTokenBucket:
		// The time to earn the whole burst back at the share's rate.
		r.forget = time.Duration(float64(ll.Rate.Period) * float64(b) / float64(ll.Rate.Count))
		r.carry = true
	case kindFixedWindow:
		r.forget = ll.Rate.Period
		r.carry, r.window = true, true // the share's window is Redis's: its count is this window's debt
	case kindSlidingCounter:
		r.forget = 2 * ll.Rate.Period // the previous window weighs on the current one
	default:
		r.forget = ll.Rate.Period
	}
	return r
}

func (r *recovery) now() int64 { return int64(time.Since(r.epoch)) }

// recovering reports whether the local share decided key without Redis less
// than forget ago. Once no key is recovering, the keys are forgotten.
func (r *recovery) recovering(key string) bool {
	now := r.now()
	if r.until.Load() <= now { // fast path: no key is recovering
		if r.n.Load() > 0 {
			r.mu.Lock()
			if r.until.Load() <= now {
				clear(r.keys)
				r.n.Store(0)
			}
			r.mu.Unlock()
		}
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if ok && e.until <= now {
		delete(r.keys, key) // forgotten by the share, and paid back to Redis at its rate
		r.n.Store(int64(len(r.keys)))
		return false
	}
	return ok
}

// outage records a decision the local share made for key without Redis:
// admitted is its cost if it admitted it, else 0.
func (r *recovery) outage(key string, admitted int64) {
	r.failing.Store(true)
	until := r.now() + int64(r.forget)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]keyRecovery)
	}
	e, ok := r.keys[key]
	if !ok && len(r.keys) >= maxCarry {
		return
	}
	e.until = until
	if r.carry {
		e.owed += admitted
	}
	r.keys[key] = e
	r.n.Store(int64(len(r.keys)))
	if r.until.Load() < until {
		r.until.Store(until) // under r.mu: never moves back
	}
}

// take returns the cost the share admitted for key without Redis since its
// last carry, and forgets it.
func (r *recovery) take(key string) int64 {
	if !r.carry {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok || e.owed == 0 {
		return 0
	}
	n := e.owed
	e.owed = 0
	r.keys[key] = e
	return n
}

// follow brings key's local share down to its part of what Redis says
// remains (rem of redisMax): the share admits at most rem × local /
// redisMax if the outage begins now.
func (r *recovery) follow(local *shaper.Meter, key string, rem, redisMax int64) {
	target := rem
	if redisMax > 0 {
		target = int64(float64(rem) * float64(r.local) / float64(redisMax))
	}
	d, err := local.AllowN(key, 0)
	if err != nil || d.Remaining <= target {
		return
	}
	local.AllowN(key, d.Remaining-target)
}

// allowRecovering decides c while recovering from an outage: the local
// share first (its refusal is the answer, Degraded, with no round trip),
// then Redis, whose refusal gives the share's charge back. If Redis cannot
// answer, the share decides c again when it is answered, as under the
// outage (see call.fallback).
//
// The share's room is taken before the call while Redis answers, so that
// concurrent calls cannot all find it. While Redis's latest call failed
// (the outage's first seconds, before the breaker opens, when every call
// waits its CallTimeout), the share is only looked at, and its room taken
// once Redis has admitted c: a call waiting on a frozen Redis then holds
// nothing on the share, which would refuse the calls the open breaker
// answers at once meanwhile and admit them all later, when the waiting
// calls give their room back (admissions moved from one window into the
// next, as the callers see them).
func (m *Meter) allowRecovering(ctx context.Context, c call) (shaper.Decision, error) {
	hold := true
	if m.rec.failing.Load() {
		if pd, err := m.local.AllowN(c.key, 0); err == nil && pd.Remaining >= c.n {
			hold = false // room on the share: looked at, taken once Redis admits
		}
	}
	if hold { // (with no room, this is the share's refusal)
		ld, err := m.local.AllowN(c.key, c.n)
		if err != nil || !ld.Allowed {
			ld.Degraded = true
			return ld, err
		}
		c.pre = &ld
	}
	r, src, err := storecall.Do(ctx, &m.st, m.policy, c.run, c.fallback)
	if src == breaker.FromFailLocal {
		m.rec.outage(c.key, admittedCost(r.d, err, c.n))
		r.d.Degraded = true
		return r.d, err
	}
	if err == nil {
		m.rec.failing.Store(false) // Redis answered
	}
	if err != nil || !r.d.Allowed {
		if c.pre != nil {
			m.local.Refund(ctx, c.key, c.n, *c.pre)
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return shaper.Decision{}, cerr
			}
			return shaper.Decision{}, err
		}
		return r.d, nil
	}
	if c.pre == nil {
		m.local.AllowN(c.key, c.n) // the room found before the call
	}
	if owed := m.rec.take(c.key); owed > 0 {
		m.carryDebt(ctx, c, owed, r.d.Remaining)
	}
	return r.d, nil
}

// carryDebt charges Redis, for c's key, with what the local share admitted
// without Redis (owed, since the last carry), as far as Redis does not
// count it yet: one more decision, best effort (a failure leaves the debt
// uncarried). rem is what Redis has left after c.
//
//   - A fixed window: what the share admitted in the current window (both
//     windows are aligned to the Unix epoch), beyond c's own admission.
//   - A GCRA or token bucket: Redis is brought down to the share's part of
//     the fleet, as follow does the other way: at most the share's
//     remaining × Redis's burst / the share's, what Redis would have left
//     if every process had spent as this one did. After an outage of the
//     whole fleet, Redis, idle meanwhile, has its whole burst, while an
//     exact limiter fed every admission has none; the share alone knows only
//     its own part of what the fleet spent, and forgets what is older than
//     its burst, but every process spent alike. A process cut off alone
//     finds Redis spent already by the others, and carries little.
//     Charging a Redis the rest of the fleet left idle errs the safe way:
//     fewer admissions, for at most one burst's time.
func (m *Meter) carryDebt(ctx context.Context, c call, owed, rem int64) {
	d, err := m.local.AllowN(c.key, 0)
	if err != nil {
		return
	}
	var debt int64
	if m.rec.window {
		debt = min(owed, m.rec.local-d.Remaining-c.n, rem)
	} else {
		target := int64(float64(d.Remaining) * float64(c.rl.max) / float64(m.rec.local))
		debt = min(owed, rem-target)
	}
	if debt <= 0 {
		return
	}
	cc := call{m: m, rl: c.rl, key: c.key, n: debt}
	if _, _, err := storecall.Do(ctx, &m.st, breaker.FailClosed, cc.run, nil); err == nil {
		m.stats[mCarried].Add(uint64(debt))
	}
}

// admittedCost is n if the local share admitted it (d, err), else 0.
func admittedCost(d shaper.Decision, err error, n int64) int64 {
	if err == nil && d.Allowed {
		return n
	}
	return 0
}
