package semaphore_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/semaphore"
)

// take returns rec's events with Err dropped, so that they compare with ==.
func take(rec *observetest.Recorder) []floodgate.Event {
	ev := rec.Take()
	for i := range ev {
		ev[i].Err = nil
	}
	return ev
}

func TestObserverRunsWithoutLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s *semaphore.Weighted
		var acquired, released, rejected atomic.Int64
		s = semaphore.New(2, semaphore.Config{
			MaxWaiters: 1,
			// The Observer calls back into the semaphore: it would deadlock if
			// it ran with the lock held.
			Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
				switch e.Kind {
				case floodgate.KindAdmit:
					s.Stats()
					acquired.Add(e.N)
				case floodgate.KindRelease:
					s.Stats()
					released.Add(e.N)
				case floodgate.KindReject:
					s.TryAcquire(1)
					rejected.Add(1)
				}
			}),
		})
		s.Acquire(t.Context(), 2)
		w := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		if err := s.Acquire(t.Context(), 1); !errors.Is(err, semaphore.ErrQueueFull) {
			t.Fatalf("Acquire on a full queue = %v", err)
		}
		s.Release(2)
		synctest.Wait()
		if w.err != nil {
			t.Fatal(w.err)
		}
		s.Release(1)
		if acquired.Load() != 3 || released.Load() != 3 || rejected.Load() != 1 {
			t.Fatalf("observer saw acquired=%d released=%d rejected=%d, want 3, 3, 1", acquired.Load(), released.Load(), rejected.Load())
		}
	})
}

func TestObserverReportsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waited []time.Duration
		s := semaphore.New(1, semaphore.Config{Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind == floodgate.KindAdmit {
				waited = append(waited, e.Duration)
			}
		})})
		s.Acquire(t.Context(), 1)
		w := acquireAsync(t.Context(), s, 1)
		time.Sleep(3 * time.Second)
		s.Release(1)
		synctest.Wait()
		if w.err != nil || len(waited) != 2 || waited[0] != 0 || waited[1] != 3*time.Second {
			t.Fatalf("waits = %v (err %v), want [0 3s]", waited, w.err)
		}
	})
}

// Every kind of event a Weighted reports, with its fields: a grant at once
// and after a wait, a wait cancelled, a MaxWait rejection after the wait, an
// early rejection, and releases; a TryHold refusal is not an event.
func TestObserverEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := new(observetest.Recorder)
		s := semaphore.New(2, semaphore.Config{MaxWait: 5 * time.Second, Observer: rec})
		const sem = floodgate.ComponentSemaphore
		s.Acquire(t.Context(), 2)

		ctx, cancel := context.WithCancel(t.Context())
		w := acquireAsync(ctx, s, 1)
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		if !errors.Is(w.err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v", w.err)
		}
		w = acquireAsync(t.Context(), s, 2) // waits MaxWait
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !errors.Is(w.err, semaphore.ErrMaxWait) {
			t.Fatalf("Acquire past MaxWait = %v", w.err)
		}
		s.Acquire(t.Context(), 3) // too large: at once
		if _, err := s.TryHold(t.Context(), 1); !errors.Is(err, semaphore.ErrNoCapacity) {
			t.Fatalf("TryHold on a full semaphore = %v", err)
		}
		cctx, ccancel := context.WithCancel(t.Context())
		ccancel()
		s.Acquire(cctx, 1) // done before the call: a cancel at once

		w = acquireAsync(t.Context(), s, 1)
		time.Sleep(2 * time.Second)
		s.Release(2)
		synctest.Wait()
		if !w.done.Load() || w.err != nil {
			t.Fatalf("Acquire after the Release: done=%v err=%v", w.done.Load(), w.err)
		}
		s.Release(1)
		want := []floodgate.Event{
			{Kind: floodgate.KindAdmit, Component: sem, N: 2},
			{Kind: floodgate.KindCancel, Component: sem, N: 1, Duration: time.Second},
			{Kind: floodgate.KindReject, Component: sem, N: 2, Duration: 5 * time.Second, Reason: floodgate.ReasonMaxWait},
			{Kind: floodgate.KindReject, Component: sem, N: 3, Reason: floodgate.ReasonTooLarge},
			{Kind: floodgate.KindCancel, Component: sem, N: 1},
			{Kind: floodgate.KindRelease, Component: sem, N: 2},
			{Kind: floodgate.KindAdmit, Component: sem, N: 1, Duration: 2 * time.Second},
			{Kind: floodgate.KindRelease, Component: sem, N: 1},
		}
		if got := take(rec); !slices.Equal(got, want) {
			t.Fatalf("events:\n got %+v\nwant %+v", got, want)
		}
	})
}

