package distsem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/floodgate-go/floodgate/semaphore"
)

// failure holds the store and failure policy of a Semaphore: the client and
// its breaker (every Redis call goes through st), the policy for acquires,
// and the local share used by FailLocal.
type failure struct {
	st       storecall.Store
	policy   breaker.Policy
	local    *semaphore.Weighted // FailLocal only
	degraded atomic.Int64
	// outage is the weight of the permits the local share granted without
	// Redis that are still held (FailLocal): while it is not 0, a grant
	// from Redis takes room on the share first (see acquire).
	outage atomic.Int64
	// calm is when the process stops holding Redis's grants to its share
	// after its last decision without Redis (Unix ns; 0: never decided
	// without Redis): hold after it. See recovering.
	calm atomic.Int64
	hold time.Duration
}

// recovering reports whether a grant from Redis needs room on the local
// share first: while permits the share granted without Redis are held and
// not yet carried into Redis, and for hold after the process last decided
// without Redis. The other processes of the fleet find Redis again at
// different times (each when its breaker's open period ends), and until
// they have carried their permits, Redis does not know them: holding each
// process to its share meanwhile keeps the fleet within LocalShare ×
// processes.
func (f *failure) recovering() bool {
	if f.local == nil {
		return false
	}
	if f.outage.Load() > 0 {
		return true
	}
	c := f.calm.Load()
	return c != 0 && time.Now().UnixNano() < c
}

func (f *failure) init(st storecall.Store, cfg Config) {
	f.st = st
	f.policy = cfg.Policy
	if cfg.Policy == breaker.FailLocal {
		share := cfg.LocalShare
		if share == 0 {
			share = 1
		}
		f.local = semaphore.New(share, semaphore.Config{})
		// Every breaker of the fleet's configuration has ended its open
		// period within LongestOpen of Redis's return; its permits are
		// carried within carryEvery after that. At most a Lease.
		f.hold = min(st.Breaker.LongestOpen()+min(cfg.Lease/9, maxCarryEvery), cfg.Lease)
	}
}

// callTimeout returns the breaker's per-call timeout, or
// breaker.DefaultCallTimeout if it has none (for the waits that need a bound
// of their own, such as a subscription).
func (s *Semaphore) callTimeout() time.Duration { return subscribeTimeout(s.fail.st) }

// subscribeTimeout returns st's breaker's per-call timeout, or
// breaker.DefaultCallTimeout if it has none.
func subscribeTimeout(st storecall.Store) time.Duration {
	if d := st.Breaker.CallTimeout(); d > 0 {
		return d
	}
	return breaker.DefaultCallTimeout
}

// nums is a script call's ARGV[2] (see lua/head.lua): eight little-endian
// doubles (the configured limit, the key TTL in ms, 1 to SPUBLISH (else 0),
// then the script's own n4 .. n8), followed by the notify id and the notify
// channel prefix; all but n4 .. n8 from Semaphore.numHead. One argument
// where the scripts took a string for each number and each string saves Redis
// reading them and Lua building a longer ARGV table (head.lua says what that
// costs). Every number is an integer below 2^53 (see MaxLimit and MaxTTL), so
// exact. go-redis sends it with MarshalBinary.
type nums []byte

// numsLen is the length of the numbers in a nums, before the notify id
// (idLen bytes) and the channel prefix.
const numsLen = 8 * 8

// set sets number i to v.
func (n nums) set(i int, v int64) {
	binary.LittleEndian.PutUint64(n[8*i:], math.Float64bits(float64(v)))
}

// MarshalBinary returns n's bytes, for go-redis.
func (n *nums) MarshalBinary() ([]byte, error) { return *n, nil }

// nums returns a call's numbers: numHead with the script's own n4 .. n8 (see
// each script's header).
func (s *Semaphore) nums(n4, n5, n6, n7, n8 int64) *nums {
	n := append(nums(nil), s.numHead...)
	for i, v := range [...]int64{n4, n5, n6, n7, n8} {
		n.set(3+i, v)
	}
	return &n
}

