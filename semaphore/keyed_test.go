package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

func wantKeyed(t *testing.T, k *semaphore.Keyed, keys int, inUse int64, waiting int) {
	t.Helper()
	if st := k.Stats(); st.Keys != keys || st.InUse != inUse || st.Waiting != waiting {
		t.Fatalf("Stats = %+v, want Keys %d, InUse %d, Waiting %d", st, keys, inUse, waiting)
	}
}

// TestKeyedPerKeyLimit: each key has its own limit; a key is dropped as soon as
// it is idle; a released key comes back fresh.
func TestKeyedPerKeyLimit(t *testing.T) {
	k := semaphore.NewKeyed(2, semaphore.KeyedConfig{})
	for _, key := range []string{"a", "b"} {
		for range 2 {
			if !k.TryAcquire(key, 1) {
				t.Fatalf("TryAcquire(%q, 1) = false under the limit", key)
			}
		}
		if k.TryAcquire(key, 1) {
			t.Fatalf("TryAcquire(%q, 1) = true over the limit of 2", key)
		}
	}
	wantKeyed(t, k, 2, 4, 0)
	k.Release("a", 2)
	wantKeyed(t, k, 1, 2, 0)
	if err := k.Acquire(t.Context(), "a", 2); err != nil {
		t.Fatalf("Acquire(a, 2) after release = %v", err)
	}
	k.Release("a", 1)
	k.Release("a", 1)
	k.Release("b", 2)
	wantKeyed(t, k, 0, 0, 0)
}

// TestKeyedBadInput: every refusal leaves the Keyed as it was.
func TestKeyedBadInput(t *testing.T) {
	k := semaphore.NewKeyed(2, semaphore.KeyedConfig{MaxKeys: 1})
	if err := k.Acquire(t.Context(), "a", 3); !errors.Is(err, semaphore.ErrTooLarge) {
		t.Errorf("Acquire(n=3 > limit 2) = %v, want ErrTooLarge", err)
	}
	if k.TryAcquire("a", 3) {
		t.Error("TryAcquire(n=3 > limit 2) = true")
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if err := k.Acquire(done, "a", 1); err != context.Canceled {
		t.Errorf("Acquire(done ctx) = %v, want context.Canceled", err)
	}
	wantKeyed(t, k, 0, 0, 0)
	for name, f := range map[string]func(){
		"Acquire(0)":      func() { k.Acquire(t.Context(), "a", 0) },
		"TryAcquire(-1)":  func() { k.TryAcquire("a", -1) },
		"Release(0)":      func() { k.Release("a", 0) },
		"Release(unheld)": func() { k.Release("a", 1) },
		"NewKeyed(-1)":    func() { semaphore.NewKeyed(-1, semaphore.KeyedConfig{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
	wantKeyed(t, k, 0, 0, 0)
	// MaxKeys: a second key is refused at once while the first is held.
	if err := k.Acquire(t.Context(), "a", 1); err != nil {
		t.Fatal(err)
	}
	err := k.Acquire(t.Context(), "b", 1)
	if !errors.Is(err, semaphore.ErrTooManyKeys) {
		t.Errorf("Acquire(new key beyond MaxKeys) = %v, want ErrTooManyKeys", err)
	}
	if k.TryAcquire("b", 1) {
		t.Error("TryAcquire(new key beyond MaxKeys) = true")
	}
	if st := k.Stats(); st.TooMany != 2 {
		t.Errorf("Stats.TooMany = %d, want 2", st.TooMany)
	}
	func() {
		defer func() { recover() }()
		k.Release("a", 2) // more than held: panics, state unchanged
	}()
	wantKeyed(t, k, 1, 1, 0)
	k.Release("a", 1)
	if err := k.Acquire(t.Context(), "b", 1); err != nil {
		t.Errorf("Acquire(b) once a is idle = %v, want nil", err)
	}
	k.Release("b", 1)
	wantKeyed(t, k, 0, 0, 0)
}

// TestKeyedWaiterKeyNotEvicted: a key whose only claim is a waiter stays live
// (it counts against MaxKeys, and the waiter is granted on that same key), and a
// cancelled waiter gives the key back.
func TestKeyedWaiterKeyNotEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := semaphore.NewKeyed(1, semaphore.KeyedConfig{MaxKeys: 1})
		ctx := t.Context()
		if err := k.Acquire(ctx, "a", 1); err != nil {
			t.Fatal(err)
		}
		var got atomic.Value
		go func() { got.Store(errOrNil(k.Acquire(ctx, "a", 1))) }()
		synctest.Wait()
		wantKeyed(t, k, 1, 1, 1)
		k.Release("a", 1) // hands the weight to the waiter: the key must stay
		synctest.Wait()
		if e := got.Load(); e == nil || e.(errBox).err != nil {
			t.Fatalf("waiter after Release: %v, want granted", e)
		}
		wantKeyed(t, k, 1, 1, 0)
		if k.TryAcquire("b", 1) {
			t.Fatal("new key admitted while the waiter's key holds the only slot of MaxKeys")
		}

		// A waiter alone keeps its key: cancel it while the holder is gone.
		cctx, cancel := context.WithCancel(ctx)
		var cerr atomic.Value
		go func() { cerr.Store(errOrNil(k.Acquire(cctx, "a", 1))) }()
		synctest.Wait()
		wantKeyed(t, k, 1, 1, 1)
		cancel()
		synctest.Wait()
		if e := cerr.Load(); e == nil || e.(errBox).err != context.Canceled {
			t.Fatalf("cancelled waiter: %v, want context.Canceled", e)
		}
		wantKeyed(t, k, 1, 1, 0)
		k.Release("a", 1)
		wantKeyed(t, k, 0, 0, 0)
	})
}

// TestKeyedMaxWait: the per-key MaxWait applies; a timed-out waiter leaves
// nothing behind.
func TestKeyedMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := semaphore.NewKeyed(1, semaphore.KeyedConfig{MaxWait: time.Second})
		if err := k.Acquire(t.Context(), "a", 1); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := k.Acquire(t.Context(), "a", 1)
		if !errors.Is(err, semaphore.ErrMaxWait) || time.Since(start) != time.Second {
			t.Fatalf("Acquire on a full key = %v after %v, want ErrMaxWait after 1s", err, time.Since(start))
		}
		wantKeyed(t, k, 1, 1, 0)
		k.Release("a", 1)
		wantKeyed(t, k, 0, 0, 0)
	})
}

