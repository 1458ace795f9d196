package breaker

import (
	"context"
	"errors"
	"io"
	"testing"
)

var errUnexpectedEOF = io.ErrUnexpectedEOF

// TestInnerBreakerReachable checks that Do runs on the same gobreaker state
// machine as Allow, through Execute (no allocation). If this fails after a
// gobreaker upgrade, innerBreaker no longer finds the CircuitBreaker inside
// TwoStepCircuitBreaker: Do still works, through twoStep, with one more
// allocation per call; fix innerBreaker.
func TestInnerBreakerReachable(t *testing.T) {
	b := New("t", Config{ConsecutiveFailures: 1})
	if b.cb == nil {
		t.Fatal("innerBreaker(ts) = nil: gobreaker's TwoStepCircuitBreaker layout changed")
	}
	if b.cb.Name() != "t" {
		t.Fatalf("inner breaker name %q, want t", b.cb.Name())
	}
	Do(context.Background(), b, FailOpen, func(context.Context) (int, error) { return 0, errUnexpectedEOF }, nil)
	if got := State(b.ts.State()); got != StateOpen {
		t.Fatalf("two-step state after a failure through Do = %v, want open (same state machine)", got)
	}
}

// TestTwoStepFallbackPath runs Do through twoStep, the path used if
// innerBreaker fails, and checks it behaves like the Execute path.
func TestTwoStepFallbackPath(t *testing.T) {
	b := New("t", Config{ConsecutiveFailures: 2})
	b.cb = nil
	ok := func(context.Context) (int, error) { return 1, nil }
	fail := func(context.Context) (int, error) { return 0, errUnexpectedEOF }
	if v, src, err := Do(context.Background(), b, FailClosed, ok, nil); v != 1 || src != FromStore || err != nil {
		t.Fatalf("Do = %v, %v, %v", v, src, err)
	}
	if _, src, err := Do(context.Background(), b, FailClosed, fail, nil); src != Rejected || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("failing Do = %v, %v", src, err)
	}
	func() {
		defer func() { recover() }()
		Do(context.Background(), b, FailClosed, func(context.Context) (int, error) { panic("boom") }, nil)
	}()
	if s := b.State(); s != StateOpen {
		t.Fatalf("State() = %v after a failure and a panic, want open", s)
	}
	if _, src, err := Do(context.Background(), b, FailLocal, ok, func(context.Context) (int, error) { return 2, nil }); src != FromFallback || err != nil {
		t.Fatalf("Do while open = %v, %v", src, err)
	}
}
