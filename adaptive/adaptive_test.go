package adaptive_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/internal/observetest"
)

var _ floodgate.Gate = (*adaptive.Gate)(nil)

func TestHoldsAtMostTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := adaptive.New(adaptive.Config{Initial: 2})
		a, err := g.Hold(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := g.TryHold(t.Context(), 1)
		_, err = g.TryHold(t.Context(), 1)
		var re *floodgate.RejectError
		if !errors.Is(err, adaptive.ErrNoCapacity) || !errors.As(err, &re) || re.Reason != floodgate.ReasonNoCapacity {
			t.Fatalf("third TryHold: %v, want a RejectError matching ErrNoCapacity", err)
		}
		if got := err.Error(); got[:9] != "adaptive:" {
			t.Fatalf("error %q is not prefixed adaptive:", got)
		}
		// A Hold waits, in order, and is granted when a holder releases.
		done := make(chan floodgate.Held)
		go func() {
			h, err := g.Hold(t.Context(), 1)
			if err != nil {
				t.Error(err)
			}
			done <- h
		}()
		synctest.Wait()
		if st := g.Stats(); st.Waiting != 1 || st.InFlight != 2 {
			t.Fatalf("stats %+v, want 1 waiting and 2 in flight", st)
		}
		a.Release()
		c := <-done
		b.Release()
		c.Release()
		if st := g.Stats(); st.InFlight != 0 {
			t.Fatalf("in flight %d after every release", st.InFlight)
		}
	})
}

func TestWeightAboveMinIsTooLarge(t *testing.T) {
	g := adaptive.New(adaptive.Config{Min: 2, Initial: 8})
	if _, err := g.Hold(t.Context(), 3); !errors.Is(err, adaptive.ErrTooLarge) {
		t.Fatalf("Hold(3) with Min 2: %v, want ErrTooLarge", err)
	}
	if _, err := g.TryHold(t.Context(), 3); !errors.Is(err, adaptive.ErrTooLarge) {
		t.Fatalf("TryHold(3) with Min 2: %v, want ErrTooLarge", err)
	}
	h, err := g.Hold(t.Context(), 2)
	if err != nil {
		t.Fatalf("Hold(2) with Min 2: %v", err)
	}
	h.Release()
}

func TestCancelledWaitHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := adaptive.New(adaptive.Config{Initial: 1})
		h, _ := g.Hold(t.Context(), 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := g.Hold(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Hold past its deadline: %v", err)
		}
		h.Release()
		if st := g.Stats(); st.InFlight != 0 || st.Waiting != 0 {
			t.Fatalf("stats %+v after a cancelled wait", st)
		}
	})
}

// hold holds the gate for d, as a call to the downstream would.
func hold(t *testing.T, g *adaptive.Gate, ctx context.Context, d time.Duration) floodgate.Held {
	t.Helper()
	h, err := g.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	return h
}

func TestDropsAndDeadlinesCountAsDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := adaptive.New(adaptive.Config{Initial: 4})
		g.Drop(hold(t, g, t.Context(), time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		hold(t, g, ctx, 2*time.Millisecond).Release() // released after its deadline: a timeout
		ctx2, cancel2 := context.WithCancel(t.Context())
		h := hold(t, g, ctx2, time.Millisecond)
		cancel2()
		h.Release() // cancelled by its caller: neither
		hold(t, g, t.Context(), time.Millisecond).Release()
		if st := g.Stats(); st.Drops != 2 || st.Samples != 1 || st.InFlight != 0 {
			t.Fatalf("drops %d samples %d in flight %d, want 2, 1, 0", st.Drops, st.Samples, st.InFlight)
		}
	})
}

func TestObserverSeesHoldsAndLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec observetest.Recorder
		// Initial 2: the gate first checks its start by halving (to 1),
		// then grows on the flat latency.
		g := adaptive.New(adaptive.Config{Initial: 2, MinSamples: 10, MinRound: time.Millisecond, Observer: &rec})
		var wg sync.WaitGroup
		for range 4 { // four callers on a limit of 2: the gate is full, latency flat
			wg.Go(func() {
				for range 20 {
					hold(t, g, t.Context(), 5*time.Millisecond).Release()
				}
			})
		}
		wg.Wait()
		var admits, releases, limits int
		for _, e := range rec.Take() {
			if e.Component != floodgate.ComponentAdaptive {
				t.Fatalf("event %+v: component %q", e, e.Component)
			}
			switch e.Kind {
			case floodgate.KindAdmit:
				admits++
			case floodgate.KindRelease:
				releases++
				if e.Duration != 5*time.Millisecond {
					t.Fatalf("release after %v, want the hold time 5ms", e.Duration)
				}
			case floodgate.KindLimit:
				if e.N > 2 {
					limits++
				}
				if e.Duration != 5*time.Millisecond {
					t.Fatalf("limit event %+v: want the 5ms baseline", e)
				}
			}
		}
		if admits != 80 || releases != 80 || limits == 0 {
			t.Fatalf("%d admits, %d releases, %d limit changes above 2; want 80, 80, some", admits, releases, limits)
		}
		if st := g.Stats(); st.Limit <= 2 || st.Increases == 0 || st.Baseline != 5*time.Millisecond {
			t.Fatalf("stats %+v: the limit should have grown on flat latency", st)
		}
	})
}

func TestDropOfAWrappedHeldReleasesIt(t *testing.T) {
	g := adaptive.New(adaptive.Config{Initial: 1})
	h, _ := g.Hold(t.Context(), 1)
	released := false
	wrapped := floodgate.NewHeld(t.Context(), func(string, int64) { released = true; h.Release() }, "", 1)
	g.Drop(wrapped) // a consumer's own Held (bulkhead's after a MaxWait): its Release runs
	if st := g.Stats(); !released || st.InFlight != 0 || st.Drops != 0 {
		t.Fatalf("released %v, stats %+v: want the wrapper released, nothing dropped", released, st)
	}
}
