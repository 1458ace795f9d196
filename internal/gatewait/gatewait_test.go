package gatewait_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/semaphore"
)

var errMaxWait = reject.Sentinel(floodgate.ReasonMaxWait, "consumer: max wait")

// full returns a semaphore of limit 1 whose weight is held, and the gate
// that Take sees.
func full(t *testing.T) (*semaphore.Weighted, floodgate.KeyedGate) {
	t.Helper()
	s := semaphore.New(1, semaphore.Config{})
	if !s.TryAcquire(1) {
		t.Fatal("TryAcquire(1) on a new semaphore = false")
	}
	return s, gatewait.Keyed(s, nil)
}

// result is what a Take returned, from another goroutine.
type result struct {
	h      floodgate.Held
	waited time.Duration
	err    error
}

func takeAsync(ctx context.Context, g floodgate.KeyedGate, maxWait time.Duration, w *gatewait.Waits) <-chan result {
	ch := make(chan result, 1)
	go func() {
		h, waited, err := gatewait.Take(ctx, g, "", 1, maxWait, errMaxWait, w)
		ch <- result{h, waited, err}
	}()
	return ch
}

func checkWaits(t *testing.T, w *gatewait.Waits, waiting int64, count uint64, total time.Duration) {
	t.Helper()
	if got, c, n := w.Waiting.Load(), w.Count.Load(), time.Duration(w.Nanos.Load()); got != waiting || c != count || n != total {
		t.Errorf("Waits = {Waiting %d, Count %d, Nanos %v}, want {%d, %d, %v}", got, c, n, waiting, count, total)
	}
}

// MaxWait < 0: TryHold only. Room is taken at once; no room is the gate's
// refusal at once, and neither is a wait.
func TestNegativeMaxWaitNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		g := gatewait.Keyed(s, nil)
		var w gatewait.Waits
		h, waited, err := gatewait.Take(t.Context(), g, "", 1, -1, errMaxWait, &w)
		if err != nil || h.N() != 1 || waited != 0 {
			t.Fatalf("Take with room = (%+v, %v, %v), want a Held of 1 at once", h, waited, err)
		}
		start := time.Now()
		h2, waited, err := gatewait.Take(t.Context(), g, "", 1, -1, errMaxWait, &w)
		if !errors.Is(err, semaphore.ErrNoCapacity) || h2.N() != 0 || waited != 0 || time.Since(start) != 0 {
			t.Fatalf("Take without room = (%+v, %v, %v) after %v, want ErrNoCapacity at once", h2, waited, err, time.Since(start))
		}
		checkWaits(t, &w, 0, 0, 0)
		h.Release()
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Fatalf("Stats = %+v, want nothing held or waiting", st)
		}
	})
}

// MaxWait == 0: Hold, waiting until the weight is free or ctx ends; a grant
// at once is not a wait.
func TestZeroMaxWaitWaitsForTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		g := gatewait.Keyed(s, nil)
		var w gatewait.Waits
		h, waited, err := gatewait.Take(t.Context(), g, "", 1, 0, errMaxWait, &w)
		if err != nil || h.N() != 1 || waited != 0 {
			t.Fatalf("Take with room = (%+v, %v, %v), want a Held of 1 at once", h, waited, err)
		}
		checkWaits(t, &w, 0, 0, 0)
		ch := takeAsync(t.Context(), g, 0, &w)
		time.Sleep(time.Hour)
		synctest.Wait()
		checkWaits(t, &w, 1, 0, 0)
		h.Release()
		r := <-ch
		if r.err != nil || r.h.N() != 1 || r.waited != time.Hour {
			t.Fatalf("Take released after 1h = (%+v, %v, %v), want a Held after 1h", r.h, r.waited, r.err)
		}
		checkWaits(t, &w, 0, 1, time.Hour)
		r.h.Release()

		// A second wait ends with its context.
		s.TryAcquire(1)
		ctx, cancel := context.WithCancel(t.Context())
		ch = takeAsync(ctx, g, 0, &w)
		time.Sleep(time.Minute)
		cancel()
		r = <-ch
		if r.err != context.Canceled || r.h.N() != 0 || r.waited != time.Minute {
			t.Fatalf("Take cancelled after 1m = (%+v, %v, %v), want context.Canceled after 1m", r.h, r.waited, r.err)
		}
		checkWaits(t, &w, 0, 2, time.Hour+time.Minute)
		s.Release(1)
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Fatalf("Stats = %+v, want nothing held or waiting", st)
		}
	})
}

