package distsem_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	helperAddr = "DISTSEM_HELPER_ADDR"
	helperName = "DISTSEM_HELPER_NAME"
)

// TestHelperHolder is not a test: run as a child process by
// TestKilledHolderProcess, it takes the whole semaphore, prints HELD and waits
// to be killed (at most a minute).
func TestHelperHolder(t *testing.T) {
	addr := os.Getenv(helperAddr)
	if addr == "" {
		t.Skip("helper process for TestKilledHolderProcess")
	}
	rdb := redis.NewClient(redistest.Options(addr))
	s := distsem.New(rdb, os.Getenv(helperName), 2, distsem.Config{Lease: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := s.Acquire(ctx, 2)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("HELD", p.Fence())
	select {
	case <-p.Lost():
		fmt.Println("LOST")
	case <-time.After(time.Minute):
	}
	os.Exit(1)
}

// TestKilledHolderProcess: a holder in another OS process is SIGKILLed; its
// permit is free again within lease + 200ms.
func TestKilledHolderProcess(t *testing.T) {
	db := redistest.Connect(t)
	name := db.Prefix + "sem"
	const lease = 2 * time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperAddr+"="+db.Client.Options().Addr, helperName+"="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	held := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "HELD") || strings.HasPrefix(sc.Text(), "ERROR") {
				held <- sc.Text()
				return
			}
		}
		held <- "helper exited"
	}()
	select {
	case line := <-held:
		if !strings.HasPrefix(line, "HELD") {
			t.Fatalf("helper: %s", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not acquire within 20s")
	}

	s := newSem(t, db.Client, name, 2, distsem.Config{Lease: lease})
	if p, err := s.TryAcquire(t.Context(), 1); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("TryAcquire while the helper holds everything = %v, %v; want ErrNoCapacity", permitString(p), err)
	}
	// Longer than the lease: the helper's renewals keep its permit.
	ctx, cancel := context.WithTimeout(t.Context(), lease+500*time.Millisecond)
	p, err := s.Acquire(ctx, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while the helper is alive = %v, %v; want DeadlineExceeded", permitString(p), err)
	}

	waiting := make(chan time.Time, 1)
	var got *distsem.Permit
	var gotErr error
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, gotErr = s.Acquire(ctx, 2)
		waiting <- time.Now()
	}()
	waitFor(t, 5*time.Second, "waiter not queued", func() bool { return stats(t, s).Waiting == 1 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	granted := <-waiting
	if gotErr != nil {
		t.Fatalf("Acquire after the holder was killed: %v", gotErr)
	}
	defer got.Release(context.Background())
	if d := granted.Sub(killed); d > lease+200*time.Millisecond {
		t.Errorf("permit back %v after SIGKILL, want ≤ lease + 200ms = %v", d, lease+200*time.Millisecond)
	} else {
		t.Logf("permit back %v after SIGKILL (lease %v)", d, lease)
	}
}

// TestFrozenRedisNoOrphans: 50 acquires with 200ms deadlines against a
// SIGSTOPped Redis all return by their deadline (well before the 2s
// CallTimeout), and after SIGCONT no orphan permit or waiter remains even
// though their calls ran late.
func TestFrozenRedisNoOrphans(t *testing.T) {
	srv := redistest.Start(t)
	opt := redistest.Options(srv.Addr)
	opt.PoolSize = 64 // every acquire gets a connection: all 50 calls reach the socket
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	// A CallTimeout far from the callers' 200ms, so that an Acquire that
	// waited for its call instead of its context is told apart however
	// loaded the machine is; a lease longer than the test, so that no orphan
	// expires before the check below.
	s := newSem(t, rdb, "frozen", 5, distsem.Config{Lease: 6 * time.Second, WaiterTTL: 6 * time.Second, Breaker: breaker.New("distsem:frozen", breaker.Config{CallTimeout: 2 * time.Second})})
	ctx := t.Context()
	// Warm up: scripts cached, connections open.
	var warm []*distsem.Permit
	for range 5 {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		warm = append(warm, p)
	}
	for _, p := range warm {
		p.Release(ctx)
	}

	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	var worst atomic.Int64
	for range 50 {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			p, err := s.Acquire(c, 1)
			el := time.Since(start)
			for {
				w := worst.Load()
				if int64(el) <= w || worst.CompareAndSwap(w, int64(el)) {
					break
				}
			}
			if err == nil {
				t.Errorf("Acquire on a frozen Redis succeeded: %v", p.Fence())
			}
		})
	}
	wg.Wait()
	// 50 goroutines woken at once by their deadlines, under the race
	// detector, on a small shared machine: 205ms without -race, up to ~360ms
	// with it under load; waiting for the call would be 2s.
	bound := time.Second
	if w := time.Duration(worst.Load()); w > bound {
		t.Errorf("slowest Acquire returned after %v, want ≤ %v", w, bound)
	} else {
		t.Logf("slowest Acquire returned after %v (bound %v)", w, bound)
	}
	time.Sleep(time.Second)
	srv.Resume()
	resumed = true
	waitFor(t, 5*time.Second, "orphan permits or waiters after SIGCONT", func() bool {
		st, err := s.Stats(ctx)
		if errors.Is(err, breaker.ErrUnavailable) {
			return false // Stats goes through the breaker, still open from the freeze
		}
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return st.Holders == 0 && st.Waiting == 0 && st.InUse == 0
	})
	// Still none a little later (no late acquire sneaking in).
	time.Sleep(300 * time.Millisecond)
	if st := stats(t, s); st.Holders != 0 || st.InUse != 0 {
		t.Fatalf("after SIGCONT: %+v, want no holders", st)
	}
	p, err := s.TryAcquire(ctx, 5)
	if err != nil {
		t.Fatalf("TryAcquire(5) after recovery: %v", err)
	}
	p.Release(ctx)
}

