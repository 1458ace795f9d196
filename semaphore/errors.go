package semaphore

import (
	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinel errors for each reason an Acquire is rejected. The error returned is
// always a *RejectError, which matches its sentinel with [errors.Is].
var (
	// ErrQueueFull: the call could not be granted at once and Config.MaxWaiters
	// callers are already waiting. The delay is an estimate.
	ErrQueueFull = reject.Sentinel(floodgate.ReasonQueueFull, "semaphore: queue full")

	// ErrMaxWait: the call waited Config.MaxWait without being granted, or the
	// estimated wait was longer than Config.MaxWait. The delay is an estimate.
	ErrMaxWait = reject.Sentinel(floodgate.ReasonMaxWait, "semaphore: max wait exceeded")

	// ErrDeadline: the estimated wait ends after the context's deadline, so the
	// call was refused at once rather than waiting until the deadline to fail. It
	// is deliberately not context.DeadlineExceeded: the context is not done. The
	// delay is the estimated wait.
	ErrDeadline = reject.Sentinel(floodgate.ReasonDeadline, "semaphore: wait would exceed context deadline")

	// ErrTooLarge: the weight asked for is larger than the limit, so the call can
	// never succeed (until SetLimit raises the limit). x/sync/semaphore waits
	// until the context is done in this case. The delay is 0.
	ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "semaphore: weight exceeds limit")

	// ErrNoCapacity: TryHold found no room now (the weight is not free, or
	// callers are queued ahead). The delay is an estimate, 0 without a basis.
	ErrNoCapacity = reject.Sentinel(floodgate.ReasonNoCapacity, "semaphore: no capacity")
)

// A RejectError reports why an Acquire was rejected (its Err, one of the
// sentinels above, matched by [errors.Is]; its Reason, the same as a word) and estimates when a retry could
// succeed (its Delay, also returned by RetryAfter). The estimate comes from the
// throughput of the semaphore observed while callers were waiting and from the
// weight queued ahead; it is never negative, and 0 when there is no basis for
// one yet or when retrying cannot help (ErrTooLarge). It is the same type as
// every other floodgate package's RejectError.
type RejectError = reject.Error
