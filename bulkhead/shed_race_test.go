package bulkhead_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
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

// pausingGate is a semaphore whose first successful Hold, once armed, waits
// for resume before it returns: the window in which the request it was for
// may leave and another may queue.
type pausingGate struct {
	*semaphore.Weighted
	armed   bool
	granted chan struct{} // closed when the paused Hold has its permit
	resume  chan struct{}
}

func (g *pausingGate) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	h, err := g.Weighted.Hold(ctx, n)
	if err == nil && g.armed {
		g.armed = false
		close(g.granted)
		<-g.resume
	}
	return h, err
}

// TestShedGrantAfterEveryWaiterLeft: the gate grants the dispatcher's wait
// just as its only waiter leaves (its context is cancelled, so the wait's is
// too); a request that queues before the dispatcher goes on must be served
// under a live context, not handed that cancelled grant.
func TestShedGrantAfterEveryWaiterLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &pausingGate{Weighted: semaphore.New(1, semaphore.Config{}), granted: make(chan struct{}), resume: make(chan struct{})}
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
			Name: "global", Gate: g, Classes: []bulkhead.Criticality{{Name: "critical"}, {Name: "default"}},
		}}})
		release := make(chan struct{})
		if err := <-hold(b, "critical", release); err != nil {
			t.Fatal(err)
		}
		actx, cancelA := context.WithCancel(as("default"))
		aDone := make(chan error, 1)
		go func() { aDone <- b.Do(actx, bulkhead.Request{}, func(context.Context) error { return nil }) }()
		synctest.Wait() // A queued, the dispatcher waits in Hold
		g.armed = true
		close(release) // the dispatcher's Hold gets the permit and pauses
		<-g.granted
		cancelA() // A leaves: the queue is empty, the dispatcher's wait is cancelled
		if err := <-aDone; !errors.Is(err, context.Canceled) {
			t.Fatalf("A: %v, want context.Canceled", err)
		}
		bDone := make(chan error, 1)
		go func() {
			bDone <- b.Do(as("default"), bulkhead.Request{}, func(ctx context.Context) error {
				select { // a second of work, unless its context ends
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
					return nil
				}
			})
		}()
		synctest.Wait() // B queued behind the paused grant
		close(g.resume)
		if err := <-bDone; err != nil {
			t.Fatalf("B ran under a done context or was refused: %v", err)
		}
		synctest.Wait()
		if st := g.Stats(); st.InUse != 0 {
			t.Errorf("gate after both: %+v", st)
		}
	})
}

// TestShedGrantAsContextEnds: a queued request whose deadline falls at the
// instant the gate is granted to it either runs or ends with its context's
// error (a grant found with the context already done goes back); either way
// the counters stay whole and nothing stays held. (Whether fn then sees its
// context done is a race no library can close: a context may end at any
// instant after the check.)
func TestShedGrantAsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := semaphore.New(1, semaphore.Config{})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
			Name: "global", Gate: g, Classes: []bulkhead.Criticality{{Name: "critical"}, {Name: "default"}},
		}}})
		ran := 0
		for range 200 {
			release := make(chan struct{})
			if err := <-hold(b, "critical", release); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(as("default"), 10*time.Millisecond)
			done := make(chan error, 1)
			go func() {
				done <- b.Do(ctx, bulkhead.Request{}, func(ctx context.Context) error {
					ran++
					return nil
				})
			}()
			synctest.Wait() // queued
			go func() { time.Sleep(10 * time.Millisecond); close(release) }()
			if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("default: %v", err)
			}
			cancel()
			synctest.Wait()
		}
		st := b.Stats().Layers[0]
		if c := st.Classes[1]; c.InFlight != 0 || c.Admitted != uint64(ran) || c.Admitted+c.Canceled != 200 {
			t.Errorf("default class after 200 rounds, %d ran: %+v", ran, c)
		}
		if st.InFlight != 0 || g.Stats().InUse != 0 {
			t.Errorf("layer %d in flight, gate %+v", st.InFlight, g.Stats())
		}
	})
}