// MaxWait > 0: TryHold, then Hold for at most MaxWait: a grant within the
// bound is kept, and its context is not ended by the bound passing later;
// no grant by the bound is errMaxWait, exactly at the bound, holding
// nothing.
func TestPositiveMaxWaitBoundsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		g := gatewait.Keyed(s, nil)
		var w gatewait.Waits
		h, waited, err := gatewait.Take(t.Context(), g, "", 1, time.Second, errMaxWait, &w)
		if err != nil || waited != 0 {
			t.Fatalf("Take with room = (%+v, %v, %v), want a Held at once", h, waited, err)
		}
		checkWaits(t, &w, 0, 0, 0) // the fast path is not a wait

		ch := takeAsync(t.Context(), g, time.Second, &w)
		time.Sleep(500 * time.Millisecond)
		h.Release()
		r := <-ch
		if r.err != nil || r.waited != 500*time.Millisecond {
			t.Fatalf("Take granted after 500ms of 1s = (%+v, %v, %v), want a Held", r.h, r.waited, r.err)
		}
		time.Sleep(time.Hour) // well past the bound
		if err := r.h.Context().Err(); err != nil {
			t.Fatalf("work context ended by the bound passing after the grant: %v", err)
		}
		checkWaits(t, &w, 0, 1, 500*time.Millisecond)

		start := time.Now()
		ch = takeAsync(t.Context(), g, time.Second, &w)
		r2 := <-ch
		if !errors.Is(r2.err, errMaxWait) || r2.h.N() != 0 || r2.waited != time.Second || time.Since(start) != time.Second {
			t.Fatalf("Take with no grant = (%+v, %v, %v), want errMaxWait after exactly 1s", r2.h, r2.waited, r2.err)
		}
		checkWaits(t, &w, 0, 2, 1500*time.Millisecond)
		if st := s.Stats(); st.InUse != 1 || st.Waiting != 0 {
			t.Fatalf("Stats after the bounded wait = %+v, want only the first grant held, no waiter", st)
		}
		wctx := r.h.Context()
		r.h.Release()
		if wctx.Err() == nil {
			t.Error("the bounded wait's context lives on after Release, want it cancelled")
		}
		if st := s.Stats(); st.InUse != 0 {
			t.Fatalf("Stats = %+v, want nothing held", st)
		}
	})
}

// lateGate grants as its semaphore does, but returns the grant only once
// the wait's context has ended: a grant that arrives exactly as the bound
// passes, made deterministic.
type lateGate struct{ s *semaphore.Weighted }

func (g lateGate) Hold(ctx context.Context, _ string, n int64) (floodgate.Held, error) {
	h, err := g.s.Hold(context.WithoutCancel(ctx), n)
	if err == nil {
		<-ctx.Done()
	}
	return h, err
}

func (g lateGate) TryHold(ctx context.Context, _ string, n int64) (floodgate.Held, error) {
	return g.s.TryHold(ctx, n)
}

// The grant that races the bound is given back: the caller gets errMaxWait
// and the weight is free again.
func TestGrantAsTheBoundPassesIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		s.TryAcquire(1)
		var w gatewait.Waits
		ch := takeAsync(t.Context(), lateGate{s}, time.Second, &w)
		synctest.Wait()
		s.Release(1) // granted now, returned when the bound cancels the wait
		r := <-ch
		if !errors.Is(r.err, errMaxWait) || r.h.N() != 0 || r.waited != time.Second {
			t.Fatalf("Take whose grant raced the bound = (%+v, %v, %v), want errMaxWait after 1s", r.h, r.waited, r.err)
		}
		if st := s.Stats(); st.InUse != 0 || st.Waiting != 0 || st.Acquired != 2 {
			t.Fatalf("Stats = %+v, want the racing grant (the 2nd) given back: nothing held", st)
		}
		checkWaits(t, &w, 0, 1, time.Second)
	})
}

