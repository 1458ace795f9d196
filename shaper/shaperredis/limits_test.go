package shaperredis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestKeyTooLong: a key above Config.MaxKeyLen is refused with ErrInvalidKey
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
		if _, err := m.AllowN(ctx, long, 1); err != shaperredis.ErrInvalidKey {
			t.Fatalf("AllowN with a %d-byte key: %v, want ErrInvalidKey", len(long), err)
		}
		if _, err := m.Admit(ctx, long, 1); err != shaperredis.ErrInvalidKey {
			t.Fatalf("Admit with a long key: %v, want ErrInvalidKey", err)
		}
		if m.Allow(ctx, long) {
			t.Fatal("Allow with a long key = true")
		}
	}
	if st := brk.Stats(); st.StoreFailures != 0 || brk.State() != breaker.StateClosed {
		t.Errorf("breaker after long keys: %+v, %v; want no failures, closed", st, brk.State())
	}
	short := shaperredis.NewMeter(deadClient(), lim, shaperredis.Config{MaxKeyLen: 4, Policy: breaker.FailOpen})
	if _, err := short.AllowN(ctx, "12345", 1); err != shaperredis.ErrInvalidKey {
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