// releaseNums returns the numbers of a release call (see release.lua): a new
// limit to store (0 to keep it), whether to always write a tombstone, and the
// weight the token was granted with (0 if unknown).
func (s *Semaphore) releaseNums(limit int64, always bool, w int64) *nums {
	return s.nums(s.cfg.TombstoneTTL.Milliseconds(), limit, int64(b2i(always)), w, 0)
}

// command returns the script command for token tok with the numbers n and
// the script-specific ARGV extra (see lua/head.lua): the keys and the common
// ARGV are boxed once in New (cmdHead), so a call allocates one slice and
// boxes only what varies per call, instead of go-redis's Script.Run boxing
// every key and argument again. The script's EVALSHA head is written when it
// is sent (redisscript.Script.Cmd).
func (s *Semaphore) command(tok any, n *nums, extra ...any) []any {
	a := make([]any, len(s.cmdHead), len(s.cmdHead)+1+len(extra))
	copy(a, s.cmdHead)
	a[argTok] = tok
	a = append(a, n)
	return append(a, extra...)
}

// run runs sc with the command args (from command) on client and returns its
// integer reply: EVALSHA, then EVAL on NOSCRIPT, read straight into []int64
// (redisscript.Script.EvalInts; the scripts return arrays of integers only,
// and anything else is an error). ctx is the call's context from breaker.Do,
// bounded by the breaker's CallTimeout; go-redis (ContextTimeoutEnabled) turns
// its deadline into socket deadlines.
func run(ctx context.Context, client redis.UniversalClient, sc *redisscript.Script, args []any) ([]int64, error) {
	r, err := sc.EvalInts(ctx, client, args)
	if err != nil {
		return nil, err
	}
	if len(r) < 3 {
		return nil, fmt.Errorf("distsem: unexpected reply length %d", len(r))
	}
	return r, nil
}

// call runs a script through the breaker with policy p (see command for tok,
// n and extra). ran reports whether the script was sent (its outcome may then be
// unknown on error). With FailOpen or FailLocal and no answer from Redis, it
// returns a nil reply, a nil error and the breaker's Source.
func (s *Semaphore) call(ctx context.Context, p breaker.Policy, sc *redisscript.Script, tok any, n *nums, extra ...any) (r []int64, src breaker.Source, ran bool, err error) {
	args := s.command(tok, n, extra...) // built here: extra does not escape
	r, src, err = storecall.Do(ctx, &s.fail.st, p,
		func(ctx context.Context, client redis.UniversalClient) ([]int64, error) {
			ran = true
			return run(ctx, client, sc, args)
		},
		func(context.Context) ([]int64, error) { return nil, nil })
	return r, src, ran, err
}

// callBefore is call for a script that takes the call's deadline as its last
// number (n's, set here before each send) and does nothing once it has
// passed (acquire.lua: it replies stExpired with Redis's time at index 6), so
// that a call that timed out here
// but still runs in Redis (it sat in the socket of a frozen Redis) spends
// nothing. The deadline comes from the call's context (bounded by the
// breaker's CallTimeout) through the Store's Clock; an expired reply while the
// call's context still has time means Redis's clock is ahead: the Clock learns
// it and the call is sent once more.
func (s *Semaphore) callBefore(ctx context.Context, p breaker.Policy, sc *redisscript.Script, tok any, n *nums, extra ...any) (r []int64, src breaker.Source, ran bool, err error) {
	args := s.command(tok, n, extra...)
	clock := s.fail.st.Clock
	r, src, err = storecall.Do(ctx, &s.fail.st, p,
		func(ctx context.Context, client redis.UniversalClient) ([]int64, error) {
			ran = true
			n.set(6, clock.Deadline(ctx))
			r, err := run(ctx, client, sc, args)
			if err == nil && r[0] == stExpired && len(r) > 6 {
				if !clock.Expired(ctx, r[6]) {
					return nil, context.DeadlineExceeded
				}
				n.set(6, clock.Deadline(ctx))
				if r, err = run(ctx, client, sc, args); err == nil && r[0] == stExpired {
					return nil, context.DeadlineExceeded
				}
			}
			return r, err
		},
		func(context.Context) ([]int64, error) { return nil, nil })
	return r, src, ran, err
}

