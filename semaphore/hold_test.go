package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/semaphore"
)

// The two semaphores are the gates of the one contract every consumer takes.
var (
	_ floodgate.Gate      = (*semaphore.Weighted)(nil)
	_ floodgate.KeyedGate = (*semaphore.Keyed)(nil)
)

func TestHoldReleasesItsWeight(t *testing.T) {
	s := semaphore.New(3, semaphore.Config{})
	ctx := t.Context()
	h, err := s.Hold(ctx, 2)
	if err != nil {
		t.Fatalf("Hold(ctx, 2) = %v, want nil", err)
	}
	if h.Context() != ctx || h.N() != 2 {
		t.Errorf("Hold returned (ctx %v, N %d), want the caller's ctx and 2", h.Context(), h.N())
	}
	if !s.TryAcquire(1) { // another holder's weight
		t.Fatal("TryAcquire(1) with 2 of 3 held = false")
	}
	h.Release()
	if st := s.Stats(); st.InUse != 1 {
		t.Fatalf("InUse after Release = %d, want 1 (the other holder's)", st.InUse)
	}
	s.Release(1)
	if st := s.Stats(); st.InUse != 0 {
		t.Fatalf("InUse after all released = %d, want 0", st.InUse)
	}
}

// A local Held's Release is x/sync's Release: not idempotent (Held's doc). A
// second Release gives back weight that is not its own, and panics once more
// is given back than is held.
func TestHeldReleaseTwiceIsReleaseTwice(t *testing.T) {
	s := semaphore.New(3, semaphore.Config{})
	h, err := s.Hold(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	defer func() {
		if r := recover(); r != "semaphore: released more than held" {
			t.Fatalf("second Release with nothing held: recover() = %v, want the over-release panic", r)
		}
		if st := s.Stats(); st.InUse != 0 {
			t.Fatalf("InUse after the panicking Release = %d, want 0 (unchanged)", st.InUse)
		}
	}()
	h.Release()
}

func TestHoldWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		first, err := s.Hold(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var second floodgate.Held
		done := make(chan error, 1)
		go func() {
			var err error
			second, err = s.Hold(t.Context(), 1)
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("second Hold returned %v while the first held the weight", err)
		default:
		}
		first.Release()
		if err := <-done; err != nil {
			t.Fatalf("second Hold after the first released = %v, want nil", err)
		}
		second.Release()
		if st := s.Stats(); st.InUse != 0 || st.Acquired != 2 {
			t.Fatalf("Stats = %+v, want InUse 0, Acquired 2", st)
		}
	})
}

func TestHoldErrorsHoldNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{MaxWait: time.Second})
		cctx, cancel := context.WithCancel(t.Context())
		cancel()
		tests := []struct {
			name string
			ctx  context.Context
			n    int64
			want error
		}{
			{"done context", cctx, 1, context.Canceled},
			{"too large", t.Context(), 3, semaphore.ErrTooLarge},
		}
		for _, tt := range tests {
			h, err := s.Hold(tt.ctx, tt.n)
			if !errors.Is(err, tt.want) || !heldNothing(h) {
				t.Errorf("%s: Hold = (%+v, %v), want (zero Held, %v)", tt.name, h, err, tt.want)
			}
		}
		held, err := s.Hold(t.Context(), 2)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if h, err := s.Hold(t.Context(), 1); !errors.Is(err, semaphore.ErrMaxWait) || !heldNothing(h) {
			t.Errorf("Hold on a full semaphore = (%+v, %v), want (zero Held, ErrMaxWait)", h, err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Hold waited %v, want MaxWait (1s)", d)
		}
		held.Release()
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Errorf("Stats = %+v, want nothing held or waiting", st)
		}
	})
}

// TryHold takes free weight at once, and otherwise refuses at once: with
// ErrTooLarge above the limit, and with ErrNoCapacity (never waiting, never
// overtaking a queued caller) whose RetryAfter is 0 until the semaphore has
// seen its throughput and then the estimate.
func TestTryHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		ctx := t.Context()
		h, err := s.TryHold(ctx, 1)
		if err != nil || h.N() != 1 || h.Context() != ctx {
			t.Fatalf("TryHold(ctx, 1) on a free semaphore = (%+v, %v), want a Held of 1", h, err)
		}
		start := time.Now()
		assertReject(t, "TryHold(ctx, 2)", s, 2, semaphore.ErrTooLarge, 0)
		assertReject(t, "TryHold(ctx, 1) while full, throughput unknown", s, 1, semaphore.ErrNoCapacity, 0)
		if d := time.Since(start); d != 0 {
			t.Errorf("refusals took %v, want none", d)
		}

		// A waiter queues; the holder keeps its weight 1s, which the
		// semaphore observes as a release rate of 1 per second.
		w := acquireAsync(ctx, s, 1)
		synctest.Wait()
		assertReject(t, "TryHold(ctx, 1) behind a queued caller", s, 1, semaphore.ErrNoCapacity, 0)
		time.Sleep(time.Second)
		h.Release()
		synctest.Wait()
		if !w.done.Load() || w.err != nil {
			t.Fatalf("waiter after the Release: done=%v err=%v", w.done.Load(), w.err)
		}
		if r := s.Stats().ReleaseRate; r != 1 {
			t.Fatalf("ReleaseRate = %v, want 1 per second", r)
		}
		// 1 short at 1 per second: 1s.
		assertReject(t, "TryHold(ctx, 1) while full, throughput known", s, 1, semaphore.ErrNoCapacity, time.Second)
		s.Release(1)
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 || st.RejectedTooLarge != 0 {
			t.Errorf("Stats = %+v, want nothing held or waiting, TryHold's refusals not counted", st)
		}
	})
}

