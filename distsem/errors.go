package distsem

import (
	"errors"
	"time"
)

// Sentinel errors. Rejections are returned as a *RejectError that matches its
// sentinel with errors.Is and carries RetryAfter.
var (
	// ErrNoCapacity: TryAcquire found no free capacity, or found callers queued
	// ahead (TryAcquire never overtakes the queue).
	ErrNoCapacity = errors.New("distsem: no capacity")

	// ErrWeightExceedsLimit: the weight asked for is larger than the limit, so the
	// call can never succeed. Returned at once, without waiting.
	ErrWeightExceedsLimit = errors.New("distsem: weight exceeds limit")

	// ErrLocalBusy: Redis is unavailable, the failure policy is FailLocal, and the
	// local fallback share could not admit the call in time.
	ErrLocalBusy = errors.New("distsem: local fallback share exhausted")
)

// Errors that are not rejections.
var (
	// ErrLeaseLost is the cause of a Permit's context when its lease was lost:
	// Redis no longer held the token (expiry, data loss) or no renewal succeeded
	// before the local deadline.
	ErrLeaseLost = errors.New("distsem: lease lost")

	// ErrReleased is the cause of a Permit's context after Release.
	ErrReleased = errors.New("distsem: permit released")

	// ErrClosed is returned by calls on a closed Semaphore.
	ErrClosed = errors.New("distsem: semaphore closed")
)

// A RejectError reports that an acquire was refused, and an estimate of when a
// retry could succeed. It matches its Reason with errors.Is.
type RejectError struct {
	// Reason is ErrNoCapacity, ErrWeightExceedsLimit or ErrLocalBusy.
	Reason error
	// Delay is an estimate of the time until a retry could succeed, never
	// negative; 0 if unknown or if retrying cannot help
	// (ErrWeightExceedsLimit). For ErrNoCapacity it is the weight short
	// (held + one per queued waiter + asked − limit) over the release rate
	// estimated from the mean hold time of the Semaphore's own released
	// permits (0 before it released any); for ErrLocalBusy it comes from the
	// local share.
	Delay time.Duration
}

func (e *RejectError) Error() string { return e.Reason.Error() }

// Is reports whether target is e.Reason.
func (e *RejectError) Is(target error) bool { return target == e.Reason }

// Unwrap returns e.Reason.
func (e *RejectError) Unwrap() error { return e.Reason }

// RetryAfter returns e.Delay.
func (e *RejectError) RetryAfter() time.Duration { return e.Delay }
