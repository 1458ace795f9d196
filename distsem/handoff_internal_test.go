package distsem

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// redisNow returns the Redis time in ms.
func redisNow(t *testing.T, db *redistest.DB) int64 {
	t.Helper()
	tm, err := db.Client.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// expiryIn returns how long tok's lease at the store has left, in ms (-1 if
// tok is not held).
func expiryIn(t *testing.T, db *redistest.DB, s *Semaphore, tok string) int64 {
	t.Helper()
	sc, err := db.Client.ZScore(t.Context(), s.keys[1], tok).Result()
	if err != nil {
		return -1
	}
	return int64(sc) - redisNow(t, db)
}

// A hand-off grant lives only until the waiter's queue entry would have
// expired (its claim window), not for a whole lease: unclaimed, it comes back
// within WaiterTTL; claimed by a heartbeat (or a renewal), it gets the lease.
func TestHandOffGrantLivesForClaimWindow(t *testing.T) {
	db := redistest.Connect(t)
	const lease, wttl = 10 * time.Second, 600 * time.Millisecond
	s := New(db.Client, db.Prefix+"sem", 1, Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond}), WaiterTTL: wttl})
	t.Cleanup(func() { s.Close() })
	r := &raw{t: t, s: s}

	r.acquire("h", 1, true)
	r.acquire("w", 1, true) // queued: its entry lives wttl
	r.release("h")          // hands the permit to w
	if left := expiryIn(t, db, s, "w"); left <= 0 || left > wttl.Milliseconds() {
		t.Fatalf("hand-off grant of w expires in %dms, want in (0, %d]", left, wttl.Milliseconds())
	}
	// w claims it with a heartbeat (an acquire that finds it held).
	if got := r.acquire("w", 1, true); got[0] != stGranted {
		t.Fatalf("heartbeat of granted w = %v, want granted", got)
	}
	if left := expiryIn(t, db, s, "w"); left < lease.Milliseconds()-1000 {
		t.Fatalf("claimed grant of w expires in %dms, want about the lease (%v)", left, lease)
	}

	// A waiter that never claims its grant (its process died) gives it back
	// within its claim window.
	r.acquire("dead", 1, true)
	r.release("w") // hands the permit to dead
	if got := r.acquire("x", 1, false); got[0] != stBusy {
		t.Fatalf("try acquire(x) while dead holds its hand-off = %v, want busy", got)
	}
	time.Sleep(wttl + 100*time.Millisecond)
	if got := r.acquire("x", 1, false); got[0] != stGranted {
		t.Fatalf("try acquire(x) %v after the unclaimed hand-off = %v, want granted", wttl+100*time.Millisecond, got)
	}
}

// A caller granted by hand-off that holds its permit past WaiterTTL keeps it:
// the permit's first renewal claims it for the lease.
func TestHandOffPermitClaimedByFirstRenewal(t *testing.T) {
	db := redistest.Connect(t)
	const lease, wttl = 3 * time.Second, 600 * time.Millisecond
	cfg := Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond}), WaiterTTL: wttl}
	a := New(db.Client, db.Prefix+"sem", 1, cfg)
	w := New(db.Client, db.Prefix+"sem", 1, cfg)
	t.Cleanup(func() { a.Close(); w.Close() })
	ctx := t.Context()
	h, err := a.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Permit, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, err := w.Acquire(c, 1)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := db.Client.ZCard(ctx, a.keys[2]).Result(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("waiter not queued within 5s")
		}
	}
	h.Release(ctx)
	p := <-got
	if p == nil {
		return
	}
	defer p.Release(ctx)
	time.Sleep(2 * wttl)
	select {
	case <-p.Lost():
		t.Fatalf("hand-off permit lost after %v (WaiterTTL %v)", 2*wttl, wttl)
	default:
	}
	// Unclaimed, it would have expired within wttl of the grant.
	if left := expiryIn(t, db, a, p.token); left < wttl.Milliseconds() {
		t.Errorf("hand-off permit held %v expires in %dms, want claimed for the lease (%v)", 2*wttl, left, lease)
	}
}

// twoProcesses returns two Semaphores on one name with limit 1, standing for two
// processes, closed when the test ends.
func twoProcesses(t *testing.T, cfg Config) (*redistest.DB, *Semaphore, *Semaphore) {
	db := redistest.Connect(t)
	a := New(db.Client, db.Prefix+"sem", 1, cfg)
	w := New(db.Client, db.Prefix+"sem", 1, cfg)
	t.Cleanup(func() { a.Close(); w.Close() })
	return db, a, w
}

