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
// shares during an outage stay held after Redis returns. Each is carried
// into Redis once it answers, so Redis counts them: the fleet holds at most
// its limit, and each release gives its weight back to the whole fleet.
func TestFailLocalRecoveryKeepsTheFleetLimit(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	ctx := t.Context()
	sems := recoveryFleet(t, proxy.Addr(), "recover", 2)
	proxy.Drop()
	var outage []*distsem.Permit
	for _, s := range sems {
		outage = append(outage, takeDegraded(t, s, 2)...)
	}
	for i, s := range sems {
		if ls := s.LocalStats(); ls.Uncarried != 2 || ls.Carried != 0 {
			t.Fatalf("process %d during the outage: LocalStats Uncarried %d, Carried %d; want 2 held that Redis does not count, 0 carried", i, ls.Uncarried, ls.Carried)
		}
	}
	proxy.Heal()
	waitCarried(t, sems, 2)
	for i, s := range sems {
		if u := s.LocalStats().Uncarried; u != 0 {
			t.Fatalf("process %d, its permits carried: LocalStats().Uncarried = %d, want 0", i, u)
		}
	}
	waitRecovered(t, sems)
	if st, err := sems[0].Stats(ctx); err != nil || st.InUse != 4 {
		t.Fatalf("Redis's Stats once the outage's permits are carried = %+v, %v, want 4 held", st, err)
	}
	for i, s := range sems {
		if p, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) {
			t.Fatalf("process %d, Redis back and counting the outage's permits: TryAcquire = %v, %v, want ErrNoCapacity (the fleet holds its limit already)", i, permitString(p), err)
		}
	}
	// One outage permit released: Redis has 1 free, for any process.
	outage[0].Release(ctx)
	p, err := sems[1].TryAcquire(ctx, 1)
	if err != nil || p.Degraded() {
		t.Fatalf("after a release by process 0: process 1's TryAcquire = %v, %v, want a grant from Redis", permitString(p), err)
	}
	// Process 1's outage permits released: the fleet has 2 free, no more
	// (process 0 still holds outage[1], which Redis counts).
	outage[2].Release(ctx)
	outage[3].Release(ctx)
	got := takeAll(t, sems[1])
	if len(got) != 2 {
		t.Errorf("process 1 after its outage permits were released: %d granted by Redis, want 2 (4 less outage[1] and its own grant)", len(got))
	}
	for _, q := range append(got, p, outage[1]) {
		q.Release(ctx)
	}
	if st, err := sems[0].Stats(ctx); err != nil || st.InUse != 0 {
		t.Errorf("Redis's Stats after every release = %+v, %v, want none held (nothing leaked)", st, err)
	}
}

// TestFailLocalCarryOverTheLimit: a process cut off alone grants on its
// share while the rest of the fleet takes the whole limit from Redis. Once
// it can reach Redis, its permits are carried whatever Redis holds, so Redis
// grants nothing more until the weight is back below the limit.
func TestFailLocalCarryOverTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	cut := floodgatetest.StartProxy(t, srv.Addr)
	ctx := t.Context()
	alone := recoveryFleet(t, cut.Addr(), "over", 1)[0]
	rest := recoveryFleet(t, srv.Addr, "over", 1)[0]
	cut.Drop()
	outage := takeDegraded(t, alone, 2)
	held := takeAll(t, rest)
	if len(held) != 4 {
		t.Fatalf("the rest of the fleet took %d from Redis, want 4", len(held))
	}
	cut.Heal()
	waitCarried(t, []*distsem.Semaphore{alone}, 2)
	waitRecovered(t, []*distsem.Semaphore{alone})
	if st, err := rest.Stats(ctx); err != nil || st.InUse != 6 {
		t.Fatalf("Redis's Stats once the cut-off process's permits are carried = %+v, %v, want 6 held (over the limit of 4)", st, err)
	}
	held[0].Release(ctx)
	held[1].Release(ctx)
	if p, err := rest.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("4 held of 4: TryAcquire = %v, %v, want ErrNoCapacity", permitString(p), err)
	}
	held[2].Release(ctx)
	p, err := rest.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("3 held of 4: TryAcquire = %v, want a grant", err)
	}
	for _, q := range append(outage, p, held[3]) {
		q.Release(ctx)
	}
	if st, err := rest.Stats(ctx); err != nil || st.InUse != 0 {
		t.Errorf("Redis's Stats after every release = %+v, %v, want none held (nothing leaked)", st, err)
	}
}

