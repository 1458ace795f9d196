package shaperredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// The Redis meters and a Lease have the Admit of the local meters, so one
// small interface (bulkhead's Rate) covers them all.
type admitter interface {
	Admit(context.Context, string, int64) (shaper.Decision, error)
}

var (
	_ admitter = (*shaperredis.Meter)(nil)
	_ admitter = (*shaperredis.Lease)(nil)
	_ admitter = (*shaper.Meter)(nil)
)

// deadClient returns a client to an address where nothing listens.
func deadClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
}

// TestAllowAdmitDegraded: Allow answers a bool (the policy resolves store
// failures; a done ctx is false), Admit returns a denial as ErrLimited with
// RetryAfter, and decisions the store did not make are Degraded.
func TestAllowAdmitDegraded(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	lim := shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1}
	m := shaperredis.NewMeter(db.Client, lim, shaperredis.Config{Prefix: db.Prefix})
	if !m.Allow(ctx, "k") {
		t.Fatal("first Allow = false")
	}
	if m.Allow(ctx, "k") {
		t.Fatal("second Allow = true, burst 1")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if m.Allow(done, "other") {
		t.Error("Allow with a done ctx = true")
	}
	d, err := m.Admit(ctx, "k", 1)
	if !errors.Is(err, shaperredis.ErrLimited) || d.Allowed || d.RetryAfter <= 0 || d.Degraded {
		t.Errorf("Admit over the limit = %+v, %v; want ErrLimited with RetryAfter", d, err)
	}
	if ra, ok := errors.AsType[*shaperredis.RejectError](err); !ok || ra.RetryAfter() != d.RetryAfter {
		t.Errorf("Admit error %v: RetryAfter does not match %v", err, d.RetryAfter)
	}
	if _, err := m.Admit(ctx, "k", 2); !errors.Is(err, shaperredis.ErrTooLarge) {
		t.Errorf("Admit(2) with burst 1: %v, want ErrTooLarge", err)
	}
	if d, err := m.Admit(ctx, "fresh", 1); err != nil || !d.Allowed || d.Degraded {
		t.Errorf("Admit on a fresh key = %+v, %v", d, err)
	}

	for _, p := range []breaker.Policy{breaker.FailOpen, breaker.FailLocal} {
		dm := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{Policy: p})
		if !dm.Allow(ctx, "k") {
			t.Errorf("%v: Allow with Redis down = false", p)
		}
		d, err := dm.AllowN(ctx, "k2", 1)
		if err != nil || !d.Allowed || !d.Degraded {
			t.Errorf("%v: AllowN with Redis down = %+v, %v; want allowed and Degraded", p, d, err)
		}
	}
	closed := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{})
	if closed.Allow(ctx, "k") {
		t.Error("FailClosed: Allow with Redis down = true")
	}
}

// TestKeyTooLong: a key above Config.MaxKeyLen is refused with ErrKeyTooLong
// before any round trip, and the breaker does not count it; MaxKeyLen moves
// the bound, a negative one removes it; a Queue's name and a Lease's key are
// bounded too.
func TestKeyTooLong(t *testing.T) {
	ctx := context.Background()
	lim := shaper.Limit{Rate: shaper.PerSecond(10)}
	brk := breaker.New("keys", breaker.Config{})
	// A dead client: any round trip would be a store failure.
	m := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{Breaker: brk})
	long := strings.Repeat("k", shaperredis.DefaultMaxKeyLen+1)
	for range 20 {
		if _, err := m.AllowN(ctx, long, 1); err != shaperredis.ErrKeyTooLong {
			t.Fatalf("AllowN with a %d-byte key: %v, want ErrKeyTooLong", len(long), err)
		}
		if _, err := m.Admit(ctx, long, 1); err != shaperredis.ErrKeyTooLong {
			t.Fatalf("Admit with a long key: %v, want ErrKeyTooLong", err)
		}
		if m.Allow(ctx, long) {
			t.Fatal("Allow with a long key = true")
		}
	}
	if st := brk.Stats(); st.StoreFailures != 0 || brk.State() != breaker.StateClosed {
		t.Errorf("breaker after long keys: %+v, %v; want no failures, closed", st, brk.State())
	}
	short := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{MaxKeyLen: 4, Policy: breaker.FailOpen})
	if _, err := short.AllowN(ctx, "12345", 1); err != shaperredis.ErrKeyTooLong {
		t.Errorf("MaxKeyLen 4, 5-byte key: %v", err)
	}
	if d, err := short.AllowN(ctx, "1234", 1); err != nil || !d.Allowed {
		t.Errorf("MaxKeyLen 4, 4-byte key: %+v, %v", d, err)
	}
	unbounded := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{MaxKeyLen: -1, Policy: breaker.FailOpen})
	if _, err := unbounded.AllowN(ctx, long, 1); err != nil {
		t.Errorf("MaxKeyLen -1: %v", err)
	}
	mustPanic(t, "NewQueue with a long name", func() {
		shaperredis.NewQueue(deadClient(), long, shaper.PerSecond(1), shaper.QueueConfig{}, shaperredis.Config{})
	})
	mustPanic(t, "Lease with a long key", func() { m.Lease(long, shaperredis.LeaseConfig{}) })
}

