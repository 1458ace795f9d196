package bulkhead

import (
	"errors"
	"time"
)

// Sentinels for the refusals bulkhead makes itself. A layer's rejection wraps
// the leaf's own error instead (shaper.ErrLimited, semaphore.ErrQueueFull,
// breaker.ErrUnavailable, …), so errors.Is sees through a *RejectError to it.
var (
	// ErrNoIdentity: the request carries no Identity (see WithIdentity) and
	// Config.Anonymous is off, or it is on and the client's address is unknown.
	ErrNoIdentity = errors.New("bulkhead: no identity")

	// ErrInvalidKey: a layer's Key returned an empty key or one longer than
	// Config.MaxKeyLen, or a key the layer's Rate or KeyedGate refuses (its
	// CheckKey error, which the RejectError wraps as well). The request
	// cannot be attributed to a quota. It is found before any layer is
	// charged.
	ErrInvalidKey = errors.New("bulkhead: invalid key")

	// ErrNoPolicy: a layer with Tiers has no Rate for the identity's tier and no
	// default Rate.
	ErrNoPolicy = errors.New("bulkhead: no policy for tier")

	// ErrMaxWait: the request waited Layer.MaxWait for a layer's gate without
	// being granted.
	ErrMaxWait = errors.New("bulkhead: max wait exceeded")
)

// A Reason classifies a rejection: it picks the default status, the counter in
// Stats and the "error" code of the default body.
type Reason uint8

const (
	// ReasonLimited: a layer's rate denied the request (the client's own quota,
	// or a global rate for an unkeyed layer).
	ReasonLimited Reason = iota + 1
	// ReasonConcurrency: a layer's gate had no room within the wait allowed.
	ReasonConcurrency
	// ReasonUnavailable: a layer's store is unavailable and its policy refuses
	// (errors.Is(err, breaker.ErrUnavailable)).
	ReasonUnavailable
	// ReasonIdentity: ErrNoIdentity or ErrInvalidKey.
	ReasonIdentity
	// ReasonNoPolicy: ErrNoPolicy.
	ReasonNoPolicy
	// ReasonError: a leaf could not decide for any other reason (for example a
	// cost larger than a meter's burst, which is a configuration error).
	ReasonError
	// ReasonQueueFull: a Workers class's backlog is full (ErrQueueFull).
	ReasonQueueFull
)

var reasonNames = [...]string{"", "limited", "concurrency", "unavailable", "identity", "no_policy", "error", "queue_full"}

// String returns the reason as a lowercase word, for logs and metrics.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// A RejectError reports that a request was refused: by which layer, why, the
// HTTP status it answers with, and when a retry could succeed. Its Unwrap
// returns the underlying error, so errors.Is(err, shaper.ErrLimited) and the
// other leaves' sentinels work through it.
//
// It is bulkhead's own type rather than the leaves' shared RejectError because
// it must name the layer and carry the status.
type RejectError struct {
	Layer  string        // the refusing layer's Name; "" for identity refusals
	Reason Reason        // the class of refusal
	Status int           // the HTTP status the middleware answers with
	Delay  time.Duration // time until a retry could succeed; 0 when retrying cannot help
	Err    error         // the underlying error: a leaf's rejection or a sentinel above
}

// Error returns "bulkhead: <layer>: <underlying error>". It is for logs: the
// middleware never sends it to the client.
func (e *RejectError) Error() string {
	if e.Layer == "" {
		return e.Err.Error()
	}
	return "bulkhead: " + e.Layer + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *RejectError) Unwrap() error { return e.Err }

// RetryAfter returns e.Delay.
func (e *RejectError) RetryAfter() time.Duration { return e.Delay }
