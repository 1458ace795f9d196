package bulkhead_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
)

// TestShedGrantAsWaitEnds: a queued request whose MaxWait ends at the
// instant the gate is granted to it gives the grant back and is refused;
// its class's counters stay whole (InFlight back to 0, Admitted only for
// requests that ran). In a bubble, the holder's release and the waiter's
// MaxWait fall on the same instant, so the two race every round.
func TestShedGrantAsWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := semaphore.New(1, semaphore.Config{})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
			Name: "global", Gate: g,
			Classes: []bulkhead.Criticality{{Name: "critical"}, {Name: "default", MaxWait: 10 * time.Millisecond}},
		}}})
		ran := 0
		for range 200 {
			release := make(chan struct{})
			if err := <-hold(b, "critical", release); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- b.Do(as("default"), bulkhead.Request{}, func(context.Context) error { ran++; return nil })
			}()
			synctest.Wait() // queued
			go func() { time.Sleep(10 * time.Millisecond); close(release) }()
			if err := <-done; err != nil && !errors.Is(err, bulkhead.ErrShed) {
				t.Fatalf("default: %v", err)
			}
			synctest.Wait()
		}
		st := b.Stats().Layers[0]
		if c := st.Classes[1]; c.InFlight != 0 || c.Admitted != uint64(ran) || c.Admitted+c.Shed != 200 {
			t.Errorf("default class after 200 rounds, %d ran: %+v", ran, c)
		}
		if st.InFlight != 0 || g.Stats().InUse != 0 {
			t.Errorf("layer %d in flight, gate %+v", st.InFlight, g.Stats())
		}
	})
}
