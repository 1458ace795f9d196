package bulkheadpgx

import (
	"errors"

	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinels. Refusals are returned as a *RejectError that matches its
// sentinel with errors.Is and carries RetryAfter.
var (
	// ErrMaxWait: the call waited its class's positive MaxWait without
	// getting the class's gate, or found no room with a negative MaxWait
	// (never wait), or the gate refused it because the wait would be too
	// long (its own MaxWait, deadline estimate, queue bound or, for a
	// never-waiting call, no capacity; the gate's error is wrapped too). The RejectError's Delay is the gate's estimate, or the class's
	// RetryAfter when the gate gave none.
	ErrMaxWait = errors.New("bulkheadpgx: max wait exceeded")

	// ErrTooLarge: the class's weight is larger than its gate's limit, so the
	// call can never be admitted. No delay.
	ErrTooLarge = errors.New("bulkheadpgx: weight exceeds limit")

	// ErrUnknownClass is returned (wrapped, with the name) by every call
	// through a Class that the DB was not configured with. Not a rejection: a
	// programming error that is reported where it happens rather than as a
	// panic in a request path.
	ErrUnknownClass = errors.New("bulkheadpgx: unknown class")
)

// A RejectError reports that a call was refused before it reached the
// database, why (Reason: ErrMaxWait or ErrTooLarge) and when a retry could
// succeed (Delay). It is the same type in every floodgate package.
type RejectError = reject.Error
