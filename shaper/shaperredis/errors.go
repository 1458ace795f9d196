package shaperredis

import (
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/shaper"
)

// The refusals of this package are shaper's: the same sentinel values, so
// errors.Is(err, shaper.ErrLimited) and errors.Is(err, shaperredis.ErrLimited)
// are the same test, and code that handles a local meter's refusals handles a
// Redis meter's too.
var (
	ErrLimited   = shaper.ErrLimited   // a rate denial (Decision.Err, a Lease)
	ErrQueueFull = shaper.ErrQueueFull // a Queue's MaxQueue waiting calls of this process
	ErrMaxWait   = shaper.ErrMaxWait   // a Queue slot beyond QueueConfig.MaxWait
	ErrDeadline  = shaper.ErrDeadline  // a Queue slot after the context's deadline
	ErrTooLarge  = shaper.ErrTooLarge  // a weight that can never be admitted
	ErrClosed    = shaper.ErrClosed    // a closed Queue
)

// ErrInvalidKey is returned, before any round trip, for a key (or Queue name)
// longer than Config.MaxKeyLen; Meter.CheckKey reports it in advance. It is
// bad input, not a refusal (there is no RejectError and no retry-after) and
// not a store failure (the breaker does not count it). Every shorter byte
// string is a valid key.
var ErrInvalidKey = reject.Sentinel(floodgate.ReasonInvalidKey, "shaperredis: invalid key")

// A RejectError reports why a call was refused and when a retry could succeed;
// it is shaper.RejectError, the one refusal type of every floodgate package.
type RejectError = shaper.RejectError

// tooLarge returns the refusal of a weight that can never be admitted.
func tooLarge() error { return reject.New(ErrTooLarge, 0) }

// limited returns the refusal of a rate denial whose retry could succeed after d.
func limited(d time.Duration) error { return reject.New(ErrLimited, d) }
