package breaker

import (
	"strconv"

	"github.com/floodgate-go/floodgate"
	"github.com/sony/gobreaker/v2"
)

// A Policy says how a call is answered when the store can't answer it: when
// the breaker is open, when it is half-open with its probes in flight, or when
// the call itself fails with a store failure.
type Policy uint8

const (
	// FailClosed rejects the call with an error matching [ErrUnavailable]
	// (an [*OpenError] with RetryAfter, or a [*StoreError] wrapping the
	// store's error), with [FromFailClosed]. It is the zero value: limiters
	// fail closed.
	FailClosed Policy = iota

	// FailOpen admits the call without an answer from the store: [Do]
	// returns the zero value of its result type, [FromFailOpen] and a nil
	// error, and the caller treats that as "admitted" (for example a no-op
	// permit).
	FailOpen

	// FailLocal answers the call with the fallback the caller supplies (for
	// example a local limiter holding a share of the global limit): [Do]
	// returns the fallback's result and error with [FromFailLocal].
	FailLocal
)

// String returns the policy's word, that of the Source of its answers:
// "fail_closed", "fail_open" or "fail_local".
func (p Policy) String() string {
	switch p {
	case FailClosed:
		return string(floodgate.SourceFailClosed)
	case FailOpen:
		return string(floodgate.SourceFailOpen)
	case FailLocal:
		return string(floodgate.SourceFailLocal)
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// A Source says where the answer of a guarded call came from: the store, or
// the policy that answered for it. Its Word is the floodgate.Source of the
// same name.
type Source uint8

const (
	// FromStore: the call reached the store and its own result and error
	// are returned as they are. It is also the Source when Do returns the
	// caller's context error without calling.
	FromStore Source = iota

	// FromFailOpen: the store could not answer and the FailOpen policy
	// admitted the call; the result is the zero value. Degraded.
	FromFailOpen

	// FromFailLocal: the store could not answer and the FailLocal policy
	// returned the fallback's answer. Degraded.
	FromFailLocal

	// FromFailClosed: the store could not answer and the FailClosed policy
	// returned an error matching ErrUnavailable.
	FromFailClosed
)

var sourceWords = [...]floodgate.Source{floodgate.SourceStore, floodgate.SourceFailOpen, floodgate.SourceFailLocal, floodgate.SourceFailClosed}

// Word returns s as the vocabulary's word (floodgate.SourceStore, ...), as
// Events, Stats and metrics carry it; "" for an invalid Source.
func (s Source) Word() floodgate.Source {
	if int(s) < len(sourceWords) {
		return sourceWords[s]
	}
	return ""
}

// Degraded reports whether the answer was made without the store and still
// admitted or decided: FromFailOpen or FromFailLocal.
func (s Source) Degraded() bool { return s.Word().Degraded() }

// String returns s's word: "store", "fail_open", "fail_local" or
// "fail_closed".
func (s Source) String() string {
	if w := s.Word(); w != "" {
		return string(w)
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// State is the state of a Breaker. The values equal gobreaker's.
type State uint8

const (
	StateClosed   State = State(gobreaker.StateClosed)   // calls go to the store
	StateHalfOpen State = State(gobreaker.StateHalfOpen) // a few probes go to the store
	StateOpen     State = State(gobreaker.StateOpen)     // no call goes to the store
)

// String returns the state's word, as in floodgate.Event's From and To:
// floodgate.StateClosed ("closed"), StateHalfOpen ("half_open") or StateOpen
// ("open").
func (s State) String() string {
	switch s {
	case StateClosed:
		return floodgate.StateClosed
	case StateHalfOpen:
		return floodgate.StateHalfOpen
	case StateOpen:
		return floodgate.StateOpen
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}
