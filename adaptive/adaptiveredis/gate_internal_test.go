package adaptiveredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestHoldAccounting: once the process knows the round, a hold released
// normally is a sample, one dropped or released after its deadline is a
// drop, one released after its context was cancelled is neither, and a
// second Release does nothing; the flush carries them to the fleet's round.
// A weight above Min is refused without I/O.
func TestHoldAccounting(t *testing.T) {
	db := redistest.Connect(t)
	g := quietGate(t, db.Client, db.Key("acct"), Config{Min: 2, Initial: 4})
	ctx := context.Background()
	if _, err := g.Hold(ctx, 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Hold(3) with Min 2: %v, want ErrTooLarge", err)
	}
	h, err := g.Hold(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	g.flush() // initialises the fleet: round 1
	h.Release()
	if g.round != 1 {
		t.Fatalf("round after the first flush: %d, want 1", g.round)
	}

	hold := func(ctx context.Context) floodgate.Held {
		h, err := g.Hold(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ok := hold(ctx)
	time.Sleep(2 * time.Millisecond)
	ok.Release()
	ok.Release() // idempotent

	g.Drop(hold(ctx))
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Millisecond)
	late := hold(dctx)
	<-dctx.Done()
	late.Release()
	dcancel()
	cctx, ccancel := context.WithCancel(ctx)
	gone := hold(cctx)
	ccancel()
	gone.Release()

	s := g.Stats()
	if s.Samples != 1 || s.Drops != 2 || s.InFlight != 0 {
		t.Fatalf("after 1 normal, 2 dropped, 1 cancelled hold: samples %d drops %d in flight %d; want 1, 2, 0", s.Samples, s.Drops, s.InFlight)
	}
	g.flush()
	r := flushOnce(t, g, 1, 0, 0, g.ver)
	if r.samples != 1 || r.drops != 2 || r.lat < int64(2*time.Millisecond) {
		t.Errorf("round 1 in Redis: %d samples (%dns), %d drops; want 1 (≥ 2ms), 2", r.samples, r.lat, r.drops)
	}
}

// TestObserverEvents: the gate reports the semaphore's admits as its own
// (Component adaptive, Source store), its own releases with the hold time
// (and not the semaphore's), and KindLimit when it learns the fleet limit.
func TestObserverEvents(t *testing.T) {
	db := redistest.Connect(t)
	var rec observetest.Recorder
	g := quietGate(t, db.Client, db.Key("obs"), Config{Initial: 3, Observer: &rec})
	h, err := g.Hold(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	g.flush()
	time.Sleep(time.Millisecond)
	h.Release()
	evs := rec.Take()
	var admit, release, limit int
	for _, e := range evs {
		switch e.Kind {
		case floodgate.KindAdmit:
			admit++
			if e.Component != floodgate.ComponentAdaptive || e.Source != floodgate.SourceStore || e.N != 1 {
				t.Errorf("admit event %+v, want component adaptive, source store, N 1", e)
			}
		case floodgate.KindRelease:
			release++
			if e.Component != floodgate.ComponentAdaptive || e.Duration < time.Millisecond {
				t.Errorf("release event %+v, want component adaptive and the hold time", e)
			}
		case floodgate.KindLimit:
			limit++
			if e.Component != floodgate.ComponentAdaptive || e.N != 3 {
				t.Errorf("limit event %+v, want component adaptive, N 3", e)
			}
		}
	}
	if admit != 1 || release != 1 || limit != 1 {
		t.Errorf("events %+v: %d admits, %d releases, %d limits; want 1 each", evs, admit, release, limit)
	}
}