// churn runs a contended workload on a private server while disturb runs every
// period, and fails on any caller error.
func churn(t *testing.T, srv *redistest.Server, cfg distsem.Config, period time.Duration, disturb func(ctx context.Context, admin *redis.Client)) {
	t.Helper()
	var sems []*distsem.Semaphore
	for _, c := range clients(t, srv.Addr, 2) {
		sems = append(sems, newSem(t, c, "churn", 2, cfg))
	}
	admin := srv.Client()
	ctx, stop := context.WithCancel(t.Context())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				disturb(ctx, admin)
				n.Add(1)
			}
		}
	}()
	var o overlap
	var maxWait atomic.Int64
	start := time.Now()
	errs := workload{sems: sems, per: 8, total: 800, hold: 3 * time.Millisecond, timeout: 30 * time.Second,
		onGrant: func(_ int64, waited time.Duration) {
			for {
				m := maxWait.Load()
				if int64(waited) <= m || maxWait.CompareAndSwap(m, int64(waited)) {
					return
				}
			}
		}}.run(t, &o)
	stop()
	<-done
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("caller error: %v", err)
	}
	if len(errs) > 0 {
		t.Errorf("%d caller errors", len(errs))
	}
	if m := o.max.Load(); m > 2 {
		t.Errorf("max overlap %d, want ≤ 2", m)
	}
	t.Logf("800 acquisitions in %v with %d disturbances; longest wait %v", time.Since(start), n.Load(), time.Duration(maxWait.Load()))
}

// TestPubSubKilled: the pub/sub connections are killed every 100ms; every
// acquisition still completes (heartbeat polls and resubscription cover the
// lost notifications).
func TestPubSubKilled(t *testing.T) {
	srv := redistest.Start(t)
	churn(t, srv, distsem.Config{WaiterTTL: 1500 * time.Millisecond}, 100*time.Millisecond, func(ctx context.Context, admin *redis.Client) {
		admin.ClientKillByFilter(ctx, "TYPE", "pubsub")
	})
}

// TestScriptFlush: SCRIPT FLUSH every 50ms; no error reaches a caller (go-redis
// falls back from EVALSHA to EVAL on NOSCRIPT).
func TestScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	churn(t, srv, distsem.Config{}, 50*time.Millisecond, func(ctx context.Context, admin *redis.Client) {
		admin.ScriptFlush(ctx)
	})
}

// TestLostWhenRenewalsFail: a holder whose renewals cannot reach Redis learns
// it lost the permit by its local deadline, through Lost and its context.
func TestLostWhenRenewalsFail(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 600 * time.Millisecond
	s := newSem(t, srv.Client(), "lost", 1, distsem.Config{Lease: lease, Breaker: breaker.New("test", breaker.Config{CallTimeout: 100 * time.Millisecond})})
	p, err := s.Acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	srv.Pause()
	defer srv.Resume()
	select {
	case <-p.Lost():
	case <-time.After(2 * lease):
		t.Fatal("Lost not closed within 2 × lease of a frozen Redis")
	}
	if d := time.Since(acquired); d > lease+100*time.Millisecond {
		t.Errorf("Lost closed %v after the last successful renewal could have been sent, want ≤ lease + 100ms", d)
	}
	if cause := context.Cause(p.Context()); !errors.Is(cause, distsem.ErrLeaseLost) {
		t.Errorf("permit context cause = %v, want ErrLeaseLost", cause)
	}
	srv.Resume()
	p.Release(context.Background())
}

