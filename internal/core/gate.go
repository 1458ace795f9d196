package core

import "context"

// A Gate caps how much runs at once: weight is taken with Hold or TryHold and
// given back with the [Held]'s Release. semaphore.Weighted and
// distsem.Semaphore are Gates.
//
// Hold waits, until ctx is done, for n to be free (how it queues is the
// gate's: FIFO for every floodgate gate). TryHold never waits: it takes n if
// it is free now and otherwise returns an error matching the gate's
// ErrNoCapacity, whose RetryAfter estimates when room could be free (0 when
// unknown). TryHold may do I/O (distsem asks Redis), so it takes a context
// too. On error nothing is held.
//
// A consumer that bounds the wait (a MaxWait) calls TryHold first and then
// Hold with a context that it cancels when the bound passes; a gate must
// therefore give back at once a grant whose context ends while it waits, and
// may return the context's error.
type Gate interface {
	Hold(ctx context.Context, n int64) (Held, error)
	TryHold(ctx context.Context, n int64) (Held, error)
}

// A KeyedGate is a Gate per key ("2 at once per tenant"): semaphore.Keyed and
// distsem.Keyed. Hold and TryHold mean what they mean for a Gate, for key's
// own limit. A gate with rules for its keys (distsem.Keyed) refuses a key it
// cannot hold with an error matching its ErrInvalidKey, and says so in
// advance through a CheckKey(key string) error method.
type KeyedGate interface {
	Hold(ctx context.Context, key string, n int64) (Held, error)
	TryHold(ctx context.Context, key string, n int64) (Held, error)
}

// Held is weight taken from a gate: the context the work runs under and the
// way to give the weight back. It is a small value, so that a local gate
// hands it out without allocating. The zero Held holds nothing; its Release
// does nothing.
type Held struct {
	ctx     context.Context
	release func(key string, n int64)
	key     string
	n       int64
}

// NewHeld returns a Held for a gate's implementation: the work runs under
// ctx, and Release calls release(key, n). release is typically one function
// per gate, made once, so that a Held costs no allocation.
func NewHeld(ctx context.Context, release func(key string, n int64), key string, n int64) Held {
	return Held{ctx: ctx, release: release, key: key, n: n}
}

// Context returns the context the held work runs under: the context given to
// Hold or TryHold, or one derived from it that the gate also cancels when it
// takes the weight back (distsem, when its lease is lost).
func (h Held) Context() context.Context { return h.ctx }

// N returns the weight held.
func (h Held) N() int64 { return h.n }

// Release gives the weight back. Call it once, from any goroutine: as with
// golang.org/x/sync/semaphore's Release, the weight a local gate gets back is
// not tied to the caller, so a second Release of the same Held gives back
// weight that someone else holds (distsem's Release is idempotent; a
// consumer that may release twice keeps its own flag).
func (h Held) Release() {
	if h.release != nil {
		h.release(h.key, h.n)
	}
}

// DefaultMaxKeys bounds the live keys (keys with holders or waiters) of a
// keyed gate whose config leaves MaxKeys zero: semaphore.Keyed and
// distsem.Keyed both default to it. 65,536 live keys is more than one
// process has in flight (every live key has a caller in it), and bounds what
// a flood of new keys can cost in memory.
const DefaultMaxKeys = 1 << 16