// open reports whether the breaker is open: calls would not reach Redis.
func (f *failure) open() bool { return f.st.Breaker.State() == breaker.StateOpen }

// countRedis counts a Redis-held permit against the local share, when there is
// one and it has room, so that the share bounds this process's Redis-held and
// fallback permits together. It reports whether it did.
func (f *failure) countRedis(w int64) bool {
	return f.local != nil && f.local.TryAcquire(w)
}

// release gives back p's weight on the local share. carried is whether p,
// granted by FailLocal, was carried into Redis (its weight left outage then).
func (f *failure) release(p *Permit, carried bool) {
	if p.counted {
		f.local.Release(p.weight)
	}
	if p.kind == permitLocal && !carried {
		f.outage.Add(-p.weight)
	}
}

// fallback admits a call without Redis, by policy: FailOpen admits at once
// with a permit held nowhere; FailLocal takes weight from the local share (or
// tries to, for TryAcquire), setting *queued if it waits for it, unless
// taken says it was taken already. It is only reached with those two
// policies.
func (s *Semaphore) fallback(ctx context.Context, w int64, wait bool, queued *bool, taken bool) (*Permit, error) {
	switch s.fail.policy {
	case breaker.FailOpen:
		s.fail.degraded.Add(1)
		s.local.failOpen.Add(1)
		return s.basePermit(w, permitOpen), nil
	case breaker.FailLocal:
		s.fail.calm.Store(time.Now().Add(s.fail.hold).UnixNano())
		if !taken {
			if err := s.takeLocal(ctx, w, wait, queued); err != nil {
				return nil, err
			}
		}
		// A grant that waited on the share: its own time is the last
		// decision without Redis.
		s.fail.calm.Store(time.Now().Add(s.fail.hold).UnixNano())
		s.fail.degraded.Add(1)
		s.local.failLocal.Add(1)
		s.fail.outage.Add(w)
		p := s.basePermit(w, permitLocal)
		p.counted = true
		// Carried into Redis once it answers again (see Permit.carry).
		p.token = s.newToken()
		p.tokArg = p.token
		s.renewals.add(p, time.Now().Add(s.carryEvery()))
		return p, nil
	}
	panic("distsem: fallback with policy " + s.fail.policy.String())
}

// carryEvery is how often a FailLocal permit not yet carried into Redis
// tries again: often enough that Redis counts it soon after it answers
// again (while the breaker is open a try costs no I/O), and at most every
// Lease/9, the retry interval of a failed renewal.
func (s *Semaphore) carryEvery() time.Duration { return min(s.cfg.Lease/9, maxCarryEvery) }

const maxCarryEvery = 250 * time.Millisecond

// takeLocal takes w from the local share under FailLocal: at once, or, if
// wait, waiting for it (setting *queued) until ctx is done. It returns
// ctx.Err() or a *RejectError matching ErrLocalBusy, with the share's
// estimate, if it cannot.
func (s *Semaphore) takeLocal(ctx context.Context, w int64, wait bool, queued *bool) error {
	if s.fail.local.TryAcquire(w) {
		return nil
	}
	if !wait {
		s.local.localBusy.Add(1)
		return reject.New(ErrLocalBusy, 0)
	}
	*queued = true
	err := s.fail.local.Acquire(ctx, w)
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var d time.Duration
	if re, ok := errors.AsType[*RejectError](err); ok {
		d = re.RetryAfter()
	}
	s.local.localBusy.Add(1)
	return reject.New(ErrLocalBusy, d)
}

// SetLocalShare sets the capacity of this process's local share under
// breaker.FailLocal (Config.LocalShare), for a caller that learns at run time
// how many processes share the limit (adaptiveredis does). Growing it admits
// local waiters that now fit; shrinking it revokes nothing: what is held on
// the share stays held until released. Under another policy it does nothing.
// It panics if n < 1.
func (s *Semaphore) SetLocalShare(n int64) {
	s.mustBeMade()
	if n < 1 {
		panic("distsem: local share < 1")
	}
	if s.fail.local != nil {
		s.fail.local.SetLimit(n)
	}
}