// A Keyed reports as its semaphores do (Component semaphore, never a key),
// and its own ErrTooManyKeys refusals of Acquire; TryHold's refusals are not
// events.
func TestKeyedObserverEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := new(observetest.Recorder)
		k := semaphore.NewKeyed(1, semaphore.KeyedConfig{MaxKeys: 1, Observer: rec})
		const sem = floodgate.ComponentSemaphore
		ctx := t.Context()
		k.Acquire(ctx, "a", 1)
		k.Acquire(ctx, "b", 1) // MaxKeys
		k.TryHold(ctx, "a", 1) // full
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- k.Acquire(cctx, "a", 1) }()
		time.Sleep(time.Second)
		cancel()
		<-done
		go func() { done <- k.Acquire(ctx, "a", 1) }()
		time.Sleep(2 * time.Second)
		k.Release("a", 1)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		k.Release("a", 1)
		want := []floodgate.Event{
			{Kind: floodgate.KindAdmit, Component: sem, N: 1},
			{Kind: floodgate.KindReject, Component: sem, N: 1, Reason: floodgate.ReasonTooManyKeys},
			{Kind: floodgate.KindCancel, Component: sem, N: 1, Duration: time.Second},
			{Kind: floodgate.KindRelease, Component: sem, N: 1},
			{Kind: floodgate.KindAdmit, Component: sem, N: 1, Duration: 2 * time.Second},
			{Kind: floodgate.KindRelease, Component: sem, N: 1},
		}
		if got := take(rec); !slices.Equal(got, want) {
			t.Fatalf("events:\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestDoReleasesOnErrorAndPanic(t *testing.T) {
	s := semaphore.New(1, semaphore.Config{})
	boom := errors.New("boom")
	if err := s.Do(t.Context(), 1, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "fn panicked" {
				t.Fatalf("recover() = %v, want fn's panic", r)
			}
		}()
		s.Do(t.Context(), 1, func(context.Context) error { panic("fn panicked") })
	}()
	if st := s.Stats(); st.InUse != 0 {
		t.Fatalf("InUse = %d after Do returned and panicked, want 0", st.InUse)
	}
	called := false
	err := s.Do(t.Context(), 2, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, semaphore.ErrTooLarge) || called {
		t.Fatalf("Do over limit = %v, fn called %v; want ErrTooLarge without calling fn", err, called)
	}
}

// An Observer that panics on a grant cannot leak the weight: it is released
// before the panic reaches the caller, whichever call granted it, at once or
// after a wait.
func TestPanickingObserverDoesNotLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		panicOnAdmit := floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind == floodgate.KindAdmit && armed.Load() {
				panic("observer")
			}
		})
		s := semaphore.New(2, semaphore.Config{Observer: panicOnAdmit})
		k := semaphore.NewKeyed(2, semaphore.KeyedConfig{Observer: panicOnAdmit})
		ctx := t.Context()
		for _, c := range []struct {
			name string
			call func()
		}{
			{"Do", func() { s.Do(ctx, 1, func(context.Context) error { return nil }) }},
			{"Acquire", func() { s.Acquire(ctx, 2) }},
			{"TryAcquire", func() { s.TryAcquire(1) }},
			{"Hold", func() { s.Hold(ctx, 1) }},
			{"TryHold", func() { s.TryHold(ctx, 1) }},
			{"Acquire, queued", func() {
				afterWait(&armed, func() { s.Acquire(ctx, 2) }, func() { s.Acquire(ctx, 1) }, func() { s.Release(2) })
			}},
			{"Keyed.Acquire", func() { k.Acquire(ctx, "a", 2) }},
			{"Keyed.TryAcquire", func() { k.TryAcquire("a", 1) }},
			{"Keyed.Hold", func() { k.Hold(ctx, "a", 1) }},
			{"Keyed.TryHold", func() { k.TryHold(ctx, "a", 1) }},
			{"Keyed.Acquire, queued", func() {
				afterWait(&armed, func() { k.Acquire(ctx, "a", 2) }, func() { k.Acquire(ctx, "a", 1) }, func() { k.Release("a", 2) })
			}},
		} {
			armed.Store(true)
			func() {
				defer func() {
					if r := recover(); r != "observer" {
						t.Fatalf("%s: recover() = %v, want the Observer's panic", c.name, r)
					}
				}()
				c.call()
			}()
			if st := s.Stats(); st.InUse != 0 {
				t.Fatalf("%s: InUse = %d after the Observer panicked on a grant, want 0", c.name, st.InUse)
			}
			if st := k.Stats(); st.InUse != 0 || st.Keys != 0 {
				t.Fatalf("%s: Keyed Stats = %+v after the Observer panicked on a grant, want nothing held", c.name, st)
			}
		}
	})
}

// afterWait fills a gate with fill while armed is false, queues acquire behind
// it on another goroutine with armed true, frees the gate, and panics with
// what acquire panicked with, on this goroutine. It runs in a synctest bubble.
func afterWait(armed *atomic.Bool, fill, acquire, free func()) {
	armed.Store(false)
	fill()
	armed.Store(true)
	var p any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		acquire()
	}()
	synctest.Wait()
	free()
	<-done
	panic(p)
}