// deafen makes s believe its listener runs while none does: hand-off messages
// to s are lost (or, with deliver, arrive only when the test says so).
func deafen(s *Semaphore) {
	s.mu.Lock()
	s.listening = true
	s.mu.Unlock()
}

// A waiter whose hand-off messages are all lost must still be granted when its
// lease is shorter than WaiterTTL/3: its heartbeat has to find the hand-off
// grant before that grant expires and is reaped (it was requeued at the back
// for ever before the heartbeat was tied to the lease).
func TestLostMessagesShortLeaseStillGranted(t *testing.T) {
	_, a, w := twoProcesses(t, Config{Lease: 300 * time.Millisecond, Breaker: breaker.New("test", breaker.Config{CallTimeout: 50 * time.Millisecond}), WaiterTTL: 3 * time.Second})
	deafen(w)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var grants atomic.Int64
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				p, err := a.Acquire(ctx, 1)
				cancel()
				if err != nil {
					continue
				}
				grants.Add(1)
				time.Sleep(20 * time.Millisecond)
				p.Release(context.Background())
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	p, err := w.Acquire(ctx, 1)
	if err != nil {
		t.Fatalf("deaf waiter under load: %v (others got %d grants): starved", err, grants.Load())
	}
	p.Release(context.Background())
}

// A hand-off message delivered after its grant expired unseen and the waiter
// was queued again carries a fence from before the waiter's last call. It must
// be ignored: accepting it made a second holder on a limit of 1. The test
// delivers such a message by hand: a real fence from an earlier grant, for the
// token of a waiter that is queued now.
func TestStaleHandoffMessageIgnored(t *testing.T) {
	_, a, w := twoProcesses(t, Config{Lease: 2 * time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 500 * time.Millisecond}), WaiterTTL: 3 * time.Second})
	deafen(w) // no real hand-off message reaches w
	old, err := a.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	oldFence := old.Fence()
	old.Release(context.Background())
	holder, err := a.Acquire(context.Background(), 1) // the only unit
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())

	type res struct {
		p   *Permit
		err error
	}
	ch := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		p, err := w.Acquire(ctx, 1)
		ch <- res{p, err}
	}()
	var tok string
	for deadline := time.Now().Add(2 * time.Second); tok == "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling for the waiter to register
		w.wmu.Lock()
		for k := range w.waiters {
			tok = k
		}
		w.wmu.Unlock()
	}
	if tok == "" {
		t.Fatal("the waiter never registered")
	}
	// Its first call has queued it (in Redis, not after a sleep).
	floodgatetest.Eventually(t, time.Second, "the waiter never queued in Redis", func() bool { return stats(t, a).Waiting == 1 })
	w.wake(tok + ":" + strconv.FormatInt(oldFence, 10))
	r := <-ch
	if r.err == nil {
		r.p.Release(context.Background())
		t.Fatalf("a stale hand-off message (fence %d) granted a second permit on a limit of 1", oldFence)
	}
	if r.err != context.DeadlineExceeded {
		t.Fatalf("waiter = %v, want context.DeadlineExceeded (the unit stays held)", r.err)
	}
}

// A permit whose token was sent in more than one acquire call (here: found by a
// heartbeat after a lost hand-off message) writes a tombstone on release, so an
// earlier call running late cannot grant the token again to no one. A token
// granted by its only call writes none.
func TestReleaseTombstonesRetriedTokens(t *testing.T) {
	db, a, w := twoProcesses(t, Config{Lease: 1500 * time.Millisecond, Breaker: breaker.New("test", breaker.Config{CallTimeout: 500 * time.Millisecond}), WaiterTTL: 3 * time.Second})
	deafen(w)
	ctx := context.Background()
	tombKey := a.Keys()[5]

	first, err := a.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Permit, 1)
	go func() {
		p, err := w.Acquire(ctx, 1) // queued; granted by hand-off; learns it at a heartbeat
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		done <- p
	}()
	// Queued in Redis before the release: released first, the waiter's
	// only call would be granted, and write no tombstone.
	floodgatetest.Eventually(t, 5*time.Second, "the waiter never queued in Redis", func() bool { return stats(t, a).Waiting == 1 })
	first.Release(ctx)
	if n, _ := db.Client.ZScore(ctx, tombKey, first.token).Result(); n != 0 {
		t.Fatalf("a token granted by its only call left a tombstone")
	}
	p := <-done
	if p == nil {
		t.FailNow()
	}
	if !p.tomb {
		t.Fatal("a token found by a heartbeat is not marked for a tombstone")
	}
	p.Release(ctx)
	if _, err := db.Client.ZScore(ctx, tombKey, p.token).Result(); err != nil {
		t.Fatalf("release of a token sent twice left no tombstone: %v", err)
	}
}