// TestRedisRestartedEmpty: Redis is killed and restarted without its data. The
// breaker opens during the outage and closes after it; a holder learns it lost
// its permit; a holder with Readopt re-adopts it.
func TestRedisRestartedEmpty(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	var mu sync.Mutex
	var transitions []string
	brk := breaker.New("restart", breaker.Config{
		ConsecutiveFailures: 3, OpenDuration: 300 * time.Millisecond, CallTimeout: 100 * time.Millisecond,
		Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind == floodgate.KindStateChange {
				mu.Lock()
				transitions = append(transitions, e.To)
				mu.Unlock()
			}
		}),
	})
	cfg := distsem.Config{Lease: 3 * time.Second, Breaker: brk}
	plain := newSem(t, rdb, "restart", 2, cfg)
	cfg.Readopt = true
	readopt := newSem(t, rdb, "restart", 2, cfg)
	ctx := t.Context()
	pl, err := plain.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := readopt.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	for range 3 {
		if _, err := plain.TryAcquire(ctx, 1); !errors.Is(err, breaker.ErrUnavailable) {
			t.Fatalf("TryAcquire with Redis down = %v, want ErrUnavailable", err)
		}
	}
	start := time.Now()
	_, err = plain.TryAcquire(ctx, 1)
	var open *breaker.OpenError
	if !errors.As(err, &open) || open.RetryAfter() <= 0 {
		t.Fatalf("TryAcquire with the breaker open = %v, want an *OpenError with RetryAfter", err)
	}
	if el := time.Since(start); el > 20*time.Millisecond {
		t.Errorf("rejection with the breaker open took %v, want no network wait", el)
	}
	srv.Restart()
	restarted := time.Now()

	select {
	case <-pl.Lost():
		t.Logf("plain holder learned it lost its permit %v after the restart", time.Since(restarted))
	case <-time.After(cfg.Lease + time.Second):
		t.Fatal("plain holder did not learn it lost its permit")
	}
	waitFor(t, cfg.Lease, "holder with Readopt did not re-adopt", func() bool {
		st, err := readopt.Stats(ctx)
		return err == nil && st.Readopted == 1 && st.Holders == 1 && st.InUse == 1
	})
	select {
	case <-pr.Lost():
		t.Fatal("re-adopted permit reported lost")
	default:
	}
	if brk.State() != breaker.StateClosed {
		t.Errorf("breaker state after recovery = %v, want closed", brk.State())
	}
	mu.Lock()
	got := strings.Join(transitions, ",")
	mu.Unlock()
	if !strings.HasPrefix(got, "open,") || !strings.HasSuffix(got, "closed") {
		t.Errorf("breaker transitions = %s, want open … closed", got)
	}
	pr.Release(ctx)
	pl.Release(ctx)
}

// tripBreaker pauses srv (until the test ends) and calls s until its breaker
// is open.
func tripBreaker(t *testing.T, s *distsem.Semaphore, srv *redistest.Server) {
	t.Helper()
	srv.Pause()
	t.Cleanup(srv.Resume)
	for range 10 {
		p, err := s.TryAcquire(t.Context(), 1)
		if p != nil {
			p.Release(t.Context())
			if p.Degraded() {
				return // FailOpen or FailLocal answered
			}
		}
		if err != nil && errors.As(err, new(*breaker.OpenError)) {
			return
		}
	}
	t.Fatal("breaker did not open")
}

func policyBreaker() *breaker.Breaker {
	return breaker.New("policy", breaker.Config{ConsecutiveFailures: 2, OpenDuration: time.Minute, CallTimeout: 100 * time.Millisecond})
}

func TestFailClosed(t *testing.T) {
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(), "fc", 2, distsem.Config{Breaker: policyBreaker()})
	tripBreaker(t, s, srv)
	start := time.Now()
	p, err := s.Acquire(t.Context(), 1)
	el := time.Since(start)
	var ra interface{ RetryAfter() time.Duration }
	if p != nil || !errors.Is(err, breaker.ErrUnavailable) || !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
		t.Fatalf("Acquire with the breaker open = %v, %v; want ErrUnavailable with RetryAfter", permitString(p), err)
	}
	if el > 10*time.Millisecond {
		t.Errorf("FailClosed rejection took %v, want < 10ms", el)
	}
}

