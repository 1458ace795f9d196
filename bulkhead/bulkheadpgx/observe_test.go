package bulkheadpgx_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
)

// kinds lists evs as "part:kind" words.
func kinds(evs []floodgate.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Part+":"+e.Kind.String())
	}
	return strings.Join(s, " ")
}

// TestObserver checks the events of a class: an admit without a wait has
// Duration 0 and one after a wait the wait; a release the time held; a
// context ending while waiting is a cancel; a weight above the gate's limit
// and a key the gate refuses are rejects with their words; every event is of
// Component db with the class as Part (never the key), and an unlimited
// class says nothing.
func TestObserver(t *testing.T) {
	rdb := redistest.Connect(t)
	fleetKeyed := distsem.NewKeyed(rdb.Client, rdb.Key("obs:"), 1, distsem.KeyedConfig{})
	t.Cleanup(func() { fleetKeyed.Close() })
	sem := semaphore.New(1, semaphore.Config{})
	var rec observetest.Recorder
	db := bulkheadpgx.New(pgtest.Pool(t, 5), bulkheadpgx.Config{Observer: &rec, Classes: []bulkheadpgx.Class{
		{Name: "c", Gate: sem, MaxWait: 5 * time.Second},
		{Name: "big", N: 2, Gate: sem},
		{Name: "keyed", KeyedGate: fleetKeyed, Key: func(context.Context) string { return "" }},
	}})
	c := db.Class("c")
	ctx := context.Background()
	check := func(t *testing.T, want string) []floodgate.Event {
		t.Helper()
		evs := rec.Take()
		if got := kinds(evs); got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		for _, e := range evs {
			if e.Component != floodgate.ComponentDB || e.N < 1 {
				t.Errorf("event %+v: want Component db and the class's weight", e)
			}
		}
		return evs
	}
	// waitOne runs f, which waits for c's gate, on a goroutine, and returns
	// once it waits; the returned channel has f's error.
	waitOne := func(t *testing.T, f func() error) chan error {
		errc := make(chan error, 1)
		go func() { errc <- f() }()
		waitFor(t, "a waiting call", func() bool { return c.Stats().Waiting == 1 })
		return errc
	}

	t.Run("admit, wait, release", func(t *testing.T) {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		begun := time.Now()
		if evs := check(t, "c:admit"); evs[0].Duration != 0 {
			t.Errorf("admit at once: Duration %v, want 0", evs[0].Duration)
		}
		errc := waitOne(t, func() error { _, err := c.Exec(ctx, "SELECT 1"); return err })
		waiting := time.Now() // the wait began before this
		minHeld := time.Since(begun)
		minWait := time.Since(waiting)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("the waiting Exec: %v", err)
		}
		// The release is told before the weight goes back: the waiter's
		// admit comes after it.
		evs := check(t, "c:release c:admit c:release")
		if evs[0].Duration < minHeld {
			t.Errorf("release of the tx: Duration %v, want the time it was held (at least %v)", evs[0].Duration, minHeld)
		}
		if maxWait := time.Since(begun); evs[1].Duration < minWait || evs[1].Duration > maxWait {
			t.Errorf("admit after a wait: Duration %v, want the wait (between %v and %v)", evs[1].Duration, minWait, maxWait)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		errc := waitOne(t, func() error { _, err := c.Exec(cctx, "SELECT 1"); return err })
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Exec whose context was cancelled while waiting = %v, want context.Canceled", err)
		}
		tx.Rollback(ctx)
		if evs := check(t, "c:admit c:cancel c:release"); evs[1].Duration <= 0 {
			t.Errorf("cancel: Duration %v, want the wait", evs[1].Duration)
		}
	})
	t.Run("too large", func(t *testing.T) {
		_, err := db.Class("big").Exec(ctx, "SELECT 1")
		re, ok := errors.AsType[*bulkheadpgx.RejectError](err)
		if !ok || !errors.Is(err, bulkheadpgx.ErrTooLarge) || !errors.Is(err, semaphore.ErrTooLarge) ||
			re.Reason != floodgate.ReasonTooLarge || re.Layer != "big" || re.Delay != 0 {
			t.Errorf("Exec of weight 2 on a gate of 1 = %v (%+v), want a RejectError too_large of layer big matching "+
				"bulkheadpgx.ErrTooLarge and semaphore.ErrTooLarge, no delay", err, re)
		}
		evs := check(t, "big:reject")
		if evs[0].Reason != floodgate.ReasonTooLarge || evs[0].Err != err || evs[0].N != 2 {
			t.Errorf("reject event %+v, want Reason too_large, N 2 and the call's error", evs[0])
		}
	})
	t.Run("key the gate refuses", func(t *testing.T) {
		k := db.Class("keyed")
		_, err := k.Exec(ctx, "SELECT 1")
		if !errors.Is(err, distsem.ErrInvalidKey) || !strings.Contains(err.Error(), "class keyed") {
			t.Errorf("Exec with an empty key on a distsem.Keyed = %v, want distsem.ErrInvalidKey naming the class", err)
		}
		if _, ok := errors.AsType[*bulkheadpgx.RejectError](err); ok {
			t.Errorf("Exec with an invalid key = %v: a RejectError, want a failure (no retry helps)", err)
		}
		if st := k.Stats(); st.Errors != 1 || st.InUse != 0 {
			t.Errorf("stats %+v, want Errors 1, InUse 0", st)
		}
		evs := check(t, "keyed:reject")
		if evs[0].Reason != floodgate.ReasonInvalidKey || evs[0].Err != err {
			t.Errorf("reject event %+v, want Reason invalid_key and the call's error", evs[0])
		}
	})
	t.Run("unlimited says nothing", func(t *testing.T) {
		if _, err := db.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		check(t, "")
	})
	checkIdle(t, db)
}
