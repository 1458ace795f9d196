package distsem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// keyedGate is the interface bulkhead consumes (KeyedGate there): Keyed fits.
type keyedGate interface {
	Do(ctx context.Context, key string, n int64, fn func(context.Context) error) error
}

var _ keyedGate = (*distsem.Keyed)(nil)

func newKeyed(t *testing.T, rdb redis.UniversalClient, prefix string, limit int64, cfg distsem.KeyedConfig) *distsem.Keyed {
	t.Helper()
	k := distsem.NewKeyed(rdb, prefix, limit, cfg)
	t.Cleanup(func() { k.Close() })
	return k
}

// keyStats reads the Redis state of one key of a Keyed through a Semaphore of
// the same name (the state is in Redis only).
func keyStats(t *testing.T, rdb redis.UniversalClient, prefix, key string) distsem.Stats {
	t.Helper()
	// Stats only reads; its own breaker with a CallTimeout for a loaded
	// machine (the default 250ms timed out there).
	s := distsem.New(rdb, prefix+key, 1, distsem.Config{WaiterTTL: 6 * time.Second, Breaker: breaker.New("keyStats", breaker.Config{CallTimeout: 2 * time.Second})})
	defer s.Close()
	return stats(t, s)
}

// privateRedis returns a connection to a redis-server of this test's own, for
// tests that read server-wide counters (INFO commandstats): other tests on the
// shared server would add to them.
func privateRedis(t *testing.T) *redistest.DB {
	return &redistest.DB{Client: redistest.Start(t).Client(), Prefix: redistest.Prefix(t)}
}

