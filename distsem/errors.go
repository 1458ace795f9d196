package distsem

import (
	"errors"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinel errors. Rejections are returned as a *RejectError that matches its
// sentinel with errors.Is and carries RetryAfter.
var (
	// ErrNoCapacity: TryAcquire found no free capacity, or found callers queued
	// ahead (TryAcquire never overtakes the queue). The RejectError's Delay is
	// an estimate: the weight short (held + one per queued waiter + n − limit)
	// over the release rate estimated from the mean hold time of the
	// Semaphore's own released permits (0 before it released any).
	ErrNoCapacity = reject.Sentinel(floodgate.ReasonNoCapacity, "distsem: no capacity")

	// ErrTooLarge: n is larger than the limit, so the call can never succeed.
	// Returned at once, without waiting, with no delay.
	ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "distsem: weight exceeds limit")

	// ErrLocalBusy: Redis is unavailable, the failure policy is FailLocal, and the
	// local fallback share could not admit the call in time. The RejectError's
	// Delay comes from the local share.
	ErrLocalBusy = reject.Sentinel(floodgate.ReasonNoCapacity, "distsem: local fallback share exhausted")
)

// Errors that are not rejections.
var (
	// ErrLeaseLost is the cause of a Permit's context when its lease was lost:
	// Redis no longer held the token (expiry, data loss) or no renewal succeeded
	// before the local deadline.
	ErrLeaseLost = errors.New("distsem: lease lost")

	// ErrReleased is the cause of a Permit's context after Release.
	ErrReleased = errors.New("distsem: permit released")

	// ErrClosed is returned by calls on a closed Semaphore, and by Acquire
	// calls that were waiting when it was closed.
	ErrClosed = reject.Sentinel(floodgate.ReasonClosed, "distsem: semaphore closed")
)

// A RejectError reports that an acquire was refused (Reason: ErrNoCapacity,
// ErrTooLarge or ErrLocalBusy), and an estimate of when a retry could succeed
// (Delay, see each sentinel). It is the same type in every floodgate package.
type RejectError = reject.Error
