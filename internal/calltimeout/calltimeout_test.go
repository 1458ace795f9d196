package calltimeout

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type key struct{}

func TestBoundPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var zero Bounder
		ctx := context.Background()
		if c, dl, cancel := zero.Bound(ctx); c != ctx || !dl.IsZero() || cancel != nil {
			t.Fatalf("zero Bounder: got %v, %v, cancel %v; want ctx unchanged", c, dl, cancel != nil)
		}
		b := Bounder{Timeout: time.Second}
		sooner, cancelSooner := context.WithTimeout(ctx, time.Second) // exactly the bound: not later
		defer cancelSooner()
		if c, dl, cancel := b.Bound(sooner); c != sooner || !dl.IsZero() || cancel != nil {
			t.Fatalf("sooner deadline: got a new context (%v, %v)", c, dl)
		}
	})
}

func TestBoundSharesOneDeadlineForUncancellableCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 1600 * time.Millisecond
		b := Bounder{Timeout: timeout}
		start := time.Now()
		c1, dl1, cancel := b.Bound(context.Background())
		if cancel != nil {
			t.Fatal("a shared context came with a cancel func")
		}
		if !dl1.Equal(start.Add(timeout)) {
			t.Fatalf("deadline %v after start, want %v", dl1.Sub(start), timeout)
		}
		time.Sleep(timeout/Slack - time.Millisecond)
		c2, dl2, _ := b.Bound(context.Background())
		if c2 != c1 || !dl2.Equal(dl1) {
			t.Fatal("a call within Timeout/Slack did not share the deadline")
		}
		withValue := context.WithValue(context.WithoutCancel(context.Background()), key{}, "span")
		c3, dl3, _ := b.Bound(withValue)
		if c3.Value(key{}) != "span" {
			t.Fatal("the caller's values are lost")
		}
		if c3.Done() != c1.Done() || !dl3.Equal(dl1) {
			t.Fatal("a context with values did not share the deadline")
		}
		if d, ok := c3.Deadline(); !ok || !d.Equal(dl1) {
			t.Fatalf("Deadline() = %v, %v", d, ok)
		}
		time.Sleep(2 * time.Millisecond) // now past the sharing window
		c4, dl4, _ := b.Bound(context.Background())
		if c4 == c1 || !dl4.Equal(time.Now().Add(timeout)) {
			t.Fatal("a call after the window reused the old deadline")
		}
		// Every shared context ends at its deadline, never before.
		time.Sleep(time.Until(dl1) - time.Nanosecond)
		if c1.Err() != nil || c3.Err() != nil {
			t.Fatal("shared context ended before its deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(c3.Err(), context.DeadlineExceeded) {
			t.Fatalf("after the deadline Err() = %v", c3.Err())
		}
		if !Expired(withValue, dl3, errors.New("i/o timeout")) {
			t.Fatal("Expired = false after the call's own deadline")
		}
	})
}

func TestBoundCancellableGetsItsOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := Bounder{Timeout: time.Second}
		parent, cancelParent := context.WithCancel(context.Background())
		c, dl, cancel := b.Bound(parent)
		if cancel == nil || c == parent || !dl.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("got %v, %v, cancel %v; want a child with its own deadline", c, dl, cancel != nil)
		}
		cancelParent()
		<-c.Done() // the caller's cancellation reaches the call
		cancel()
		if Expired(parent, dl, context.Canceled) {
			t.Fatal("Expired = true for a call the caller cancelled")
		}

		later, cancelLater := context.WithTimeout(context.Background(), time.Hour)
		defer cancelLater()
		c, dl, cancel = b.Bound(later)
		defer cancel()
		if Expired(later, dl, errors.New("boom")) {
			t.Fatal("Expired = true before the deadline")
		}
		<-c.Done()
		if !Expired(later, dl, context.DeadlineExceeded) {
			t.Fatal("Expired = false after the call's own deadline with the caller's ctx alive")
		}
		if Expired(later, time.Time{}, context.DeadlineExceeded) || Expired(later, dl, nil) {
			t.Fatal("Expired = true without an own deadline or without an error")
		}
	})
}
