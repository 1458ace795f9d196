package distsem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// onRenew is a go-redis hook that hands each renew call (an EVALSHA of
// renewScript) to f with the rest of the chain, and passes every other command
// and every pipeline straight on.
type onRenew func(ctx context.Context, c redis.Cmder, next redis.ProcessHook) error

func (onRenew) DialHook(n redis.DialHook) redis.DialHook { return n }
func (onRenew) ProcessPipelineHook(n redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return n
}
func (f onRenew) ProcessHook(n redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if a := c.Args(); len(a) > 1 && a[1] == renewScript.Hash() {
			return f(ctx, c, n)
		}
		return n(ctx, c)
	}
}

// gateRenew holds the first renew call at the client until open is called,
// ignoring the call's context as a misbehaving hook or client could. Then it
// sends the call: with its context, or with late set, detached from it (a
// client that sends a call after its caller gave up on it).
type gateRenew struct {
	late    bool
	held    atomic.Bool   // the first renew call was taken
	entered chan struct{} // closed when the held call arrives
	gate    chan struct{} // closed by open
	done    chan struct{} // closed when the held call returned
	once    sync.Once
	status  int64 // the held call's status reply; -1 if it failed (read after done)
}

func newGateRenew(late bool) *gateRenew {
	return &gateRenew{late: late, entered: make(chan struct{}), gate: make(chan struct{}), done: make(chan struct{}), status: -1}
}

// open lets the held call go on. It may be called more than once.
func (g *gateRenew) open() { g.once.Do(func() { close(g.gate) }) }

// hold is g's onRenew.
func (g *gateRenew) hold(ctx context.Context, c redis.Cmder, n redis.ProcessHook) error {
	if !g.held.CompareAndSwap(false, true) {
		return n(ctx, c)
	}
	defer close(g.done)
	close(g.entered)
	<-g.gate
	if g.late {
		ctx = context.WithoutCancel(ctx)
	}
	err := n(ctx, c)
	// An answered call (err nil: not NOSCRIPT, so Ints needs no client to
	// send it again) decoded as renew does.
	if err == nil {
		if v, err := renewScript.Ints(ctx, nil, c); err == nil && len(v) > 0 {
			g.status = v[0]
		}
	}
	return err
}

// heldPermit acquires the only unit of a new Semaphore whose first renewal is
// held by g, and waits until that renewal is held.
func heldPermit(t *testing.T, g *gateRenew, cfg Config) (*redistest.DB, *Semaphore, *Permit) {
	t.Helper()
	db := redistest.Connect(t)
	// Cached, so that the held call is answered, not refused NOSCRIPT and
	// sent again as EVAL, a call the hook does not see.
	if err := renewScript.Load(t.Context(), db.Client).Err(); err != nil {
		t.Fatal(err)
	}
	db.Client.AddHook(onRenew(g.hold))
	s := New(db.Client, db.Prefix+"sem", 1, cfg)
	t.Cleanup(func() { closeWithin(t, s, 10*time.Second) })
	// Registered after Close, so it runs before it (cleanups run last
	// registered first), even if the test fails before it opens the gate:
	// Close waits for the renewal held at the gate.
	t.Cleanup(g.open)
	p, err := s.Acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(cfg.Lease):
		t.Fatal("no renewal call within a lease")
	}
	return db, s, p
}

// closeWithin calls s.Close and fails t if it has not returned within d, so
// that a Close that waits for a call that never ends fails the test with a
// message instead of hanging it.
func closeWithin(t *testing.T, s *Semaphore, d time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(d):
		t.Errorf("Close still blocked after %v", d)
	}
}

// waitDone waits up to d for ch to be closed, and fails t with what if it is not.
func waitDone(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
	}
}

// releaseWithin calls p.Release with a context that ends after d and fails t
// unless it returns nil within d.
func releaseWithin(t *testing.T, p *Permit, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start := time.Now()
	res := make(chan error, 1)
	go func() { res <- p.Release(ctx) }()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Release: %v", err)
		}
		if el := time.Since(start); el > d {
			t.Fatalf("Release returned after %v, beyond its %v context", el, d)
		}
	case <-time.After(d + 2*time.Second):
		// The cleanup opens the gate: Release and its goroutine end then.
		t.Fatalf("Release blocked for %v with a %v context while a renewal call was stuck", d+2*time.Second, d)
	}
}

