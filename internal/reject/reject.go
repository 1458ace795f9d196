// Package reject builds the one refusal error of every floodgate package,
// floodgate.RejectError. Each package re-exports the type as RejectError (a
// type alias) and declares its package-prefixed sentinels with Sentinel, so
// that each carries its vocabulary word and
//
//	errors.Is(err, semaphore.ErrQueueFull)
//	errors.AsType[*semaphore.RejectError](err)
//
// work, and a consumer such as bulkhead reads the delay of any package's
// rejection through the RetryAfter method without importing its type.
package reject

import (
	"errors"
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
)

// Error is the shared refusal type.
type Error = floodgate.RejectError

// A sentinel is a package's refusal sentinel: its text and its word.
type sentinel struct {
	text   string
	reason floodgate.Reason
}

func (s *sentinel) Error() string { return s.text }

// Sentinel returns a new sentinel error with text (package-prefixed, as
// errors.New's) whose refusals have reason.
func Sentinel(reason floodgate.Reason, text string) error {
	return &sentinel{text: text, reason: reason}
}

// ReasonOf returns the word of err's sentinel (the first in its chain made
// by Sentinel), or floodgate.ReasonError when it has none.
func ReasonOf(err error) floodgate.Reason {
	if re, ok := errors.AsType[*Error](err); ok && re.Reason != "" {
		return re.Reason
	}
	if s, ok := errors.AsType[*sentinel](err); ok {
		return s.reason
	}
	return floodgate.ReasonError
}

// New returns an *Error for a Sentinel and delay; a negative delay becomes
// 0.
func New(s error, delay time.Duration) *Error {
	return &Error{Reason: ReasonOf(s), Err: s, Delay: max(delay, 0)}
}

// RetryAfter returns the RetryAfter of err (of the first error in its chain
// that has one), or 0.
func RetryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// Seconds is d in whole seconds, rounded up, never 0 for a delay: a
// Retry-After that a client waiting exactly that long can trust (bulkhead's
// HTTP answer, bulkheadgrpc's status message).
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
