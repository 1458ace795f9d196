package distsem

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

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
	_, a, w := twoProcesses(t, Config{Lease: 2 * time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond}), WaiterTTL: 3 * time.Second})
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
	time.Sleep(100 * time.Millisecond) // its first call has queued it
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
	db, a, w := twoProcesses(t, Config{Lease: 600 * time.Millisecond, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond}), WaiterTTL: 3 * time.Second})
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
	time.Sleep(50 * time.Millisecond)
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

// TestFastAcquireGivesLostKeysATTL: when H and D were lost on their own (an
// eviction, a DEL) while S still counts weight in use, the fast acquire that
// recreates them gives them a TTL (found in review: an optimisation skipped
// the PEXPIREs whenever weight was in use).
func TestFastAcquireGivesLostKeysATTL(t *testing.T) {
	r, db := newRaw(t, 2)
	r.acquire("a", 1, false)
	if err := db.Client.Del(t.Context(), r.s.keys[1], r.s.keys[4]).Err(); err != nil {
		t.Fatal(err)
	}
	if got := r.acquire("b", 1, false); got[0] != stGranted {
		t.Fatalf("acquire(b) = %v", got)
	}
	ttlsOK(t, db, r.s, "fast acquire after H and D were lost")
}

// stallRenew returns a hook that holds every renew call for 2s, ignoring its
// context, as a misbehaving hook or client could. calls counts the calls it
// holds, so that a test can wait for them: Release does not (see
// Permit.Release), and a test must not leave them running into the next one.
func stallRenew(calls *sync.WaitGroup) onRenew {
	return func(ctx context.Context, c redis.Cmder, n redis.ProcessHook) error {
		calls.Add(1)
		defer calls.Done()
		time.Sleep(2 * time.Second)
		return n(ctx, c)
	}
}

// TestLostAtDeadlineWhileRenewalHangs: a permit whose renewal call hangs past
// the local deadline is lost at that deadline, not when the call returns.
func TestLostAtDeadlineWhileRenewalHangs(t *testing.T) {
	db := redistest.Connect(t)
	var stalled sync.WaitGroup
	defer stalled.Wait() // last: after Release and Close
	db.Client.AddHook(stallRenew(&stalled))
	const lease = 300 * time.Millisecond
	s := New(db.Client, db.Prefix+"sem", 1, Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	defer s.Close()
	start := time.Now()
	p, err := s.Acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	select {
	case <-p.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("never lost")
	}
	if d := time.Since(start); d > lease+150*time.Millisecond {
		t.Fatalf("Lost after %v, want at the %v lease", d, lease)
	}
}
