package core

import "time"

// A RejectError reports that a call was refused, why, and when a retry could
// succeed. It is the one refusal type of every floodgate package (each
// re-exports it as RejectError, a type alias), so one
//
//	errors.AsType[*floodgate.RejectError](err)
//
// finds the refusal whichever package made it. Err is what errors.Is sees
// through it: the refusing package's sentinel (semaphore.ErrQueueFull), or,
// for a composer's refusal (bulkhead), an error that wraps the leaf's.
type RejectError struct {
	// Reason says why, as a word.
	Reason Reason
	// Err is the refusal: a package-prefixed sentinel or an error wrapping
	// one. Error returns its text.
	Err error
	// Delay is the time until a retry could succeed, never negative; 0 when
	// unknown or when retrying cannot help (ReasonTooLarge). Each sentinel's
	// doc says whether its delay is exact or an estimate.
	Delay time.Duration
	// Layer is the composer's part that refused: a bulkhead layer, a
	// Workers or bulkheadpgx class. "" from a leaf and for refusals of the
	// request itself (no identity).
	Layer string
	// Status is the HTTP status a composer answers with (bulkhead). 0 from a
	// leaf.
	Status int
}

// Error returns Err's text.
func (e *RejectError) Error() string { return e.Err.Error() }

// Unwrap returns e.Err, so errors.Is matches the sentinel.
func (e *RejectError) Unwrap() error { return e.Err }

// RetryAfter returns e.Delay.
func (e *RejectError) RetryAfter() time.Duration { return e.Delay }
