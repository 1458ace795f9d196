package bulkhead

import (
	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Sentinels for the refusals bulkhead makes itself, each with its word
// (RejectError.Reason). A layer's rejection wraps the leaf's own error
// instead (shaper.ErrLimited, semaphore.ErrNoCapacity,
// breaker.ErrUnavailable, …), so errors.Is sees through a *RejectError to it.
var (
	// ErrNoIdentity: the request carries no Identity (see WithIdentity) and
	// Config.Anonymous is off, or it is on and the client's address is unknown.
	ErrNoIdentity = reject.Sentinel(floodgate.ReasonNoIdentity, "bulkhead: no identity")

	// ErrInvalidKey: a layer's Key returned an empty key or one longer than
	// Config.MaxKeyLen, or a key the layer's Rate or KeyedGate refuses (its
	// CheckKey error, which the RejectError wraps as well). The request
	// cannot be attributed to a quota. It is found before any layer is
	// charged.
	ErrInvalidKey = reject.Sentinel(floodgate.ReasonInvalidKey, "bulkhead: invalid key")

	// ErrNoPolicy: a layer with Tiers has no Rate for the identity's tier and no
	// default Rate.
	ErrNoPolicy = reject.Sentinel(floodgate.ReasonNoPolicy, "bulkhead: no policy for tier")

	// ErrMaxWait: the request waited Layer.MaxWait for a layer's gate without
	// being granted.
	ErrMaxWait = reject.Sentinel(floodgate.ReasonMaxWait, "bulkhead: max wait exceeded")
)

// A RejectError reports that a request or a job was refused: by which layer
// (or Workers class), why (Reason, a word: limited, no_capacity, max_wait,
// queue_full, unavailable, no_identity, invalid_key, no_policy, error, …), the
// HTTP status the middleware answers with, and when a retry could succeed.
// It is floodgate's one refusal type, so errors.AsType[*floodgate.RejectError]
// finds it as well.
//
// A layer's refusal has the text "bulkhead: <layer>: <the leaf's error>", and
// its Err wraps the leaf's error (or ErrMaxWait, ErrInvalidKey, ErrNoPolicy),
// so errors.Is(err, shaper.ErrLimited) and the other leaves' sentinels work
// through it. The text is for logs: the middleware never sends it to the
// client.
type RejectError = floodgate.RejectError