func assertReject(t *testing.T, call string, s *semaphore.Weighted, n int64, want error, delay time.Duration) {
	t.Helper()
	h, err := s.TryHold(t.Context(), n)
	if !errors.Is(err, want) || !heldNothing(h) {
		t.Fatalf("%s = (%+v, %v), want (zero Held, %v)", call, h, err, want)
	}
	if re, ok := errors.AsType[*semaphore.RejectError](err); !ok || re.RetryAfter() != delay {
		t.Fatalf("%s: error %#v, want a *RejectError with RetryAfter %v", call, err, delay)
	}
}

func TestKeyedHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := semaphore.NewKeyed(2, semaphore.KeyedConfig{MaxKeys: 1})
		ctx := t.Context()
		h, err := k.Hold(ctx, "a", 2)
		if err != nil || h.N() != 2 || h.Context() != ctx {
			t.Fatalf(`Hold(ctx, "a", 2) = (%+v, %v), want a Held of 2`, h, err)
		}
		for _, c := range []struct {
			name string
			hold func() (floodgate.Held, error)
			want error
		}{
			{`Hold(ctx, "b", 1): a second key over MaxKeys 1`, func() (floodgate.Held, error) { return k.Hold(ctx, "b", 1) }, semaphore.ErrTooManyKeys},
			{`TryHold(ctx, "b", 1): a second key over MaxKeys 1`, func() (floodgate.Held, error) { return k.TryHold(ctx, "b", 1) }, semaphore.ErrTooManyKeys},
			{`TryHold(ctx, "a", 1): "a" full`, func() (floodgate.Held, error) { return k.TryHold(ctx, "a", 1) }, semaphore.ErrNoCapacity},
			{`TryHold(ctx, "a", 3): above the limit`, func() (floodgate.Held, error) { return k.TryHold(ctx, "a", 3) }, semaphore.ErrTooLarge},
			{`Hold(ctx, "a", 3): above the limit`, func() (floodgate.Held, error) { return k.Hold(ctx, "a", 3) }, semaphore.ErrTooLarge},
		} {
			got, err := c.hold()
			if !errors.Is(err, c.want) || !heldNothing(got) {
				t.Errorf("%s = (%+v, %v), want (zero Held, %v)", c.name, got, err, c.want)
			}
			if _, ok := errors.AsType[*semaphore.RejectError](err); !ok {
				t.Errorf("%s: error %T is not a *RejectError", c.name, err)
			}
		}

		// A Hold on the full key waits for the Release of the key's Held.
		done := make(chan floodgate.Held, 1)
		go func() {
			h, err := k.Hold(ctx, "a", 1)
			if err != nil {
				t.Error(err)
			}
			done <- h
		}()
		synctest.Wait()
		if st := k.Stats(); st.Waiting != 1 {
			t.Fatalf("Stats = %+v, want 1 waiting on the full key", st)
		}
		h.Release()
		second := <-done
		if st := k.Stats(); st.InUse != 1 || st.Keys != 1 {
			t.Fatalf("Stats after the first Release = %+v, want 1 held on 1 key", st)
		}
		second.Release()
		if st := k.Stats(); st.InUse != 0 || st.Keys != 0 {
			t.Fatalf("Stats after both released = %+v, want nothing held, the key dropped", st)
		}
		// The key is dropped: another takes its place, through TryHold.
		h, err = k.TryHold(ctx, "b", 1)
		if err != nil {
			t.Fatalf(`TryHold(ctx, "b", 1) once "a" is dropped = %v, want nil`, err)
		}
		h.Release()
	})
}

func TestLimit(t *testing.T) {
	var zero semaphore.Weighted
	if got := zero.Limit(); got != 0 {
		t.Errorf("zero Weighted: Limit() = %d, want 0", got)
	}
	s := semaphore.New(5, semaphore.Config{})
	if got := s.Limit(); got != 5 {
		t.Errorf("Limit() = %d, want 5", got)
	}
	s.SetLimit(2)
	if got := s.Limit(); got != 2 {
		t.Errorf("Limit() after SetLimit(2) = %d, want 2", got)
	}
}

// heldNothing reports whether h is the zero Held, which every error returns.
func heldNothing(h floodgate.Held) bool { return h.Context() == nil && h.N() == 0 }