type errBox struct{ err error }

func errOrNil(err error) errBox { return errBox{err} }

// TestKeyedHammer: goroutines acquire and release random weights on a few keys,
// with cancellations; no key ever holds more than its limit, and everything is
// given back at the end. Run with -race.
func TestKeyedHammer(t *testing.T) {
	const limit, keys, workers, rounds = 3, 5, 8, 400
	k := semaphore.NewKeyed(limit, semaphore.KeyedConfig{MaxKeys: 4})
	var held [keys]atomic.Int64
	var over atomic.Bool
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				i := r.IntN(keys)
				key := strconv.Itoa(i)
				n := 1 + r.Int64N(limit)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				var err error
				if r.IntN(3) == 0 {
					if !k.TryAcquire(key, n) {
						err = errors.New("no")
					}
				} else {
					err = k.Acquire(ctx, key, n)
				}
				cancel()
				if err != nil {
					continue
				}
				if held[i].Add(n) > limit {
					over.Store(true)
				}
				held[i].Add(-n)
				k.Release(key, n)
			}
		})
	}
	wg.Wait()
	if over.Load() {
		t.Error("a key held more than its limit")
	}
	wantKeyed(t, k, 0, 0, 0)
}

// TestKeyedDoPanic: Do gives the weight back when fn panics.
func TestKeyedDoPanic(t *testing.T) {
	k := semaphore.NewKeyed(1, semaphore.KeyedConfig{})
	func() {
		defer func() { recover() }()
		k.Do(t.Context(), "a", 1, func(context.Context) error { panic("boom") })
	}()
	wantKeyed(t, k, 0, 0, 0)
}

// TestKeyedAllocs: acquire+release on an idle key reuses a pooled semaphore.
func TestKeyedAllocs(t *testing.T) {
	k := semaphore.NewKeyed(2, semaphore.KeyedConfig{})
	ctx := context.Background()
	k.Acquire(ctx, "tenant", 1)
	k.Release("tenant", 1)
	a := testing.AllocsPerRun(200, func() {
		k.Acquire(ctx, "tenant", 1)
		k.Release("tenant", 1)
	})
	if a != 0 {
		t.Errorf("Acquire+Release on an idle key allocs = %v, want 0", a)
	}
}
