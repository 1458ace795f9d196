// Package reject holds the one rejection error shared by every floodgate
// package. Each package re-exports it as RejectError (a type alias) and pairs
// it with its own package-prefixed sentinels, so that
//
//	errors.Is(err, semaphore.ErrQueueFull)
//	errors.AsType[*semaphore.RejectError](err)
//
// work, and a consumer such as bulkhead reads the delay of any package's
// rejection through the RetryAfter method without importing its type.
package reject

import "time"

// An Error reports that a call was refused, why, and when a retry could
// succeed. It matches its Reason with errors.Is.
type Error struct {
	// Reason is the sentinel of the refusing package that says why, for
	// example semaphore.ErrQueueFull or shaper.ErrLimited.
	Reason error
	// Delay is the time until a retry could succeed, never negative; 0 when
	// unknown or when retrying cannot help (the TooLarge reasons). Each
	// sentinel's doc says whether its delay is exact or an estimate.
	Delay time.Duration
}

// New returns an *Error for reason and delay; a negative delay becomes 0.
func New(reason error, delay time.Duration) *Error {
	return &Error{Reason: reason, Delay: max(delay, 0)}
}

// Error returns the reason's text.
func (e *Error) Error() string { return e.Reason.Error() }

// Unwrap returns e.Reason, so errors.Is matches the sentinel.
func (e *Error) Unwrap() error { return e.Reason }

// RetryAfter returns e.Delay.
func (e *Error) RetryAfter() time.Duration { return e.Delay }
