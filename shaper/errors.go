package shaper

import (
	"errors"
	"time"
)

// ErrLimited is returned, wrapped in a *[LimitError], when a call is refused because
// the rate would be exceeded: a meter's denial as an error ([Decision.Err]), or a
// [Queue] wait that could not finish within MaxDelay or before the context's
// deadline. It is not disguised as context.DeadlineExceeded.
var ErrLimited = errors.New("shaper: rate limited")

// ErrQueueFull is returned, wrapped in a *[QueueFullError], when a [Queue] already
// holds Config.MaxQueue waiting calls.
var ErrQueueFull = errors.New("shaper: queue full")

// ErrNeverAllowed is returned, wrapped in a *[CostError], when a call asks for more
// than a meter could ever admit at once (a cost above the burst, capacity or window
// count). Retrying cannot help, so it carries no retry-after; nothing is recorded.
var ErrNeverAllowed = errors.New("shaper: cost exceeds burst")

// ErrClosed is returned by a [Queue] after Close or Shutdown.
var ErrClosed = errors.New("shaper: queue closed")

// A LimitError reports that a call was refused and how long to wait before retrying.
type LimitError struct {
	Delay time.Duration // time until a retry could succeed
}

func (e *LimitError) Error() string             { return "shaper: rate limited" }
func (e *LimitError) Is(target error) bool      { return target == ErrLimited }
func (e *LimitError) RetryAfter() time.Duration { return e.Delay }

// A QueueFullError reports that a Queue's backlog was full. Delay is the time until
// the head of the queue is released, freeing one place.
type QueueFullError struct {
	Delay time.Duration
}

func (e *QueueFullError) Error() string             { return "shaper: queue full" }
func (e *QueueFullError) Is(target error) bool      { return target == ErrQueueFull }
func (e *QueueFullError) RetryAfter() time.Duration { return e.Delay }

// A CostError reports a cost that can never be admitted: Cost is more than Max, the
// most the meter admits at once. It deliberately has no RetryAfter method.
type CostError struct {
	Cost, Max int64
}

func (e *CostError) Error() string        { return "shaper: cost exceeds burst" }
func (e *CostError) Is(target error) bool { return target == ErrNeverAllowed }
