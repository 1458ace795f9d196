package calltimeout_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/calltimeout"
)

// TestErrorIsAStoreTimeoutNotAContextError: an *Error prints the package's
// message (and the call's error, if any), is a timeout net.Error, and does not
// match the context error it may carry, so that the breaker counts it as a
// store failure and not as the caller's cancellation.
func TestErrorIsAStoreTimeoutNotAContextError(t *testing.T) {
	for _, tc := range []struct {
		err  *calltimeout.Error
		want string
	}{
		{&calltimeout.Error{Msg: "distsem: redis call timed out"}, "distsem: redis call timed out"},
		{&calltimeout.Error{Msg: "shaper: redis call timed out", Err: context.DeadlineExceeded},
			"shaper: redis call timed out: context deadline exceeded"},
	} {
		var err error = tc.err
		if got := err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		ne, ok := errors.AsType[net.Error](err)
		if !ok || !ne.Timeout() {
			t.Errorf("%q: not a timeout net.Error", tc.want)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%q matches context.DeadlineExceeded", tc.want)
		}
		if !breaker.IsStoreFailure(err) {
			t.Errorf("%q: breaker.IsStoreFailure = false", tc.want)
		}
	}
}
