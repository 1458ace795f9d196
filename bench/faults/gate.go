package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
)

// gateRec is one Acquire as the harness saw it: when it was called and
// returned, what it gave, and for a grant when the harness stopped counting
// it as held (the holder's work ended: its hold was over, or its lease was
// reported lost).
type gateRec struct {
	proc          int
	state         breaker.State
	start, end    time.Time
	src           source // store, degraded (a permit granted without Redis) or error
	granted       bool
	refused       bool // no permit in time: the caller's wait ended (ctx) or the local share was busy
	done          time.Time
	lost          bool // the lease was reported lost while held
	releaseFailed bool // Release returned an error (it retries in the background)
}

// gateProcs makes each process's Semaphore: its own client, breaker and
// Semaphore object, one name across the fleet.
func gateProcs(e *env) []*distsem.Semaphore {
	share := max(1, int64(gateLimit/e.p.procs)) // LocalShare = C / processes
	sems := make([]*distsem.Semaphore, e.p.procs)
	for i := range sems {
		sems[i] = distsem.New(e.clients[i], "faults", gateLimit, distsem.Config{
			Breaker: e.brs[i], Policy: e.sc.policy, LocalShare: share, Logger: quiet,
		})
	}
	return sems
}

// gateLoad offers acquires and records them.
type gateLoad struct {
	load[gateRec]
	sems []*distsem.Semaphore
	brs  []*breaker.Breaker
	p    params
}

// run offers p.rate acquires a second from every process during [from,
// until) (see load.offer); each grant is held p.hold (or until its lease is
// lost) and released.
func (l *gateLoad) run(ctx context.Context, from, until time.Time) {
	l.offer(ctx, len(l.sems), from, until, l.p.rate, l.one)
}

// one makes one Acquire of process i and holds what it grants.
func (l *gateLoad) one(i int) gateRec {
	s := l.sems[i]
	ctx, cancel := context.WithTimeout(context.Background(), l.p.maxWait)
	r := gateRec{proc: i, state: l.brs[i].State(), start: time.Now()}
	p, err := s.Acquire(ctx, 1)
	cancel()
	r.end = time.Now()
	switch {
	case err == nil:
		r.granted = true
		if p.Degraded() {
			r.src = srcDegraded
		}
		t := time.NewTimer(l.p.hold)
		select {
		case <-t.C:
		case <-p.Lost():
			r.lost = true
		}
		t.Stop()
		r.done = time.Now()
		r.releaseFailed = p.Release(context.Background()) != nil
	case errors.Is(err, context.DeadlineExceeded):
		r.refused = true // waited maxWait for a permit: a refusal, as the caller's own deadline
	case errors.Is(err, distsem.ErrLocalBusy):
		r.refused, r.src = true, srcDegraded
	default:
		r.src = srcError
	}
	return r
}

// gateCheck is what the harness found after the fault, once every holder
// had released: the weight Redis held, how many permits the fleet could
// then hold at once (C if nothing was lost or leaked), and what the
// processes still held locally.
type gateCheck struct {
	waited                  time.Duration // until every breaker answered from Redis
	inUse, holders, waiting int64         // Stats after every harness holder released
	canHold                 int64         // store grants of TryAcquire(1) across the fleet before ErrNoCapacity
	degradedInCheck         int64         // grants made without Redis during the check (the check is then void)
	inUseAfter              int64         // Stats after the check's permits were released
	localHeld               int64         // sum of LocalStats().Held after the check
	err                     error
}

// check waits until every process's Semaphore answers from Redis (a Stats
// call through its breaker succeeds), then reads Stats, takes TryAcquire(1)
// round-robin over the processes until one is refused (at most 2C tries),
// releases all of it and reads Stats again.
func (l *gateLoad) check(ctx context.Context) gateCheck {
	var c gateCheck
	start := time.Now()
	deadline := start.Add(15 * time.Second)
	for _, s := range l.sems {
		for {
			_, err := s.Stats(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.err = fmt.Errorf("a process's Stats still failing after 15s: %v", err)
				return c
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	// Queue entries of callers that gave up live WaiterTTL (1s): wait for
	// them, since TryAcquire never overtakes the queue.
	for {
		st, err := l.sems[0].Stats(ctx)
		if err != nil {
			c.err = err
			return c
		}
		c.inUse, c.holders, c.waiting = st.InUse, st.Holders, st.Waiting
		if st.Waiting == 0 || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	c.waited = time.Since(start)
	var held []*distsem.Permit
	for i := 0; i < 2*gateLimit; i++ {
		p, err := l.sems[i%len(l.sems)].TryAcquire(ctx, 1)
		if errors.Is(err, distsem.ErrNoCapacity) {
			break
		}
		if err != nil {
			c.err = fmt.Errorf("TryAcquire in the check: %w", err)
			break
		}
		held = append(held, p)
		if p.Degraded() {
			c.degradedInCheck++
		} else {
			c.canHold++
		}
	}
	for _, p := range held {
		p.Release(ctx)
	}
	if st, err := l.sems[0].Stats(ctx); err == nil {
		c.inUseAfter = st.InUse
	} else if c.err == nil {
		c.err = err
	}
	for _, s := range l.sems {
		c.localHeld += s.LocalStats().Held
	}
	return c
}