func TestFailOpen(t *testing.T) {
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(), "fo", 2, distsem.Config{Breaker: policyBreaker(), Policy: breaker.FailOpen})
	tripBreaker(t, s, srv)
	var ps []*distsem.Permit
	for range 5 { // more than the limit: FailOpen admits everything
		p, err := s.Acquire(t.Context(), 2)
		if err != nil || !p.Degraded() || p.Fence() != 0 {
			t.Fatalf("Acquire with FailOpen and the breaker open = %v, %v; want a degraded permit", permitString(p), err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := p.Release(t.Context()); err != nil {
			t.Errorf("Release of a degraded permit: %v", err)
		}
	}
}

// TestFailLocal: with Redis down, admissions come from the local share, which
// also counts the permit this process already held in Redis: at most
// LocalShare in total.
func TestFailLocal(t *testing.T) {
	srv := redistest.Start(t)
	s := newSem(t, srv.Client(), "fl", 10, distsem.Config{Breaker: policyBreaker(), Policy: breaker.FailLocal, LocalShare: 3})
	ctx := t.Context()
	held, err := s.Acquire(ctx, 1) // from Redis, counted on the local share
	if err != nil || held.Degraded() {
		t.Fatalf("Acquire with Redis up = %v, %v", permitString(held), err)
	}
	tripBreaker(t, s, srv)
	var local []*distsem.Permit
	for range 2 {
		p, err := s.TryAcquire(ctx, 1)
		if err != nil || !p.Degraded() {
			t.Fatalf("TryAcquire from the local share = %v, %v; want a degraded permit", permitString(p), err)
		}
		local = append(local, p)
	}
	if p, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrLocalBusy) {
		t.Fatalf("TryAcquire beyond the share (1 Redis + 2 local of 3) = %v, %v; want ErrLocalBusy", permitString(p), err)
	}
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	p, err := s.Acquire(c, 1)
	cancel()
	if err == nil {
		t.Fatalf("Acquire beyond the share = %v, want an error", p)
	}
	// Releasing the Redis-held permit (its release fails: Redis is down) frees
	// its place on the share.
	held.Release(ctx)
	p, err = s.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("TryAcquire after a counted permit was released: %v", err)
	}
	p.Release(ctx)
	for _, p := range local {
		p.Release(ctx)
	}
}

// TestFailLocalBoundUnderLoad: 4 processes with a local share of 2 each run a
// contended workload on a limit of 5 while Redis is frozen for a second. The
// weight running at once never exceeds limit + share × processes, callers keep
// being admitted during the outage, and after it Redis grants again.
func TestFailLocalBoundUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	const limit, share, procs = 5, 2, 4
	var sems []*distsem.Semaphore
	for i, c := range clients(t, srv.Addr, procs) {
		brk := breaker.New(fmt.Sprintf("p%d", i), breaker.Config{ConsecutiveFailures: 3, OpenDuration: 300 * time.Millisecond, CallTimeout: 100 * time.Millisecond})
		sems = append(sems, newSem(t, c, "fl", limit, distsem.Config{
			Breaker: brk, Policy: breaker.FailLocal, LocalShare: share,
		}))
	}
	var o overlap
	paused := make(chan struct{})
	go func() {
		defer close(paused)
		time.Sleep(300 * time.Millisecond)
		srv.Pause()
		time.Sleep(time.Second)
		srv.Resume()
	}()
	var mu sync.Mutex
	kinds := map[string]int{}
	errs := workload{sems: sems, per: 6, total: 3000, hold: 2 * time.Millisecond, timeout: 5 * time.Second}.run(t, &o)
	<-paused
	for _, err := range errs {
		mu.Lock()
		kinds[err.Error()]++
		mu.Unlock()
	}
	// Stats goes through each process's breaker, which may still be open
	// right after the outage: ask until it answers.
	var degraded int64
	for _, s := range sems {
		waitFor(t, 5*time.Second, "Stats never answered after the outage", func() bool {
			st, err := s.Stats(t.Context())
			if err != nil {
				return false
			}
			degraded += st.Degraded
			return true
		})
	}
	t.Logf("max overlap %d (bound %d), %d degraded grants, errors: %v", o.max.Load(), limit+share*procs, degraded, kinds)
	if m := o.max.Load(); m > limit+share*procs {
		t.Errorf("max overlap %d > limit + share × processes = %d", m, limit+share*procs)
	}
	if degraded == 0 {
		t.Error("no grant from the local share during a 1s outage")
	}
	if len(errs) > 300 {
		t.Errorf("%d of 3000 calls failed", len(errs))
	}
	// After the outage, Redis serves again.
	waitFor(t, 5*time.Second, "no Redis grant after the outage", func() bool {
		p, err := sems[0].TryAcquire(t.Context(), 1)
		if err != nil {
			return false
		}
		p.Release(t.Context())
		return !p.Degraded()
	})
}
