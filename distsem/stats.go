package distsem

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/redis/go-redis/v9"
)

// localCounters are what LocalStats reads: this process's own calls.
type localCounters struct {
	acquired, canceled, errors                atomic.Int64
	noCapacity, tooLarge, unavailable, closed atomic.Int64
	renewals, renewalErrors                   atomic.Int64
	held                                      atomic.Int64
	failOpen, failLocal, localBusy            atomic.Int64
	carried                                   atomic.Int64
}

// LocalStats counts what this Semaphore (this process) did, without I/O: use
// it where Stats' round trip is unwelcome (a metrics callback).
type LocalStats struct {
	// Held is the weight this process's permits hold now (degraded ones
	// included, lost ones not).
	Held int64
	// Acquired counts successful Acquire and TryAcquire calls (degraded
	// grants included: see Stats.Degraded); Canceled those that returned
	// ctx.Err().
	Acquired, Canceled int64
	// Refusals by reason, and Errors for other failures (a Redis error that
	// is not a store failure, a broken invariant).
	RejectedNoCapacity, RejectedTooLarge, RejectedUnavailable, RejectedClosed int64
	// RejectedLocalBusy counts refusals by the local share under FailLocal.
	RejectedLocalBusy int64
	Errors            int64
	// FailOpen and FailLocal count the grants made without Redis, by the
	// policy that made them (they add up to Degraded).
	FailOpen, FailLocal int64
	// Renewals counts lease renewals that Redis answered, RenewalErrors those
	// that failed (retried until the local deadline).
	Renewals, RenewalErrors int64
	// Readopted, Lost and Degraded are as in Stats.
	Readopted, Lost, Degraded int64
	// Carried counts FailLocal permits that Redis was told of once it
	// answered again, so that it counts them until they are released (see
	// the package doc's over-admission bounds).
	Carried int64
	// Uncarried is the weight of this process's FailLocal permits that Redis
	// does not count yet: granted on the local share without Redis, held,
	// and not carried into Redis (yet). While it is above 0 the fleet may
	// hold more than Redis's InUse says.
	Uncarried int64
	// Recovering is whether a grant from Redis needs room on the local share
	// first (FailLocal, after an outage: see the package doc's over-admission
	// bounds).
	Recovering bool
}

// LocalStats returns this process's counters for the semaphore. It does no
// I/O, takes no lock and allocates nothing.
func (s *Semaphore) LocalStats() LocalStats {
	s.mustBeMade()
	c := &s.local
	return LocalStats{
		Held:                c.held.Load(),
		Acquired:            c.acquired.Load(),
		Canceled:            c.canceled.Load(),
		RejectedNoCapacity:  c.noCapacity.Load(),
		RejectedTooLarge:    c.tooLarge.Load(),
		RejectedUnavailable: c.unavailable.Load(),
		RejectedClosed:      c.closed.Load(),
		RejectedLocalBusy:   c.localBusy.Load(),
		FailOpen:            c.failOpen.Load(),
		FailLocal:           c.failLocal.Load(),
		Errors:              c.errors.Load(),
		Renewals:            c.renewals.Load(),
		RenewalErrors:       c.renewalErrors.Load(),
		Readopted:           s.readopts.Load(),
		Lost:                s.lost.Load(),
		Degraded:            s.fail.degraded.Load(),
		Carried:             c.carried.Load(),
		Uncarried:           s.fail.outage.Load(),
		Recovering:          s.fail.recovering(),
	}
}

// Stats describes a semaphore at one moment.
type Stats struct {
	// Limit is the limit stored in Redis (0 if the semaphore has no state yet);
	// ConfiguredLimit the one given to New.
	Limit, ConfiguredLimit int64
	// InUse is the weight held, Holders the number of permits, Waiting the
	// number of queued callers of all processes. Expired holders and dead waiters
	// are counted until a script reaps them.
	InUse, Holders, Waiting int64
	// Readopted and Lost count this Semaphore's permits re-adopted after they
	// vanished from Redis and permits lost; Degraded counts permits granted
	// without Redis by the failure policy (FailOpen or FailLocal).
	Readopted, Lost, Degraded int64
}

// Stats reads the semaphore's state from Redis in one round trip (MULTI). It
// returns ErrClosed after Close.
func (s *Semaphore) Stats(ctx context.Context) (Stats, error) {
	s.mustBeMade()
	if s.isClosed() {
		return Stats{}, ErrClosed
	}
	st := Stats{
		ConfiguredLimit: s.limit,
		Readopted:       s.readopts.Load(),
		Lost:            s.lost.Load(),
		Degraded:        s.fail.degraded.Load(),
	}
	// Through the breaker like every other call: while it is open, Stats
	// returns ErrUnavailable at once instead of waiting on the network.
	var hm *redis.SliceCmd
	var hc, qc *redis.IntCmd
	_, _, err := storecall.Do(ctx, &s.fail.st, breaker.FailClosed, func(ctx context.Context, client redis.UniversalClient) (struct{}, error) {
		_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			hm = p.HMGet(ctx, s.keys[0], "p", "limit", "used")
			hc = p.ZCard(ctx, s.keys[1])
			qc = p.ZCard(ctx, s.keys[2])
			return nil
		})
		return struct{}{}, err
	}, nil)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return st, cerr
		}
		return st, fmt.Errorf("distsem: stats %q: %w", s.name, err)
	}
	st.Limit, st.InUse = stateLimitUsed(hm.Val())
	st.Holders = hc.Val()
	st.Waiting = qc.Val()
	return st, nil
}
