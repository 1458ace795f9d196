package distsem

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/redis/go-redis/v9"
)

// failure holds the failure policy of a Semaphore: its breaker, the policy for
// acquires, and the local share used by FailLocal.
type failure struct {
	brk      *breaker.Breaker
	policy   breaker.Policy
	local    *semaphore.Weighted // FailLocal only
	degraded atomic.Int64
}

func (f *failure) init(name string, cfg Config) {
	f.policy = cfg.Policy
	f.brk = cfg.Breaker
	if f.brk == nil {
		f.brk = breaker.New("distsem:"+name, breaker.Config{CallTimeout: cfg.CallTimeout, Policy: cfg.Policy})
	}
	if cfg.Policy == breaker.FailLocal {
		share := cfg.LocalShare
		if share == 0 {
			share = 1
		}
		f.local = semaphore.New(share, semaphore.Config{})
	}
}

// errCallTimeout is returned when the Semaphore's own CallTimeout expired
// before the caller's deadline. It is a timeout net.Error, and not a context
// error, so that the breaker counts it as a store failure even when the
// breaker's own CallTimeout is longer (a shared breaker).
var errCallTimeout error = callTimeoutError{}

type callTimeoutError struct{}

func (callTimeoutError) Error() string   { return "distsem: redis call timed out" }
func (callTimeoutError) Timeout() bool   { return true }
func (callTimeoutError) Temporary() bool { return true }

// eval runs one script bounded by CallTimeout and parses its integer reply. It
// does not go through the breaker; see call.
func (s *Semaphore) eval(ctx context.Context, sc *redis.Script, args []any) ([]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	v, err := sc.Run(cctx, s.client, s.keys, args...).Result()
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return nil, errCallTimeout
		}
		return nil, err
	}
	return parseReply(v)
}

// call runs a script through the breaker with policy p. ran reports whether
// the script was sent (its outcome may then be unknown on error). With
// FailOpen or FailLocal and no answer from Redis, it returns a nil reply, a
// nil error and the breaker's Source.
func (s *Semaphore) call(ctx context.Context, p breaker.Policy, sc *redis.Script, args []any) (r []int64, src breaker.Source, ran bool, err error) {
	r, src, err = breaker.Do(ctx, s.fail.brk, p,
		func(ctx context.Context) ([]int64, error) {
			ran = true
			return s.eval(ctx, sc, args)
		},
		func(context.Context) ([]int64, error) { return nil, nil })
	return r, src, ran, err
}

// open reports whether the breaker is open: calls would not reach Redis.
func (f *failure) open() bool { return f.brk.State() == breaker.StateOpen }

// countRedis counts a Redis-held permit against the local share, when there is
// one and it has room, so that the share bounds this process's Redis-held and
// fallback permits together. It reports whether it did.
func (f *failure) countRedis(w int64) bool {
	return f.local != nil && f.local.TryAcquire(w)
}

func (f *failure) release(p *Permit) {
	if p.counted {
		f.local.Release(p.weight)
	}
}

// fallback admits a call without Redis, by policy: FailOpen admits at once
// with a permit held nowhere; FailLocal takes weight from the local share (or
// tries to, for TryAcquire). It is only reached with those two policies.
func (s *Semaphore) fallback(ctx context.Context, w int64, wait bool) (*Permit, error) {
	switch s.fail.policy {
	case breaker.FailOpen:
		s.fail.degraded.Add(1)
		return s.basePermit(w, permitOpen), nil
	case breaker.FailLocal:
		if !wait {
			if !s.fail.local.TryAcquire(w) {
				return nil, &RejectError{Reason: ErrLocalBusy}
			}
		} else if err := s.fail.local.Acquire(ctx, w); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			var d time.Duration
			var ra interface{ RetryAfter() time.Duration }
			if errors.As(err, &ra) {
				d = ra.RetryAfter()
			}
			return nil, &RejectError{Reason: ErrLocalBusy, Delay: d}
		}
		s.fail.degraded.Add(1)
		p := s.basePermit(w, permitLocal)
		p.counted = true
		return p, nil
	}
	panic("distsem: fallback with policy " + s.fail.policy.String())
}

func isStoreFailure(err error) bool {
	return errors.Is(err, errCallTimeout) || breaker.IsStoreFailure(err)
}
