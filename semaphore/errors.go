package semaphore

import (
	"errors"
	"time"
)

// Sentinel errors for each reason an Acquire is rejected. The error returned is
// always a *RejectError, which matches its sentinel with [errors.Is].
var (
	// ErrQueueFull: the call could not be granted at once and Config.MaxWaiters
	// callers are already waiting.
	ErrQueueFull = errors.New("semaphore: queue full")

	// ErrMaxWait: the call waited Config.MaxWait without being granted, or the
	// estimated wait was longer than Config.MaxWait.
	ErrMaxWait = errors.New("semaphore: max wait exceeded")

	// ErrDeadline: the estimated wait ends after the context's deadline, so the
	// call was refused at once rather than waiting until the deadline to fail. It
	// is deliberately not context.DeadlineExceeded: the context is not done.
	ErrDeadline = errors.New("semaphore: wait would exceed context deadline")

	// ErrTooLarge: the weight asked for is larger than the capacity, so the call can
	// never succeed (until a Resize grows the capacity). x/sync/semaphore waits
	// forever in this case.
	ErrTooLarge = errors.New("semaphore: weight exceeds capacity")
)

// A RejectError reports why an Acquire was rejected and estimates when a retry
// could succeed. It matches its Reason with [errors.Is].
type RejectError struct {
	// Reason is one of ErrQueueFull, ErrMaxWait, ErrDeadline or ErrTooLarge.
	Reason error
	// Delay is an estimate of the time until a retry could be granted, computed
	// from the throughput of the semaphore observed while callers were waiting and
	// from the weight queued ahead. It is an estimate, never negative, and 0 when
	// there is no basis for one yet or when retrying cannot help (ErrTooLarge).
	Delay time.Duration
}

func (e *RejectError) Error() string { return e.Reason.Error() }

// Is reports whether target is e.Reason.
func (e *RejectError) Is(target error) bool { return target == e.Reason }

// Unwrap returns e.Reason.
func (e *RejectError) Unwrap() error { return e.Reason }

// RetryAfter returns e.Delay: an estimate of when a retry could succeed.
func (e *RejectError) RetryAfter() time.Duration { return e.Delay }
