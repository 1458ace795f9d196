package bulkheadpgx

import (
	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinels. Refusals are returned as a *RejectError that matches its
// sentinel with errors.Is, carries RetryAfter, and names the class in Layer.
var (
	// ErrMaxWait: the call waited its class's positive MaxWait without
	// getting the class's gate, or found no room with a negative MaxWait
	// (never wait), or the gate refused it because the wait would be too
	// long (its own MaxWait, deadline estimate, queue bound or, for a
	// never-waiting call, no capacity; the gate's error is wrapped too, so
	// errors.Is finds semaphore.ErrQueueFull or distsem.ErrNoCapacity
	// beside ErrMaxWait). The RejectError's Delay is the gate's estimate, or
	// the class's RetryAfter when the gate gave none; its Reason is
	// floodgate.ReasonMaxWait.
	ErrMaxWait = reject.Sentinel(floodgate.ReasonMaxWait, "bulkheadpgx: max wait exceeded")

	// ErrTooLarge: the gate refused the class's weight as larger than its
	// limit (semaphore.ErrTooLarge, distsem.ErrTooLarge, wrapped too), so the
	// call can never be admitted. No delay. The gate says so, on each call:
	// a limit lowered at run time (SetLimit) is seen on the next call.
	ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "bulkheadpgx: weight exceeds limit")
)

// A RejectError reports that a call was refused before it reached the
// database: why (Reason; Err matches ErrMaxWait or ErrTooLarge), when a
// retry could succeed (Delay) and which class refused (Layer). It is the
// same type in every floodgate package.
type RejectError = floodgate.RejectError
