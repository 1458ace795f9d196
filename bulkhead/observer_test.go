package bulkhead_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// events is an Observer that keeps what it is told, without the errors.
type events struct {
	mu  sync.Mutex
	got []floodgate.Event
}

func (o *events) Observe(e floodgate.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e.Err = nil
	o.got = append(o.got, e)
}

func (o *events) take() []floodgate.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	return got
}

func wantEvents(t *testing.T, what string, got, want []floodgate.Event) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: events\n%+v\nwant\n%+v", what, got, want)
	}
}

// TestObserver: Config.Observer is told, per layer, of each admission with
// the time waited for the layer's gate (0 for a grant at once, whose clock
// is not read), each release, each refusal with its word and wait, and a
// request whose context ended while it waited; a request refused before any
// layer (no identity) is a refusal of Part "".
func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o events
		w := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
		b := bulkhead.New(bulkhead.Config{
			Layers:   []bulkhead.Layer{{Name: "g", Gate: w, MaxWait: 2 * time.Second}},
			Observer: &o,
		})
		ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
		ok := func(context.Context) error { return nil }
		admit := floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentBulkhead, Part: "g", N: 1}
		release := floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentBulkhead, Part: "g", N: 1}

		hold := make(chan struct{})
		held := make(chan error)
		go func() { held <- b.Do(ctx, bulkhead.Request{}, func(context.Context) error { <-hold; return nil }) }()
		synctest.Wait()
		wantEvents(t, "a grant at once", o.take(), []floodgate.Event{admit})

		if err := b.Do(ctx, bulkhead.Request{}, ok); !errors.Is(err, bulkhead.ErrMaxWait) {
			t.Fatalf("Do on a full gate = %v, want ErrMaxWait", err)
		}
		wantEvents(t, "a wait that timed out", o.take(), []floodgate.Event{{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead,
			Part: "g", N: 1, Reason: floodgate.ReasonMaxWait, Duration: 2 * time.Second}})

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(500*time.Millisecond, cancel)
		if err := b.Do(cctx, bulkhead.Request{}, ok); err != context.Canceled {
			t.Fatalf("Do cancelled while it waits = %v, want context.Canceled", err)
		}
		wantEvents(t, "a wait cancelled", o.take(), []floodgate.Event{{Kind: floodgate.KindCancel, Component: floodgate.ComponentBulkhead,
			Part: "g", N: 1, Duration: 500 * time.Millisecond}})

		done := make(chan error)
		go func() { done <- b.Do(ctx, bulkhead.Request{}, ok) }()
		time.Sleep(time.Second)
		close(hold)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Do granted after 1s = %v", err)
		}
		waited := admit
		waited.Duration = time.Second
		wantEvents(t, "a grant after 1s", o.take(), []floodgate.Event{release, waited, release})

		if err := b.Do(t.Context(), bulkhead.Request{}, ok); !errors.Is(err, bulkhead.ErrNoIdentity) {
			t.Fatalf("Do without an identity = %v, want ErrNoIdentity", err)
		}
		wantEvents(t, "no identity", o.take(), []floodgate.Event{{Kind: floodgate.KindReject, Component: floodgate.ComponentBulkhead,
			Reason: floodgate.ReasonNoIdentity}})

		// With MaxWait 0 too, a grant at once is not a wait.
		w0 := bulkhead.New(bulkhead.Config{
			Layers:   []bulkhead.Layer{{Name: "g", Gate: semaphore.New(1, semaphore.Config{})}},
			Observer: &o,
		})
		if err := w0.Do(ctx, bulkhead.Request{}, ok); err != nil {
			t.Fatal(err)
		}
		wantEvents(t, "a grant at once, MaxWait 0", o.take(), []floodgate.Event{admit, release})
		if ls := layerStats(t, w0, "g"); ls.Waits != 0 || ls.Admitted != 1 {
			t.Errorf("layer after a grant at once: %+v, want 1 admitted, no wait", ls)
		}
	})
}

// TestWorkersObserver: WorkersConfig.Observer is told of each started job
// with its class and the time it spent queued, of each job's end with its
// run time, of a Submit refused (queue full), and of a Do whose context
// ended while its job was queued.
func TestWorkersObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o events
		w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
			Classes:  []bulkhead.WorkerClass{{Name: "fg"}, {Name: "bg", MaxQueue: 1}},
			Observer: &o,
		})
		block := make(chan struct{})
		if err := w.Submit(t.Context(), "fg", bulkhead.Job{Run: func(context.Context) error { <-block; return nil }}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := w.Submit(t.Context(), "bg", bulkhead.Job{Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
		if err := w.Submit(t.Context(), "bg", bulkhead.Job{Run: func(context.Context) error { return nil }}); !errors.Is(err, bulkhead.ErrQueueFull) {
			t.Fatalf("Submit beyond MaxQueue = %v, want ErrQueueFull", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if err := w.Do(ctx, "fg", func(context.Context) error { return nil }); err != context.DeadlineExceeded {
			t.Fatalf("Do queued past its deadline = %v", err)
		}
		time.Sleep(700 * time.Millisecond)
		close(block)
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		ev := func(k floodgate.Kind, class string, d time.Duration) floodgate.Event {
			return floodgate.Event{Kind: k, Component: floodgate.ComponentWorkers, Part: class, N: 1, Duration: d}
		}
		full := ev(floodgate.KindReject, "bg", 0)
		full.Reason = floodgate.ReasonQueueFull
		wantEvents(t, "workers", o.take(), []floodgate.Event{
			ev(floodgate.KindAdmit, "fg", 0),
			full,
			ev(floodgate.KindCancel, "fg", 300*time.Millisecond),
			ev(floodgate.KindRelease, "fg", time.Second),
			ev(floodgate.KindAdmit, "bg", time.Second),
			ev(floodgate.KindRelease, "bg", 0),
		})
	})
}

// TestPanickingObserverRefunds: a panic before the request is served (here
// the Observer's, on the second layer's admit) is a refusal: the first
// layer's rate gets its quota back and no gate stays held.
func TestPanickingObserverRefunds(t *testing.T) {
	var panicked atomic.Bool
	obs := floodgate.ObserverFunc(func(e floodgate.Event) {
		if e.Kind == floodgate.KindAdmit && e.Part == "gate" && panicked.CompareAndSwap(false, true) {
			panic("observer")
		}
	})
	gate := semaphore.New(1, semaphore.Config{})
	b := bulkhead.New(bulkhead.Config{Observer: obs, Layers: []bulkhead.Layer{
		{Name: "rate", Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(1), Burst: 1})},
		{Name: "gate", Gate: gate},
	}})
	ctx := bulkhead.WithIdentity(t.Context(), bulkhead.Identity{Tenant: "a"})
	func() {
		defer func() {
			if r := recover(); r != "observer" {
				t.Fatalf("recovered %v, want the Observer's panic", r)
			}
		}()
		_ = b.Do(ctx, bulkhead.Request{}, func(context.Context) error { return nil })
	}()
	if st := gate.Stats(); st.InUse != 0 {
		t.Errorf("gate InUse after the panic = %d, want 0", st.InUse)
	}
	ran := false
	if err := b.Do(ctx, bulkhead.Request{}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("the request after the panic = %v (ran %v), want admitted: the rate's one token given back", err, ran)
	}
}
