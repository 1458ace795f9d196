package distsem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestSetLocalShare: with Redis down under FailLocal, the local share set at
// run time bounds the degraded grants: growing it admits more at once,
// shrinking it admits nothing until the weight held is below it.
func TestSetLocalShare(t *testing.T) {
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(), "ls", 10, distsem.Config{Breaker: policyBreaker(), Policy: breaker.FailLocal, LocalShare: 1})
	ctx := t.Context()
	tripBreaker(t, s, srv)
	take := func() (*distsem.Permit, bool) {
		p, err := s.TryAcquire(ctx, 1)
		if err != nil {
			if !errors.Is(err, distsem.ErrLocalBusy) {
				t.Fatalf("TryAcquire on the local share: %v, want a grant or ErrLocalBusy", err)
			}
			return nil, false
		}
		if !p.Degraded() {
			t.Fatalf("TryAcquire with Redis down granted a permit that is not degraded")
		}
		return p, true
	}
	s.SetLocalShare(3)
	var held []*distsem.Permit
	for range 3 {
		p, ok := take()
		if !ok {
			t.Fatalf("TryAcquire %d of a share of 3: ErrLocalBusy", len(held)+1)
		}
		held = append(held, p)
	}
	if _, ok := take(); ok {
		t.Fatalf("TryAcquire beyond a share of 3 granted")
	}
	s.SetLocalShare(2)
	held[0].Release(ctx)
	if _, ok := take(); ok {
		t.Fatalf("TryAcquire with 2 held of a share shrunk to 2 granted")
	}
	held[1].Release(ctx)
	p, ok := take()
	if !ok {
		t.Fatalf("TryAcquire with 1 held of a share of 2: ErrLocalBusy")
	}
	p.Release(ctx)
	held[2].Release(ctx)

	func() {
		defer func() {
			if r := recover(); r != "distsem: local share < 1" {
				t.Errorf("SetLocalShare(0) panicked with %#v", r)
			}
		}()
		s.SetLocalShare(0)
	}()
	// Under another policy it does nothing (and does not panic).
	other := newSem(t, srv.Client(), "ls2", 10, distsem.Config{})
	other.SetLocalShare(5)
}

// TestFailLocalRecoveryKeepsTheFleetLimit: permits granted on the local
// shares during an outage stay held after Redis returns, and Redis never
// heard of them. Until they are released, a process that holds any takes a
// Redis grant only with room on its share, so the fleet holds at most its
// limit; once they are released, grants are Redis's alone again.
func TestFailLocalRecoveryKeepsTheFleetLimit(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	ctx := t.Context()
	var sems []*distsem.Semaphore
	var brks []*breaker.Breaker
	for range 2 { // two processes, C = 4, a share of 2 each
		brk := breaker.New("recovery", breaker.Config{ConsecutiveFailures: 1, OpenDuration: 100 * time.Millisecond, Jitter: -1, CallTimeout: 200 * time.Millisecond})
		c := redis.NewClient(redistest.Options(proxy.Addr()))
		t.Cleanup(func() { c.Close() })
		sems = append(sems, newSem(t, c, "recover", 4, distsem.Config{Breaker: brk, Policy: breaker.FailLocal, LocalShare: 2}))
		brks = append(brks, brk)
	}
	proxy.Drop()
	var outage []*distsem.Permit
	for _, s := range sems {
		for range 2 {
			p, err := s.TryAcquire(ctx, 1)
			if err != nil || !p.Degraded() {
				t.Fatalf("TryAcquire with Redis gone: %v, %v, want a degraded grant", permitString(p), err)
			}
			outage = append(outage, p)
		}
	}
	proxy.Heal()
	floodgatetest.Eventually(t, 5*time.Second, "both breakers closed", func() bool {
		for _, s := range sems {
			s.Stats(ctx) // lets the breaker probe
		}
		return brks[0].State() == breaker.StateClosed && brks[1].State() == breaker.StateClosed
	})
	// The fleet holds 4 on its shares; Redis holds none and would grant 4.
	for i, s := range sems {
		if p, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrLocalBusy) {
			t.Fatalf("process %d, Redis back, its share full of the outage's permits: TryAcquire = %v, %v, want ErrLocalBusy (the fleet holds its limit already)", i, permitString(p), err)
		}
	}
	// One outage permit released: that process may take one, from Redis.
	outage[0].Release(ctx)
	p, err := sems[0].TryAcquire(ctx, 1)
	if err != nil || p.Degraded() {
		t.Fatalf("after a release: TryAcquire = %v, %v, want a grant from Redis", permitString(p), err)
	}
	if st, err := sems[0].Stats(ctx); err != nil || st.InUse != 1 {
		t.Fatalf("Redis's Stats = %+v, %v, want 1 held", st, err)
	}
	// Every outage permit of process 1 released: it is Redis's alone again,
	// and takes what Redis has left: 4 - 1 (process 0's Redis grant) - 1
	// (process 0's outage permit still held is not Redis's, and process 1
	// does not know it: that is the share's to bound, not Redis's).
	outage[2].Release(ctx)
	outage[3].Release(ctx)
	var got []*distsem.Permit
	for {
		q, err := sems[1].TryAcquire(ctx, 1)
		if err != nil {
			break
		}
		got = append(got, q)
	}
	if len(got) != 3 {
		t.Errorf("process 1 with no outage permit left: %d granted by Redis, want 3 (4 less process 0's one)", len(got))
	}
	for _, q := range append(got, p, outage[1]) {
		q.Release(ctx)
	}
}
