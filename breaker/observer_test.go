package breaker_test

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Each call that reached the store is one KindStoreCall: its duration, its
// error when it was a store failure (ErrTimeout for a timeout), and the
// Source of Do's answer. Calls ended by the caller and calls refused while
// open are not store calls; transitions are KindStateChange with the states'
// words.
func TestObserverStoreCallsAndTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec observetest.Recorder
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
		if got := rec.Take(); !slices.Equal(got, want) {
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

// A refusal's reason word is unavailable, whether the breaker was open or the
// store call failed, so that every Event and metric of it says so.
func TestRefusalReason(t *testing.T) {
	b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, Jitter: -1, Logger: discard})
	var s store
	s.set(errRefused)
	storeErr := do(b, &s)
	openErr := do(b, &s)
	for name, err := range map[string]error{"store failure": storeErr, "open": openErr} {
		if got := reject.ReasonOf(err); got != floodgate.ReasonUnavailable {
			t.Errorf("%s: ReasonOf(%v) = %q, want %q", name, err, got, floodgate.ReasonUnavailable)
		}
	}
	if !errors.Is(storeErr, syscall.ECONNREFUSED) || !errors.Is(storeErr, breaker.ErrUnavailable) {
		t.Errorf("store failure %v: want it to match the store's error and ErrUnavailable", storeErr)
	}
}