// The caller's context ending wins over the bound: ctx.Err(), whether it is
// cancelled or its deadline comes before MaxWait, and nothing held.
func TestContextBeforeTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, g := full(t)
		var w gatewait.Waits
		ctx, cancel := context.WithCancel(t.Context())
		ch := takeAsync(ctx, g, time.Hour, &w)
		time.Sleep(time.Second)
		cancel()
		if r := <-ch; r.err != context.Canceled || r.h.N() != 0 || r.waited != time.Second {
			t.Fatalf("Take cancelled before its bound = (%+v, %v, %v), want context.Canceled after 1s", r.h, r.waited, r.err)
		}
		dctx, dcancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer dcancel()
		if r := <-takeAsync(dctx, g, time.Hour, &w); r.err != context.DeadlineExceeded || r.h.N() != 0 || r.waited != 2*time.Second {
			t.Fatalf("Take whose deadline comes before its bound = (%+v, %v, %v), want DeadlineExceeded after 2s", r.h, r.waited, r.err)
		}
		done, dcancel2 := context.WithCancel(t.Context())
		dcancel2()
		if r := <-takeAsync(done, g, time.Hour, &w); r.err != context.Canceled || r.waited != 0 {
			t.Fatalf("Take with a done context = (%+v, %v, %v), want context.Canceled at once", r.h, r.waited, r.err)
		}
		checkWaits(t, &w, 0, 2, 3*time.Second)
		if st := s.Stats(); st.InUse != 1 || st.Waiting != 0 {
			t.Fatalf("Stats = %+v, want only the first holder", st)
		}
	})
}

func TestKeyed(t *testing.T) {
	k := semaphore.NewKeyed(1, semaphore.KeyedConfig{})
	if g := gatewait.Keyed(nil, k); g != floodgate.KeyedGate(k) {
		t.Errorf("Keyed(nil, k) = %v, want k", g)
	}
	s := semaphore.New(1, semaphore.Config{})
	g := gatewait.Keyed(s, k)
	h, err := g.Hold(t.Context(), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.TryHold(t.Context(), "b", 1); !errors.Is(err, semaphore.ErrNoCapacity) {
		t.Errorf("TryHold of another key on the unkeyed gate = %v, want ErrNoCapacity: the key is ignored", err)
	}
	if st := k.Stats(); st.Keys != 0 {
		t.Errorf("the Keyed was used: %+v", st)
	}
	h.Release()
}

// estimateGate refuses TryHold with a fixed RetryAfter estimate and never
// grants Hold: what remains of the estimate after the bound is the delay of
// the bound's refusal.
type estimateGate struct{ est time.Duration }

func (g estimateGate) TryHold(context.Context, string, int64) (floodgate.Held, error) {
	return floodgate.Held{}, reject.New(errNoRoom, g.est)
}

func (g estimateGate) Hold(ctx context.Context, _ string, _ int64) (floodgate.Held, error) {
	<-ctx.Done()
	return floodgate.Held{}, ctx.Err()
}

var errNoRoom = reject.Sentinel(floodgate.ReasonNoCapacity, "gate: no room")

func TestBoundKeepsTheGatesEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct{ est, want time.Duration }{
			{5 * time.Second, 4 * time.Second}, // 1s of the 5s waited
			{time.Second, 0},                   // nothing left of it: the consumer's default
			{0, 0},
		} {
			_, _, err := gatewait.Take(t.Context(), estimateGate{tt.est}, "", 1, time.Second, errMaxWait, nil)
			re, ok := errors.AsType[*floodgate.RejectError](err)
			if !ok || !errors.Is(err, errMaxWait) || re.Reason != floodgate.ReasonMaxWait || re.Delay != tt.want {
				t.Errorf("estimate %v: Take = %v (%+v), want a max_wait RejectError with delay %v", tt.est, err, re, tt.want)
			}
		}
	})
}

// finalGate refuses TryHold with an error waiting cannot change, and counts
// the Holds it is asked for.
type finalGate struct{ holds *int }

var errTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "gate: too large")

func (g finalGate) TryHold(context.Context, string, int64) (floodgate.Held, error) {
	return floodgate.Held{}, reject.New(errTooLarge, 0)
}

func (g finalGate) Hold(ctx context.Context, _ string, _ int64) (floodgate.Held, error) {
	*g.holds++
	return floodgate.Held{}, reject.New(errTooLarge, 0)
}

// TestOnlyNoRoomWaits: a TryHold refusal other than no_capacity is returned
// at once for every MaxWait, with no Hold, no wait counted and no clock.
func TestOnlyNoRoomWaits(t *testing.T) {
	for _, maxWait := range []time.Duration{-1, 0, time.Second} {
		holds := 0
		var w gatewait.Waits
		_, waited, err := gatewait.Take(t.Context(), finalGate{&holds}, "", 1, maxWait, errMaxWait, &w)
		if !errors.Is(err, errTooLarge) || waited != 0 || holds != 0 || w.Count.Load() != 0 {
			t.Errorf("MaxWait %v: Take = (waited %v, %v), %d Holds, %d waits; want the refusal at once, no Hold, no wait", maxWait, waited, err, holds, w.Count.Load())
		}
	}
}
