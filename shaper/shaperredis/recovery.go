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
//     without Redis since the last carry, at most what the share still holds
//     beyond that decision (a fixed window's share: what it admitted in the
//     current window, both windows being aligned to the Unix epoch) and what
//     Redis has left, so that Redis counts what the fleet already spent
//     instead of handing it out again. The sliding algorithms, whose
//     previous window weighs on the current one, are not carried: they
//     forget the outage with their windows, which the recovery covers.
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
	carry  bool          // GCRA or token bucket: the debt is carried

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
		r.carry = true // the share's window is Redis's: its count is this window's debt
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
// answer, the share's admission stands, as under the outage.
func (m *Meter) allowRecovering(ctx context.Context, c call) (shaper.Decision, error) {
	ld, err := m.local.AllowN(c.key, c.n)
	if err != nil || !ld.Allowed {
		ld.Degraded = true
		return ld, err
	}
	c.pre = &ld
	r, src, err := storecall.Do(ctx, &m.st, m.policy, c.run, c.fallback)
	if src == breaker.FromFailLocal {
		m.rec.outage(c.key, c.n) // the share's admission above stands
		r.d.Degraded = true
		return r.d, err
	}
	if err != nil || !r.d.Allowed {
		m.local.Refund(ctx, c.key, c.n, ld)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return shaper.Decision{}, cerr
			}
			return shaper.Decision{}, err
		}
		return r.d, nil
	}
	if owed := m.rec.take(c.key); owed > 0 {
		m.carryDebt(ctx, c, owed, r.d.Remaining)
	}
	return r.d, nil
}

// carryDebt charges Redis, for c's key, with owed, the cost the local share
// admitted without Redis since the last carry, but no more than the share
// still holds beyond c's own admission (what it has forgotten, Redis would
// have too; a fixed window's share holds this window's admissions only)
// nor than rem, what Redis has left: one more decision, best
// effort (a failure leaves the debt uncarried).
func (m *Meter) carryDebt(ctx context.Context, c call, owed, rem int64) {
	d, err := m.local.AllowN(c.key, 0)
	if err != nil {
		return
	}
	debt := min(owed, m.rec.local-d.Remaining-c.n, rem)
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