// subscribes returns how many SUBSCRIBE commands the server has run.
func subscribes(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_subscribe:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

func wantStats(t *testing.T, k *distsem.Keyed, keys int, waiting, held int64) {
	t.Helper()
	st := k.Stats()
	if st.Keys != keys || st.Waiting != waiting || st.Held != held {
		t.Errorf("Stats = %+v, want Keys %d, Waiting %d, Held %d", st, keys, waiting, held)
	}
}

// TestKeyedLimitPerKey: two Keyeds on separate clients (two processes) hammer
// 24 keys with limit 2 from 2×24 goroutines; under MaxKeys pressure (8 live
// keys per process) some calls are refused at once. Each key's overlap stays
// within its limit, every key is dropped at the end, and both processes
// subscribed once each however many keys came and went.
func TestKeyedLimitPerKey(t *testing.T) {
	db := privateRedis(t) // it counts the server's SUBSCRIBE calls
	prefix := db.Prefix + "tenant:"
	const limit, nkeys, maxKeys = 2, 16, 10
	cs := clients(t, db.Client.Options().Addr, 2)
	sub0 := subscribes(t, db.Client)
	// loadedCfg (a breaker each): the default 250ms CallTimeout opened the
	// breaker under load.
	cfg := func() distsem.KeyedConfig { return distsem.KeyedConfig{MaxKeys: maxKeys, Config: loadedCfg()} }
	ks := []*distsem.Keyed{newKeyed(t, cs[0], prefix, limit, cfg()), newKeyed(t, cs[1], prefix, limit, cfg())}
	over := make([]overlap, nkeys)
	var granted, refused atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for i, k := range ks {
		for j := range 24 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				for range 150 {
					ki := r.IntN(nkeys)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					err := k.Do(ctx, "t"+strconv.Itoa(ki), 1, func(context.Context) error {
						over[ki].add(1)
						time.Sleep(time.Duration(r.Int64N(int64(2 * time.Millisecond))))
						over[ki].sub(1)
						return nil
					})
					cancel()
					switch {
					case err == nil:
						granted.Add(1)
					case errors.Is(err, distsem.ErrTooManyKeys):
						refused.Add(1)
					default:
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("caller error: %v", err)
	}
	reached := 0
	for i := range over {
		m := over[i].max.Load()
		if m > limit {
			t.Errorf("key t%d: max overlap %d, want ≤ %d", i, m, limit)
		}
		if m == limit {
			reached++
		}
	}
	if reached == 0 {
		t.Errorf("no key reached its limit: the test did not contend")
	}
	var refusedStats int64
	for _, k := range ks {
		st := k.Stats()
		refusedStats += st.Refused
		if st.Keys != 0 || st.Waiting != 0 || st.Held != 0 || st.Opened != st.Closed {
			t.Errorf("Stats after the run = %+v, want no live key", st)
		}
	}
	if refusedStats != refused.Load() {
		t.Errorf("Stats count %d refusals, callers saw %d", refusedStats, refused.Load())
	}
	if granted.Load() == 0 {
		t.Fatal("nothing granted")
	}
	for i := range nkeys {
		if st := keyStats(t, db.Client, prefix, "t"+strconv.Itoa(i)); st.InUse != 0 || st.Waiting != 0 {
			t.Errorf("key t%d in Redis after the run: %+v", i, st)
		}
	}
	subs := subscribes(t, db.Client) - sub0
	if subs > 2 {
		t.Errorf("%d SUBSCRIBE calls for 2 Keyeds, want at most one each", subs)
	}
	t.Logf("%d granted, %d refused (MaxKeys %d) in %v; keys opened %d+%d; %d SUBSCRIBE calls",
		granted.Load(), refused.Load(), maxKeys, el, ks[0].Stats().Opened, ks[1].Stats().Opened, subs)
}

// TestKeyedIdleKeyCostsNothing: a key whose last call ended is dropped and
// leaves no goroutine: after a first contended key has started the one
// pub/sub receiver of each Keyed, a churn of 200 contended short-lived keys
// adds no goroutine and no SUBSCRIBE, and Close leaves none. The keys'
// Redis state is empty apart from its bookkeeping, which has a TTL.
func TestKeyedIdleKeyCostsNothing(t *testing.T) {
	db := privateRedis(t) // it counts the server's SUBSCRIBE calls
	prefix := db.Prefix + "t:"
	// Short TTLs, so that the TTLs checked at the end are short; a
	// CallTimeout (at most Lease/3) with room for a loaded machine: no call
	// here is meant to time out.
	const ttl = 1500 * time.Millisecond
	cfg := distsem.KeyedConfig{Config: distsem.Config{Lease: ttl, Breaker: breaker.New("test", breaker.Config{CallTimeout: ttl / 3}), WaiterTTL: ttl, TombstoneTTL: ttl}}
	cs := clients(t, db.Client.Options().Addr, 2)
	a := distsem.NewKeyed(cs[0], prefix, 1, cfg)
	b := distsem.NewKeyed(cs[1], prefix, 1, cfg)
	defer a.Close()
	defer b.Close()
	// Goroutines of an earlier test's Semaphores end in their cleanups;
	// give one that is still ending time to end.
	waitDistsemGoroutines(t, 5*time.Second, 0, "before any call")
	ctx := t.Context()
	// contend makes b wait on key behind a's permit, and a on key behind
	// b's: both queue, and are granted by hand-off.
	contend := func(key string) {
		t.Helper()
		for _, pair := range [][2]*distsem.Keyed{{a, b}, {b, a}} {
			h, err := pair[0].Acquire(ctx, key, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				got <- pair[1].Do(c, key, 1, func(context.Context) error { return nil })
			}()
			// Queued in Redis, not only counted as waiting here: a call
			// released before its script ran would be granted without
			// queueing, and would start no receiver.
			waitFor(t, 5*time.Second, "waiter not queued in Redis", func() bool {
				return keyStats(t, db.Client, prefix, key).Waiting == 1
			})
			h.Release(ctx)
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}
	}
	contend("first")
	wantStats(t, a, 0, 0, 0)
	wantStats(t, b, 0, 0, 0)
	// The two receivers, once a renewal still ending has ended.
	const base = 2
	waitDistsemGoroutines(t, 5*time.Second, base, "with no key live after contention (one receiver per Keyed)")
	// The receivers subscribe on their own goroutines: count from when both
	// subscriptions reached the server (on this private server no one else
	// subscribes), or a late one would count as churn.
	waitFor(t, 5*time.Second, "the two receivers never subscribed", func() bool { return subscribes(t, db.Client) >= 2 })
	sub0 := subscribes(t, db.Client)
	if sub0 != 2 {
		t.Errorf("%d SUBSCRIBE calls after the first contended key, want 2 (one per Keyed)", sub0)
	}
	const churn = 200
	start := time.Now()
	for i := range churn {
		contend("k" + strconv.Itoa(i))
	}
	el := time.Since(start)
	wantStats(t, a, 0, 0, 0)
	if st := a.Stats(); st.Opened != 2*(churn+1) || st.Closed != 2*(churn+1) {
		t.Errorf("Stats = %+v, want %d keys opened and closed (each key twice: holder, then waiter)", st, 2*(churn+1))
	}
	waitDistsemGoroutines(t, 5*time.Second, base, "after the churn")
	if subs := subscribes(t, db.Client) - sub0; subs != 0 {
		t.Errorf("%d SUBSCRIBE calls for %d new contended keys, want 0", subs, churn)
	}
	t.Logf("%d contended keys (2 hand-offs each) in %v, %d distsem goroutines throughout", churn, el, base)

	// Redis: nothing held or queued, and every key left has a TTL.
	keyTTL := 2*ttl + 10*time.Second
	keys, err := db.Client.Keys(ctx, "{"+prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no key state in Redis")
	}
	for _, key := range keys {
		if !strings.HasSuffix(key, "}:s") && !strings.HasSuffix(key, "}:t") && !strings.HasSuffix(key, "}:d") && !strings.HasSuffix(key, "}:qe") {
			t.Errorf("key %q left after every permit was released", key)
		}
		ttl, err := db.Client.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > keyTTL {
			t.Errorf("PTTL(%q) = %v, want in (0, %v]", key, ttl, keyTTL)
		}
	}
	a.Close()
	b.Close()
	waitDistsemGoroutines(t, 2*time.Second, 0, "left after Close")
}

// TestKeyedHashTagPerKey: the Redis keys of one key share the hash tag
// {prefix+key}.
func TestKeyedHashTagPerKey(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	k := newKeyed(t, db.Client, prefix, 1, distsem.KeyedConfig{})
	p, err := k.Acquire(t.Context(), "acme", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(t.Context())
	keys, err := db.Client.Keys(t.Context(), "*"+db.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if !strings.HasPrefix(key, "{"+prefix+"acme}:") {
			t.Errorf("key %q not under the hash tag {%sacme}", key, prefix)
		}
	}
	if len(keys) == 0 {
		t.Error("no keys written")
	}
}

// TestKeyedWaiterNeverDropped: with MaxKeys live keys, one held and one with
// a waiter only, a new key is refused at once with ErrTooManyKeys, and
// neither live key is dropped: the waiter is granted when the other process
// releases.
func TestKeyedWaiterNeverDropped(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	cs := clients(t, db.Client.Options().Addr, 2)
	k := newKeyed(t, cs[0], prefix, 1, distsem.KeyedConfig{MaxKeys: 2})
	other := newKeyed(t, cs[1], prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	held, err := k.TryAcquire(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	blocker, err := other.Acquire(ctx, "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got <- k.Do(c, "b", 1, func(context.Context) error { return nil })
	}()
	waitFor(t, 5*time.Second, "waiter on b not queued", func() bool { return keyStats(t, db.Client, prefix, "b").Waiting == 1 })
	wantStats(t, k, 2, 1, 1)

	for _, call := range []struct {
		name string
		f    func() error
	}{
		{"Acquire", func() error { _, err := k.Acquire(ctx, "c", 1); return err }},
		{"TryAcquire", func() error { _, err := k.TryAcquire(ctx, "c", 1); return err }},
		{"Do", func() error { return k.Do(ctx, "c", 1, func(context.Context) error { return nil }) }},
	} {
		start := time.Now()
		err := call.f()
		re, ok := errors.AsType[*distsem.RejectError](err)
		if !ok || !errors.Is(err, distsem.ErrTooManyKeys) || re.RetryAfter() != 0 {
			t.Errorf("%s on a third key with MaxKeys 2 = %v, want a *RejectError matching ErrTooManyKeys", call.name, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s refused after %v, want at once", call.name, d)
		}
	}
	if st := k.Stats(); st.Keys != 2 || st.Refused != 3 {
		t.Errorf("Stats = %+v, want 2 live keys and 3 refusals", st)
	}
	if n, _ := db.Client.Exists(ctx, "{"+prefix+"c}:s").Result(); n != 0 {
		t.Error("a refused key wrote to Redis")
	}
	// A live key takes more calls however full the Keyed is.
	if _, err := k.TryAcquire(ctx, "a", 1); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Errorf("TryAcquire on the held live key = %v, want ErrNoCapacity", err)
	}
	blocker.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter on b = %v, want granted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter on b not granted 5s after the release")
	}
	held.Release(ctx)
	wantStats(t, k, 0, 0, 0)
	p, err := k.TryAcquire(ctx, "c", 1)
	if err != nil {
		t.Fatalf("TryAcquire of a new key once the others are idle = %v", err)
	}
	p.Release(ctx)
}

// TestKeyedCloseWakesWaiters: Close fails the waiters of every key with
// ErrClosed at once; they leave no queue entry; later calls get ErrClosed.
// A permit held at Close keeps its key live until released.
func TestKeyedCloseWakesWaiters(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	cs := clients(t, db.Client.Options().Addr, 2)
	k := distsem.NewKeyed(cs[0], prefix, 1, distsem.KeyedConfig{})
	other := newKeyed(t, cs[1], prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	kept, err := k.Acquire(ctx, "kept", 1)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c"}
	var blockers []*distsem.Permit
	for _, key := range keys {
		p, err := other.Acquire(ctx, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		blockers = append(blockers, p)
	}
	got := make(chan error, len(keys))
	for _, key := range keys {
		go func() {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			p, err := k.Acquire(c, key, 1)
			if p != nil {
				p.Release(context.Background())
			}
			got <- err
		}()
	}
	waitFor(t, 5*time.Second, "waiters not queued", func() bool { return k.Stats().Waiting == int64(len(keys)) })
	closed := time.Now()
	k.Close()
	for range keys {
		select {
		case err := <-got:
			if !errors.Is(err, distsem.ErrClosed) {
				t.Errorf("waiting Acquire after Close = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting Acquire still blocked 5s after Close")
		}
	}
	if d := time.Since(closed); d > time.Second {
		t.Errorf("waiters returned %v after Close, want at once", d)
	}
	wantStats(t, k, 1, 0, 1)
	for _, key := range keys {
		if st := keyStats(t, db.Client, prefix, key); st.Waiting != 0 {
			t.Errorf("key %s: Waiting = %d after Close, want 0", key, st.Waiting)
		}
	}
	if _, err := k.Acquire(ctx, "a", 1); !errors.Is(err, distsem.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, err := k.TryAcquire(ctx, "d", 1); !errors.Is(err, distsem.ErrClosed) {
		t.Errorf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	if err := k.Do(ctx, "d", 1, func(context.Context) error { return nil }); !errors.Is(err, distsem.ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Errorf("Release after Close = %v", err)
	}
	if st := keyStats(t, db.Client, prefix, "kept"); st.InUse != 0 {
		t.Errorf("permit released after Close still held in Redis: %+v", st)
	}
	wantStats(t, k, 0, 0, 0)
	for _, p := range blockers {
		p.Release(ctx)
	}
	if err := k.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestKeyedDoPanicReleases: a panic in Do's fn gives the permit back, and the
// key is dropped.
func TestKeyedDoPanicReleases(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	k := newKeyed(t, db.Client, prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		k.Do(ctx, "a", 1, func(context.Context) error { panic("boom") })
	}()
	wantStats(t, k, 0, 0, 0)
	if st := keyStats(t, db.Client, prefix, "a"); st.InUse != 0 || st.Holders != 0 {
		t.Errorf("after a panic in fn: %+v, want nothing held", st)
	}
	p, err := k.TryAcquire(ctx, "a", 1)
	if err != nil {
		t.Fatalf("TryAcquire after the panic = %v", err)
	}
	p.Release(ctx)
	// Do returns fn's error and releases too.
	want := errors.New("fn failed")
	if err := k.Do(ctx, "a", 1, func(context.Context) error { return want }); err != want {
		t.Errorf("Do = %v, want fn's error", err)
	}
	wantStats(t, k, 0, 0, 0)
}

// TestKeyedBadInput: invalid keys and n are refused before any round trip,
// with errors that never quote the key, and leave nothing live; programmer
// errors panic.
func TestKeyedBadInput(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	var rt redistest.RoundTrips
	c := clients(t, db.Client.Options().Addr, 1)[0]
	c.AddHook(&rt)
	k := newKeyed(t, c, prefix, 2, distsem.KeyedConfig{Config: distsem.Config{MaxNameLen: 64}})
	ctx := t.Context()
	huge := strings.Repeat("x", 10<<20)
	for _, tc := range []struct {
		name, key string
	}{
		{"empty", ""},
		{"65 bytes", strings.Repeat("y", 65)},
		{"10 MB", huge},
	} {
		_, err := k.Acquire(ctx, tc.key, 1)
		if !errors.Is(err, distsem.ErrInvalidKey) {
			t.Errorf("Acquire(%s key) = %v, want ErrInvalidKey", tc.name, err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("Acquire(%s key): error of %d bytes", tc.name, len(err.Error()))
		}
		if err := k.Do(ctx, tc.key, 1, func(context.Context) error { t.Error("fn ran"); return nil }); !errors.Is(err, distsem.ErrInvalidKey) {
			t.Errorf("Do(%s key) = %v, want ErrInvalidKey", tc.name, err)
		}
		if _, err := k.TryAcquire(ctx, tc.key, 1); !errors.Is(err, distsem.ErrInvalidKey) {
			t.Errorf("TryAcquire(%s key) = %v, want ErrInvalidKey", tc.name, err)
		}
	}
	p, err := k.Acquire(ctx, strings.Repeat("y", 64), 1)
	if err != nil {
		t.Fatalf("Acquire(key of MaxNameLen bytes) = %v", err)
	}
	defer p.Release(ctx)
	rt.N.Store(0)
	if _, err := k.Acquire(ctx, "a", 3); !errors.Is(err, distsem.ErrTooLarge) {
		t.Errorf("Acquire(n above the limit) = %v, want ErrTooLarge", err)
	}
	mustPanic(t, "n = 0", func() { k.Acquire(ctx, "a", 0) })
	mustPanic(t, "n < 0", func() { k.TryAcquire(ctx, "a", -1) })
	if n := rt.N.Load(); n != 0 {
		t.Errorf("%d round trips for refused input, want 0", n)
	}
	if st := k.Stats(); st.Keys != 1 || st.Opened != 1 {
		t.Errorf("Stats = %+v, want only the valid key opened", st)
	}

	ok := redis.NewClient(redistest.Options("127.0.0.1:1"))
	defer ok.Close()
	mustPanic(t, "nil client", func() { distsem.NewKeyed(nil, "p", 1, distsem.KeyedConfig{}) })
	mustPanic(t, "limit 0", func() { distsem.NewKeyed(ok, "p", 0, distsem.KeyedConfig{}) })
	mustPanic(t, "negative MaxKeys", func() { distsem.NewKeyed(ok, "p", 1, distsem.KeyedConfig{MaxKeys: -1}) })
	mustPanic(t, "prefix too long", func() {
		distsem.NewKeyed(ok, "pp", 1, distsem.KeyedConfig{Config: distsem.Config{MaxNameLen: 1}})
	})
	mustPanic(t, "negative duration", func() {
		distsem.NewKeyed(ok, "p", 1, distsem.KeyedConfig{Config: distsem.Config{Lease: -1}})
	})
	mustPanic(t, "client without ContextTimeoutEnabled", func() {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer c.Close()
		distsem.NewKeyed(c, "p", 1, distsem.KeyedConfig{})
	})
	var zero distsem.Keyed
	mustPanic(t, "zero Keyed Acquire", func() { zero.Acquire(ctx, "a", 1) })
	mustPanic(t, "zero Keyed Stats", func() { zero.Stats() })
	mustPanic(t, "zero Keyed Close", func() { zero.Close() })
}

// TestKeyedTryAcquireRetryAfter: the RetryAfter of ErrNoCapacity on a key
// made live afresh comes from the hold times of the Keyed's other keys.
func TestKeyedTryAcquireRetryAfter(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	cs := clients(t, db.Client.Options().Addr, 2)
	k := newKeyed(t, cs[0], prefix, 1, distsem.KeyedConfig{})
	other := newKeyed(t, cs[1], prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	k.Do(ctx, "x", 1, func(context.Context) error { time.Sleep(50 * time.Millisecond); return nil })
	h, err := other.Acquire(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	_, err = k.TryAcquire(ctx, "a", 1)
	re, ok := errors.AsType[*distsem.RejectError](err)
	if !ok || !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("TryAcquire on a held key = %v, want ErrNoCapacity", err)
	}
	if d := re.RetryAfter(); d < 40*time.Millisecond || d > time.Second {
		t.Errorf("RetryAfter after one 50ms hold on another key = %v, want about 50ms", d)
	}
	wantStats(t, k, 0, 0, 0)
}

// TestKeyedCancelledWaiterDropsKey: a waiter whose context ends leaves its
// key (not live any more) and its queue entry (withdrawn in the background).
func TestKeyedCancelledWaiterDropsKey(t *testing.T) {
	db := redistest.Connect(t)
	prefix := db.Prefix + "t:"
	cs := clients(t, db.Client.Options().Addr, 2)
	k := newKeyed(t, cs[0], prefix, 1, distsem.KeyedConfig{})
	other := newKeyed(t, cs[1], prefix, 1, distsem.KeyedConfig{})
	ctx := t.Context()
	h, err := other.Acquire(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := k.Acquire(c, "a", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a short deadline = %v, want DeadlineExceeded", err)
	}
	wantStats(t, k, 0, 0, 0)
	waitFor(t, 5*time.Second, "queue entry left by a cancelled waiter", func() bool { return keyStats(t, db.Client, prefix, "a").Waiting == 0 })
}

// TestKeyedCluster: on a 3-node Redis Cluster, keys in different slots keep
// their limit across two processes, and hand-off wake-ups (PUBLISH from the
// scripts, broadcast over the cluster bus to the one subscription of each
// Keyed) arrive: with 10s heartbeats, the workload could not finish in time
// on heartbeats alone.
func TestKeyedCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ContextTimeoutEnabled: true, DisableIdentity: true})
	t.Cleanup(func() { other.Close() })
	cfg := distsem.KeyedConfig{Config: distsem.Config{WaiterTTL: 30 * time.Second}}
	ks := []*distsem.Keyed{newKeyed(t, c.Client, "t:", 2, cfg), newKeyed(t, other, "t:", 2, cfg)}
	keys := []string{"alpha", "bravo", "charlie", "delta"}
	slots := map[int64]bool{}
	for _, key := range keys {
		slot, err := c.Client.ClusterKeySlot(t.Context(), "{t:"+key+"}:s").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 2 {
		t.Fatalf("keys in %d slot(s), want several", len(slots))
	}
	over := make([]overlap, len(keys))
	var left atomic.Int64
	left.Store(400)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for i, k := range ks {
		for j := range 12 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				for left.Add(-1) >= 0 {
					ki := r.IntN(len(keys))
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					err := k.Do(ctx, keys[ki], 1, func(context.Context) error {
						over[ki].add(1)
						time.Sleep(time.Duration(r.Int64N(int64(2 * time.Millisecond))))
						over[ki].sub(1)
						return nil
					})
					cancel()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs[:min(len(errs), 5)] {
		t.Errorf("caller error: %v", err)
	}
	for i, key := range keys {
		if m := over[i].max.Load(); m > 2 {
			t.Errorf("key %s: max overlap %d, want ≤ 2", key, m)
		}
	}
	if el > 15*time.Second {
		t.Errorf("400 contended acquisitions took %v: wake-ups not delivered?", el)
	}
	for _, k := range ks {
		wantStats(t, k, 0, 0, 0)
	}
	t.Logf("400 acquisitions over %d slots in %v", len(slots), el)
}

// BenchmarkKeyedAcquireRelease: an uncontended acquire and release (one
// script call each) on a Semaphore, on a Keyed with the same key every time,
// and on a Keyed with a new key every time (the key is made live and dropped
// per call: what a churn of tenants costs the client).
func BenchmarkKeyedAcquireRelease(b *testing.B) {
	db := redistest.Connect(b)
	ctx := context.Background()
	b.Run("impl=semaphore", func(b *testing.B) {
		s := distsem.New(db.Client, db.Prefix+"sem", 2, distsem.Config{})
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(ctx)
		}
	})
	for _, churn := range []bool{false, true} {
		b.Run(fmt.Sprintf("impl=keyed/newkey=%v", churn), func(b *testing.B) {
			k := distsem.NewKeyed(db.Client, db.Prefix+"t:", 2, distsem.KeyedConfig{})
			defer k.Close()
			keys := make([]string, 10_000)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if churn {
					i = (i + 1) % len(keys)
				}
				p, err := k.Acquire(ctx, keys[i], 1)
				if err != nil {
					b.Fatal(err)
				}
				p.Release(ctx)
			}
		})
	}
}

// Each tenant runs at most 2 PDF exports at once across the fleet; a key
// comes from the verified identity, never from a client header.
func ExampleKeyed_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	exports := distsem.NewKeyed(rdb, "pdf-export:", 2, distsem.KeyedConfig{
		MaxKeys: 50_000, // tenants exporting at once in this process
	})
	defer exports.Close()

	tenant := "acme" // from the authenticated request
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := exports.Do(ctx, tenant, 1, func(ctx context.Context) error {
		// ctx is cancelled if the lease is lost.
		return nil
	})
	switch {
	case errors.Is(err, distsem.ErrTooManyKeys):
		// too many tenants busy in this process: 503
	case errors.Is(err, context.DeadlineExceeded):
		// this tenant's 2 slots stayed busy for 2s: 429
	case err != nil:
		fmt.Println(err)
	}
}
