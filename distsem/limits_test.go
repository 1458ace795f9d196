package distsem_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// mustPanic runs f and fails unless it panics with a "distsem: " message.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.HasPrefix(s, "distsem: ") {
			t.Errorf("%s: panic = %v, want a distsem: panic", what, r)
		}
	}()
	f()
}

// Values above 2^53 are rounded by Lua numbers (limit 2^60 admitted 2^60+1,
// math.MaxInt64 was stored negative): New refuses them, SetLimit returns an
// error and leaves the stored limit as it was.
func TestLimitsOutOfLuaRangeRefused(t *testing.T) {
	ok := redis.NewClient(redistest.Options("127.0.0.1:1"))
	defer ok.Close()
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"limit MaxLimit+1", func() { distsem.New(ok, "x", distsem.MaxLimit+1, distsem.Config{}) }},
		{"limit 2^60", func() { distsem.New(ok, "x", 1<<60, distsem.Config{}) }},
		{"limit MaxInt64", func() { distsem.New(ok, "x", math.MaxInt64, distsem.Config{}) }},
		{"Lease above MaxTTL", func() { distsem.New(ok, "x", 1, distsem.Config{Lease: distsem.MaxTTL + time.Millisecond}) }},
		{"WaiterTTL above MaxTTL", func() { distsem.New(ok, "x", 1, distsem.Config{WaiterTTL: math.MaxInt64}) }},
		{"TombstoneTTL above MaxTTL", func() { distsem.New(ok, "x", 1, distsem.Config{TombstoneTTL: distsem.MaxTTL + 1}) }},
	} {
		mustPanic(t, tc.name, tc.f)
	}

	db := redistest.Connect(t)
	ctx := t.Context()
	s := newSem(t, db.Client, db.Prefix+"sem", distsem.MaxLimit, distsem.Config{})
	// The largest limit is exact: holding all of it, 1 more does not fit.
	all, err := s.Acquire(ctx, distsem.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.TryAcquire(ctx, 1); !errors.Is(err, distsem.ErrNoCapacity) {
		t.Fatalf("TryAcquire(1) with MaxLimit of MaxLimit held = %v, %v; want ErrNoCapacity", p, err)
	}
	if p, err := s.Acquire(ctx, distsem.MaxLimit+1); !errors.Is(err, distsem.ErrTooLarge) {
		t.Fatalf("Acquire(MaxLimit+1) = %v, %v; want ErrTooLarge", p, err)
	}
	for _, limit := range []int64{distsem.MaxLimit + 1, 1 << 60, math.MaxInt64, 0, -1} {
		err := s.SetLimit(ctx, limit)
		if err == nil || !strings.HasPrefix(err.Error(), "distsem: ") {
			t.Errorf("SetLimit(%d) = %v, want a distsem: error", limit, err)
		}
	}
	if st := stats(t, s); st.Limit != distsem.MaxLimit || st.InUse != distsem.MaxLimit {
		t.Errorf("after refused SetLimits: Stats = %+v, want Limit and InUse MaxLimit", st)
	}
	all.Release(ctx)
}

// A name is part of every key: New refuses one longer than Config.MaxNameLen
// (DefaultMaxNameLen if zero), before any round trip.
func TestNameLengthBounded(t *testing.T) {
	ok := redis.NewClient(redistest.Options("127.0.0.1:1"))
	defer ok.Close()
	long := strings.Repeat("n", distsem.DefaultMaxNameLen+1)
	mustPanic(t, "empty name", func() { distsem.New(ok, "", 1, distsem.Config{}) })
	mustPanic(t, "name of DefaultMaxNameLen+1 bytes", func() { distsem.New(ok, long, 1, distsem.Config{}) })
	mustPanic(t, "name of 16MB", func() { distsem.New(ok, strings.Repeat("n", 16<<20), 1, distsem.Config{}) })
	mustPanic(t, "name longer than MaxNameLen", func() { distsem.New(ok, "abcd", 1, distsem.Config{MaxNameLen: 3}) })
	mustPanic(t, "negative MaxNameLen", func() { distsem.New(ok, "abcd", 1, distsem.Config{MaxNameLen: -1}) })
	distsem.New(ok, long[:distsem.DefaultMaxNameLen], 1, distsem.Config{}).Close()
	distsem.New(ok, long, 1, distsem.Config{MaxNameLen: len(long)}).Close()
}

// A zero Semaphore panics with a distsem: message on every method (it
// returned ErrTooLarge from Acquire).
func TestZeroSemaphorePanics(t *testing.T) {
	var s distsem.Semaphore
	ctx := context.Background()
	mustPanic(t, "Acquire", func() { s.Acquire(ctx, 1) })
	mustPanic(t, "TryAcquire", func() { s.TryAcquire(ctx, 1) })
	mustPanic(t, "Do", func() { s.Do(ctx, 1, func(context.Context) error { return nil }) })
	mustPanic(t, "SetLimit", func() { s.SetLimit(ctx, 1) })
	mustPanic(t, "Stats", func() { s.Stats(ctx) })
	mustPanic(t, "Keys", func() { s.Keys() })
	mustPanic(t, "Close", func() { s.Close() })
}
