package breaker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
)

// events is an Observer that keeps the events it is told.
type events struct {
	mu sync.Mutex
	ev []floodgate.Event
}

func (e *events) Observe(ev floodgate.Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

func (e *events) take() []floodgate.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := e.ev
	e.ev = nil
	return ev
}

// Each call that reached the store is one KindStoreCall: its duration, its
// error when it was a store failure (ErrTimeout for a timeout), and the
// Source of Do's answer. Calls ended by the caller and calls refused while
// open are not store calls; transitions are KindStateChange with the states'
// words.
func TestObserverStoreCallsAndTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec events
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 2, OpenDuration: time.Minute, Jitter: -1, CallTimeout: time.Second, Logger: discard, Observer: &rec})
		slowly := func(d time.Duration, err error) func(context.Context) (int, error) {
			return func(ctx context.Context) (int, error) {
				select {
				case <-time.After(d):
					return 1, err
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
		}
		ctx := t.Context()
		breaker.Do(ctx, b, breaker.FailClosed, slowly(100*time.Millisecond, nil), nil)
		breaker.Do(ctx, b, breaker.FailClosed, slowly(200*time.Millisecond, errDenied), nil) // an answer
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		breaker.Do(cctx, b, breaker.FailClosed, slowly(time.Hour, nil), nil) // the caller's deadline: not a store call
		cancel()
		breaker.Do(ctx, b, breaker.FailOpen, slowly(300*time.Millisecond, errRefused), nil)
		breaker.Do(ctx, b, breaker.FailClosed, slowly(time.Hour, nil), nil) // CallTimeout: trips
		breaker.Do(ctx, b, breaker.FailLocal, slowly(0, nil), local)        // refused while open

		want := []floodgate.Event{
			{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: 100 * time.Millisecond, Source: floodgate.SourceStore},
			{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: 200 * time.Millisecond, Source: floodgate.SourceStore},
			{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: 300 * time.Millisecond, Source: floodgate.SourceFailOpen, Err: errRefused},
			{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: floodgate.StateClosed, To: floodgate.StateOpen},
			{Kind: floodgate.KindStoreCall, Component: floodgate.ComponentBreaker, Duration: time.Second, Source: floodgate.SourceFailClosed, Err: breaker.ErrTimeout},
		}
		if got := rec.take(); !slices.Equal(got, want) {
			t.Fatalf("events:\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestSourceWords(t *testing.T) {
	for _, c := range []struct {
		src      breaker.Source
		word     floodgate.Source
		degraded bool
	}{
		{breaker.FromStore, floodgate.SourceStore, false},
		{breaker.FromFailOpen, floodgate.SourceFailOpen, true},
		{breaker.FromFailLocal, floodgate.SourceFailLocal, true},
		{breaker.FromFailClosed, floodgate.SourceFailClosed, false},
	} {
		if c.src.Word() != c.word || c.src.String() != string(c.word) || c.src.Degraded() != c.degraded {
			t.Errorf("Source %d: Word %q, String %q, Degraded %v; want %q, %q, %v", c.src, c.src.Word(), c.src.String(), c.src.Degraded(), c.word, c.word, c.degraded)
		}
	}
	if got := breaker.Source(9).String(); got != "Source(9)" {
		t.Errorf("Source(9).String() = %q", got)
	}
	for p, w := range map[breaker.Policy]floodgate.Source{breaker.FailClosed: floodgate.SourceFailClosed, breaker.FailOpen: floodgate.SourceFailOpen, breaker.FailLocal: floodgate.SourceFailLocal} {
		if p.String() != string(w) {
			t.Errorf("Policy %d: String %q, want %q", p, p.String(), w)
		}
	}
}