// TestReleaseReturnsWhileRenewalStuck: a renewal call stuck in a client that
// ignores its context does not hold Release, which returns within its own
// context with the weight free in Redis; the renewal's goroutine ends once
// the call returns, Close waits for it, and the permit is not reported lost.
func TestReleaseReturnsWhileRenewalStuck(t *testing.T) {
	g := newGateRenew(false)
	// CallTimeout bounds Release's call: room for a loaded machine, and
	// still far below the stuck renewal, which is held until the gate opens.
	_, s, p := heldPermit(t, g, Config{Lease: 3 * time.Second, WaiterTTL: 3 * time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second})})
	releaseWithin(t, p, 2*time.Second)
	// The only unit is free again while the renewal is still stuck.
	q, err := s.TryAcquire(t.Context(), 1)
	if err != nil {
		t.Fatalf("TryAcquire after Release, while its renewal is stuck: %v", err)
	}
	q.Release(t.Context())
	select {
	case <-g.done:
		t.Fatal("the stuck renewal returned before the gate opened")
	default:
	}

	// Close, though, waits for the renewal's goroutine: none outlives it.
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a released permit's renewal call was still running")
	case <-time.After(200 * time.Millisecond):
	}

	g.open()
	waitDone(t, g.done, 10*time.Second, "the renewal call held at the gate did not return once the gate opened")
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting 5s after the renewal call returned")
	}
	floodgatetest.Eventually(t, 5*time.Second, "renewal goroutine still in flight after its call returned", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stopCall == nil
	})
	select {
	case <-p.Lost():
		t.Error("a released permit was reported lost")
	default:
	}
	if cause := context.Cause(p.Context()); !errors.Is(cause, ErrReleased) {
		t.Errorf("permit context cause = %v, want ErrReleased", cause)
	}
}

// TestLateReadoptAfterReleaseIsReleasedAgain: with Readopt, a renewal in
// flight when the permit is released can reach Redis after the release. Its
// tombstone refuses re-adoption; here the tombstone is gone first (as after
// TombstoneTTL), so the renewal re-adopts the token, held by no one. The
// renewal, answered that it re-adopted a released permit's token, releases
// it again at once, instead of leaving the unit taken for a lease.
func TestLateReadoptAfterReleaseIsReleasedAgain(t *testing.T) {
	g := newGateRenew(true)
	// The re-adopted token would be held for a lease: the second release
	// must come well before (4s of 7.5s, room for a loaded machine).
	const lease = 7500 * time.Millisecond
	db, s, p := heldPermit(t, g, Config{Lease: lease, WaiterTTL: 3 * time.Second, Breaker: breaker.New("test", breaker.Config{CallTimeout: time.Second}), Readopt: true})
	releaseWithin(t, p, 2*time.Second)
	ctx := t.Context()
	tomb := s.keys[5]
	if err := db.Client.ZScore(ctx, tomb, p.token).Err(); err != nil {
		t.Fatalf("no tombstone after the release of a permit with Readopt: %v", err)
	}
	if err := db.Client.ZRem(ctx, tomb, p.token).Err(); err != nil {
		t.Fatal(err)
	}

	g.open()
	waitDone(t, g.done, 10*time.Second, "the renewal call held at the gate did not return once the gate opened")
	if g.status != stReadopted {
		t.Fatalf("late renewal status = %d, want %d (re-adopted): the test did not set up the case", g.status, stReadopted)
	}
	start := time.Now()
	floodgatetest.Eventually(t, 4*time.Second, "the token re-adopted after the release is still held (it would be until its lease ends)", func() bool {
		st, err := s.Stats(ctx)
		return err == nil && st.Holders == 0 && st.InUse == 0
	})
	t.Logf("re-adopted token released again after %v (lease %v)", time.Since(start), lease)
	if err := db.Client.ZScore(ctx, tomb, p.token).Err(); err != nil {
		t.Errorf("no tombstone after the second release: %v", err)
	}
}

// stallRenew returns a hook that holds every renew call for 3s, ignoring its
// context, as a misbehaving hook or client could. calls counts the calls it
// holds, so that a test can wait for them: Release does not (see
// Permit.Release), and a test must not leave them running into the next one.
func stallRenew(calls *sync.WaitGroup) onRenew {
	return func(ctx context.Context, c redis.Cmder, n redis.ProcessHook) error {
		calls.Add(1)
		defer calls.Done()
		time.Sleep(3 * time.Second)
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
	const lease = 900 * time.Millisecond
	s := New(db.Client, db.Prefix+"sem", 1, Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: lease / 3})})
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
	// The hung call returns after lease/3 + 3s: lost by then would be the
	// defect. A second of slack for a loaded machine is still well before.
	if d := time.Since(start); d > lease+time.Second {
		t.Fatalf("Lost after %v, want at the %v lease (the hung renewal returns after %v)", d, lease, lease/3+3*time.Second)
	}
}
