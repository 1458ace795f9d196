package shaper

import (
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinel errors for each reason a call is refused. A refusal is always a
// *[RejectError], which matches its sentinel with [errors.Is]; ErrClosed alone is
// returned bare.
var (
	// ErrLimited: the rate would be exceeded. A meter's denial becomes a
	// *RejectError with ErrLimited through [Decision.Err], its Delay the
	// decision's exact RetryAfter; a shaperredis.Lease refuses with it too.
	ErrLimited = reject.Sentinel(floodgate.ReasonLimited, "shaper: rate limited")

	// ErrQueueFull: a [Queue] (or a shaperredis.Queue) already holds QueueConfig.MaxQueue
	// waiting calls. Delay is the time until the head of the queue is released,
	// freeing one place.
	ErrQueueFull = reject.Sentinel(floodgate.ReasonQueueFull, "shaper: queue full")

	// ErrMaxWait: the call's slot in a [Queue] (or a shaperredis.Queue) is further away
	// than QueueConfig.MaxWait, so it was refused at once without taking the slot.
	// Delay is how much later a call with the same MaxWait could be admitted, if
	// nothing else arrives meanwhile.
	ErrMaxWait = reject.Sentinel(floodgate.ReasonMaxWait, "shaper: slot beyond max wait")

	// ErrDeadline: the call's slot in a [Queue] (or a shaperredis.Queue) comes after the
	// context's deadline, so it was refused at once rather than waiting until the
	// deadline to fail. It is deliberately not context.DeadlineExceeded: the
	// context is not done. Delay is as for ErrMaxWait, with the time left before
	// the deadline as the budget.
	ErrDeadline = reject.Sentinel(floodgate.ReasonDeadline, "shaper: slot after context deadline")

	// ErrTooLarge: the call asks for more weight than could ever be admitted at
	// once (above a meter's burst, capacity or window count, a Lease's Batch, a
	// shaperredis.Queue's burst, or a weight so large that a Queue's schedule would
	// overflow). Retrying cannot help, so its Delay is 0; nothing is recorded.
	ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "shaper: weight exceeds burst")

	// ErrClosed: the [Queue] (or a shaperredis.Queue) was closed or shut down.
	ErrClosed = reject.Sentinel(floodgate.ReasonClosed, "shaper: queue closed")
)

// A RejectError reports why a call was refused (Reason, one of the sentinels
// above) and when a retry could succeed (Delay, also returned by RetryAfter). It
// is the same type as every other floodgate package's RejectError, so code that
// handles refusals from several packages needs only one type.
type RejectError = reject.Error

// tooLarge returns the refusal of a weight that can never be admitted.
func tooLarge() error { return reject.New(ErrTooLarge, 0) }

// limited returns the refusal of a rate denial whose retry could succeed after d.
func limited(d time.Duration) error { return reject.New(ErrLimited, d) }
