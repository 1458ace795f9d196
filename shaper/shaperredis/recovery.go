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
//     (seed): after each decision Redis answers, the key's local share holds
//     at most its part of what Redis says remains (Remaining × share / limit),
//     so an outage starts from what the fleet has left, not from a full share;
//   - after an outage, recovers: for as long as the local share takes to
//     forget what it admitted (one period of the share: its window, or its
//     burst's worth of its rate; two windows for the sliding counter),
//     counted from the last decision the share made, a decision must be
//     admitted by the local share and then by Redis (a Redis refusal gives
//     the share's charge back), so each process keeps to its share while
//     Redis has not heard of the outage;
//   - carries the outage's debt into Redis (GCRA and token bucket only,
//     whose state is not windowed): the first decision Redis answers for a
//     key the share decided during the outage charges Redis once more with
//     what the share holds beyond that decision, at most what Redis has left,
//     so that Redis does not hand out a whole burst the fleet already spent.
//     The window algorithms forget the outage with their window, which the
//     recovery covers.
//
// The cost: while Redis answers, two in-process decisions of the share per
// decision; while recovering, each process is held to its share (a process
// busier than its share is refused for up to one period after an outage);
// one extra round trip per key carried, once per outage; at most maxCarry
// keys are remembered for it.
type recovery struct {
	epoch  time.Time
	forget time.Duration // how long the local share remembers an admission
	until  atomic.Int64  // end of the recovery, ns since epoch
	local  int64         // the share's burst or window count
	carry  bool          // GCRA or token bucket: the debt is carried

	mu      sync.Mutex
	pending map[string]int64 // cost the share admitted per key without Redis, not yet carried
	has     atomic.Bool      // pending is not empty
}

// maxCarry bounds the keys remembered for a carry: an outage over a huge
// key space remembers the first maxCarry.
const maxCarry = 1 << 16

func newRecovery(kind algoKind, ll shaper.Limit) *recovery {
	b := rateconv.Burst(ll.Rate.Count, ll.Burst)
	r := &recovery{epoch: time.Now(), local: b}
	switch kind {
	case kindGCRA, kindTokenBucket:
		// The time to earn the whole burst back at the share's rate.
		r.forget = time.Duration(float64(ll.Rate.Period) * float64(b) / float64(ll.Rate.Count))
		r.carry = true
	case kindSlidingCounter:
		r.forget = 2 * ll.Rate.Period // the previous window weighs on the current one
	default:
		r.forget = ll.Rate.Period
	}
	return r
}

func (r *recovery) now() int64 { return int64(time.Since(r.epoch)) }

// recovering reports whether the local share made a decision less than
// forget ago.
func (r *recovery) recovering() bool { return r.until.Load() > r.now() }

// outage records a decision the local share made for key without Redis:
// admitted is its cost if it admitted it, else 0.
func (r *recovery) outage(key string, admitted int64) {
	now := r.now()
	fresh := r.until.Swap(now+int64(r.forget)) <= now
	if !r.carry || admitted == 0 {
		return
	}
	r.mu.Lock()
	if r.pending == nil || fresh && r.has.Load() {
		// A new outage: keys of an earlier one not decided since were
		// forgotten by both.
		r.pending = make(map[string]int64)
	}
	if _, ok := r.pending[key]; ok || len(r.pending) < maxCarry {
		r.pending[key] += admitted
		r.has.Store(true)
	}
	r.mu.Unlock()
}

// take returns the cost the share admitted for key without Redis since its
// last carry, and forgets it.
func (r *recovery) take(key string) int64 {
	if !r.has.Load() {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.pending[key]
	if ok {
		delete(r.pending, key)
		r.has.Store(len(r.pending) > 0)
	}
	return n
}

// seed brings key's local share down to its part of what Redis says
// remains (rem of redisMax): the share admits at most rem × local /
// redisMax if the outage begins now.
func (r *recovery) seed(local *shaper.Meter, key string, rem, redisMax int64) {
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
// have too) nor than rem, what Redis has left: one more decision, best
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
