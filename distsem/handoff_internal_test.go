package distsem

import (
	"context"
	"testing"
	"time"

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
	s := New(db.Client, db.Prefix+"sem", 1, Config{Lease: lease, CallTimeout: 100 * time.Millisecond, WaiterTTL: wttl})
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
	cfg := Config{Lease: lease, CallTimeout: 100 * time.Millisecond, WaiterTTL: wttl}
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
