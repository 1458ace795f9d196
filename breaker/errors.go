package breaker

import (
	"errors"
	"net"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/sony/gobreaker/v2"
)

// ErrUnavailable is returned, wrapped in an [*OpenError] or a [*StoreError], when a
// call under the [FailClosed] policy gets no answer from the store: the breaker is
// open (or half-open with its probes in flight), or the store call itself failed.
var ErrUnavailable = reject.Sentinel(floodgate.ReasonUnavailable, "breaker: store unavailable")

// ErrTimeout is matched, inside a [*StoreError], by a store call that was too
// slow: [Config.CallTimeout] expired while the caller's context was not done
// (or the client's own socket timeout fired). Such an error also matches
// [ErrUnavailable], its Timeout method reports true (as a [net.Error]'s
// does), it counts as a store failure, and it does not match
// context.DeadlineExceeded: that is reserved for the caller's own deadline,
// which [Do] reports as ctx.Err(), unwrapped and not counted.
var ErrTimeout = errors.New("breaker: store call timed out")

// An OpenError reports that the breaker rejected a call without calling the store
// because it is open, or half-open with all its probes in flight. It matches
// [ErrUnavailable] with [errors.Is], and also gobreaker's ErrOpenState (when open) or
// ErrTooManyRequests (when half-open), so code written against gobreaker keeps
// working.
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// State is StateOpen or StateHalfOpen.
	State State
	// Delay is the time until the breaker will let a probe through: the
	// remaining open time when open; the per-call timeout (the longest the
	// probe in flight can take) when half-open; 0 if unknown.
	Delay time.Duration
}

func (e *OpenError) Error() string {
	if e.State == StateHalfOpen {
		return "breaker: store unavailable (circuit half-open)"
	}
	return "breaker: store unavailable (circuit open)"
}

// Is reports whether target is ErrUnavailable, or the gobreaker error for the
// same condition (gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests).
func (e *OpenError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return true
	case gobreaker.ErrOpenState:
		return e.State != StateHalfOpen
	case gobreaker.ErrTooManyRequests:
		return e.State == StateHalfOpen
	}
	return false
}

// RetryAfter returns Delay: how long to wait before the breaker lets a call
// reach the store again.
func (e *OpenError) RetryAfter() time.Duration { return e.Delay }

// Unwrap returns ErrUnavailable, whose word (floodgate.ReasonUnavailable)
// is the refusal's reason.
func (e *OpenError) Unwrap() error { return ErrUnavailable }

// A StoreError reports that the breaker let a call through under the
// [FailClosed] policy and the store call failed with an infrastructure error
// (see [Config.IsFailure]) or outlived [Config.CallTimeout]. It matches
// [ErrUnavailable] with [errors.Is] and unwraps to the store's error; a call
// that was too slow matches [ErrTimeout] too.
type StoreError struct {
	// Name is the breaker's name.
	Name string
	// Err is the store call's error; ErrTimeout when CallTimeout expired.
	Err error
}

func (e *StoreError) Error() string { return "breaker: store unavailable: " + e.Err.Error() }

// Is reports whether target is ErrUnavailable, or ErrTimeout for a call that
// was too slow (see Timeout).
func (e *StoreError) Is(target error) bool {
	return target == ErrUnavailable || target == ErrTimeout && e.Timeout()
}

// Timeout reports whether the store call was too slow: CallTimeout expired
// (Err is ErrTimeout), or the client's own socket timeout fired (Err is a
// timeout [net.Error]).
func (e *StoreError) Timeout() bool {
	if e.Err == ErrTimeout {
		return true
	}
	ne, ok := errors.AsType[net.Error](e.Err)
	return ok && ne.Timeout()
}

// Unwrap returns Err and ErrUnavailable, so that errors.As finds the store's
// error and the sentinel's vocabulary word (floodgate.ReasonUnavailable)
// alike.
func (e *StoreError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// Temporary reports Timeout(), as net.Error's timeouts do; with Timeout it
// makes a *StoreError a [net.Error].
func (e *StoreError) Temporary() bool { return e.Timeout() }