// recoveryFleet returns n processes' Semaphores of limit 4, FailLocal with a
// share of 2 each, through addr, with breakers that open at the first failure
// and probe every 100 ms.
func recoveryFleet(t *testing.T, addr, name string, n int) []*distsem.Semaphore {
	var sems []*distsem.Semaphore
	for range n {
		brk := breaker.New(name, breaker.Config{ConsecutiveFailures: 1, OpenDuration: 100 * time.Millisecond, Jitter: -1, CallTimeout: 200 * time.Millisecond})
		c := redis.NewClient(redistest.Options(addr))
		t.Cleanup(func() { c.Close() })
		sems = append(sems, newSem(t, c, name, 4, distsem.Config{Breaker: brk, Policy: breaker.FailLocal, LocalShare: 2}))
	}
	return sems
}

// takeDegraded takes n permits of s with Redis out of reach: each must be a
// degraded (FailLocal) grant.
func takeDegraded(t *testing.T, s *distsem.Semaphore, n int) []*distsem.Permit {
	t.Helper()
	var got []*distsem.Permit
	for range n {
		p, err := s.TryAcquire(t.Context(), 1)
		if err != nil || !p.Degraded() {
			t.Fatalf("TryAcquire with Redis gone: %v, %v, want a degraded grant", permitString(p), err)
		}
		got = append(got, p)
	}
	return got
}

// takeAll takes permits of 1 from s until it refuses.
func takeAll(t *testing.T, s *distsem.Semaphore) []*distsem.Permit {
	var got []*distsem.Permit
	for {
		p, err := s.TryAcquire(t.Context(), 1)
		if err != nil {
			return got
		}
		got = append(got, p)
	}
}

// waitCarried waits until each of sems has carried n permits into Redis.
func waitCarried(t *testing.T, sems []*distsem.Semaphore, n int64) {
	t.Helper()
	floodgatetest.Eventually(t, 5*time.Second, "the outage's permits carried into Redis", func() bool {
		for _, s := range sems {
			if s.LocalStats().Carried != n {
				return false
			}
		}
		return true
	})
}

// waitRecovered waits until none of sems holds Redis's grants to its share.
func waitRecovered(t *testing.T, sems []*distsem.Semaphore) {
	t.Helper()
	floodgatetest.Eventually(t, 5*time.Second, "the recovery over", func() bool {
		for _, s := range sems {
			if s.LocalStats().Recovering {
				return false
			}
		}
		return true
	})
}

// TestFailLocalHoldsTheShareAfterAnOutage: after its last decision without
// Redis, a process takes grants from Redis only with room on its share for
// the breaker's longest open period (and a carry's interval), though it holds
// nothing from the outage: the rest of the fleet may not have found Redis
// again, nor carried what its shares granted. Then grants are Redis's alone.
func TestFailLocalHoldsTheShareAfterAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	ctx := t.Context()
	brk := breaker.New("hold", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, CallTimeout: 200 * time.Millisecond})
	c := redis.NewClient(redistest.Options(proxy.Addr()))
	t.Cleanup(func() { c.Close() })
	s := newSem(t, c, "hold", 4, distsem.Config{Breaker: brk, Policy: breaker.FailLocal, LocalShare: 2})
	proxy.Drop()
	for _, p := range takeDegraded(t, s, 1) {
		p.Release(ctx)
	}
	proxy.Heal()
	// Decisions without Redis until the breaker closes: the last of them
	// starts the hold (1 s + 250 ms), which outlasts what follows.
	floodgatetest.Eventually(t, 5*time.Second, "the breaker closed", func() bool {
		if p, err := s.TryAcquire(ctx, 1); err == nil {
			p.Release(ctx)
		}
		return brk.State() == breaker.StateClosed
	})
	if !s.LocalStats().Recovering {
		t.Fatal("LocalStats().Recovering = false just after the outage, want true")
	}
	held := takeAll(t, s)
	for _, p := range held {
		if p.Degraded() {
			t.Fatalf("a grant after the breaker closed is degraded: %v", permitString(p))
		}
	}
	if len(held) != 2 {
		t.Fatalf("just after the outage: %d granted, want 2 (the share's, though Redis has 4 free)", len(held))
	}
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrLocalBusy) {
		t.Fatalf("the share full just after the outage: TryAcquire = %v, want ErrLocalBusy", err)
	}
	waitRecovered(t, []*distsem.Semaphore{s})
	more := takeAll(t, s)
	if len(more) != 2 {
		t.Errorf("once recovered: %d more granted, want 2 (Redis's 4 less the 2 held)", len(more))
	}
	for _, p := range append(held, more...) {
		p.Release(ctx)
	}
}