// TestLuaRange: every number crossing into Lua stays below 2^53: a limit whose
// period in µs (or Burst×Period) reaches 2^53 panics in the constructor and in
// SetLimit (leaving the limit unchanged), with a shaperredis prefix.
func TestLuaRange(t *testing.T) {
	c := deadClient()
	huge := []shaper.Limit{
		{Rate: shaper.Rate{Count: 1, Period: time.Duration(1<<53) * time.Microsecond}},
		{Rate: shaper.Rate{Count: 1, Period: time.Second}, Burst: 1 << 34},
		{Rate: shaper.Rate{Count: 1 << 34, Period: time.Second}},
	}
	for _, lim := range huge {
		for name, f := range map[string]func(){
			"NewMeter":       func() { shaperredis.NewMeter(c, lim, shaperredis.Config{}) },
			"NewTokenBucket": func() { shaperredis.NewTokenBucket(c, lim, shaperredis.Config{}) },
			"NewQueue": func() {
				shaperredis.NewQueue(c, "q", lim.Rate, shaper.QueueConfig{Burst: lim.Burst}, shaperredis.Config{})
			},
		} {
			msg := panicMsg(f)
			if !strings.HasPrefix(msg, "shaperredis: ") || !strings.Contains(msg, "2^53") {
				t.Errorf("%s(%v): panic %q, want a shaperredis 2^53 panic", name, lim, msg)
			}
		}
		ok := shaper.Limit{Rate: shaper.PerSecond(10)}
		m := shaperredis.NewMeter(c, ok, shaperredis.Config{})
		if msg := panicMsg(func() { m.SetLimit(lim) }); !strings.HasPrefix(msg, "shaperredis: ") {
			t.Errorf("SetLimit(%v): panic %q", lim, msg)
		}
		if got := m.Limit(); got != (shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}) {
			t.Errorf("after a refused SetLimit, Limit() = %v", got)
		}
	}
	// The largest period below 2^53 µs is accepted.
	shaperredis.NewMeter(c, shaper.Limit{Rate: shaper.Rate{Count: 1, Period: time.Duration(1<<53-1) * time.Microsecond}}, shaperredis.Config{})
}

func panicMsg(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

// TestLeaseFreshFetchesOnFirstUse: a fresh Lease under ExhaustReject admits its
// first call (waiting for the first refill within the caller's deadline)
// instead of refusing until the first refill lands.
func TestLeaseFreshFetchesOnFirstUse(t *testing.T) {
	db := redistest.Connect(t)
	m := shaperredis.NewMeter(db.Client, shaper.Limit{Rate: shaper.PerSecond(100), Burst: 50}, shaperredis.Config{Prefix: db.Prefix})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := m.Lease("w", shaperredis.LeaseConfig{Batch: 10})
	defer l.Close()
	if err := l.Wait(ctx, 1); err != nil {
		t.Fatalf("first Wait on a fresh Lease: %v", err)
	}
	l2 := m.Lease("a", shaperredis.LeaseConfig{Batch: 10})
	defer l2.Close()
	if d, err := l2.Admit(ctx, "ignored", 1); err != nil || !d.Allowed {
		t.Fatalf("first Admit on a fresh Lease: %+v, %v", d, err)
	}
	// Once the first refill has landed, an empty Lease refuses at once again.
	l3 := m.Lease("empty", shaperredis.LeaseConfig{Batch: 1, LowWater: 0})
	defer l3.Close()
	if err := l3.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := l3.Wait(ctx, 1); err != nil {
			if !errors.Is(err, shaperredis.ErrLimited) {
				t.Fatalf("Wait on an exhausted Lease: %v, want ErrLimited", err)
			}
			return
		}
	}
	t.Error("a Lease of Batch 1 on 100/s admitted 101 calls at once")
}

// TestQueueCancelReturnsWhileRedisFrozen (issue 12 item 7): a sleeping Wait
// whose context ends while Redis is frozen returns at once, not after the
// give-back's round trip; the give-back happens after SIGCONT (Close waits for
// it).
func TestQueueCancelReturnsWhileRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	brk := breaker.New("frozen", breaker.Config{CallTimeout: 3 * time.Second, ConsecutiveFailures: 1000})
	q := shaperredis.NewQueue(c, "q", shaper.PerSecond(2), shaper.QueueConfig{}, shaperredis.Config{Breaker: brk})
	if err := q.Wait(ctx, 1); err != nil { // the burst slot; the next is 500ms away
		t.Fatal(err)
	}
	before, err := c.Get(ctx, q.Key()).Result()
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Wait(cctx, 1) }()
	// Wait until the second call has reserved its slot (the schedule moved).
	for deadline := time.Now().Add(5 * time.Second); ; {
		v, _ := c.Get(ctx, q.Key()).Result()
		if v != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second Wait never reserved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Pause()
	start := time.Now()
	cancel()
	err = <-done
	el := time.Since(start)
	if err != context.Canceled {
		t.Errorf("cancelled Wait: %v, want context.Canceled", err)
	}
	if el > 300*time.Millisecond {
		t.Errorf("cancelled Wait returned %v after its cancellation with Redis frozen; want at once", el)
	}
	srv.Resume()
	q.Close() // waits for the give-back
	if v, err := c.Get(ctx, q.Key()).Result(); err != nil || v != before {
		t.Errorf("after Close, schedule = %q, %v; want %q (the slot given back)", v, err, before)
	}
}
