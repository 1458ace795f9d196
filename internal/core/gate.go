package core

import "context"

// Gate is floodgate.Gate: the contract is documented there.
type Gate interface {
	Hold(ctx context.Context, n int64) (Held, error)
	TryHold(ctx context.Context, n int64) (Held, error)
}

// KeyedGate is floodgate.KeyedGate, documented there.
type KeyedGate interface {
	Hold(ctx context.Context, key string, n int64) (Held, error)
	TryHold(ctx context.Context, key string, n int64) (Held, error)
}

// Held is floodgate.Held, documented there.
type Held struct {
	ctx     context.Context
	release func(key string, n int64)
	tagged  func(Held) // set by NewTaggedHeld, in place of release
	key     string
	n       int64
	tag     int64
}

// NewHeld is floodgate.NewHeld, documented there.
func NewHeld(ctx context.Context, release func(key string, n int64), key string, n int64) Held {
	return Held{ctx: ctx, release: release, key: key, n: n}
}

// NewTaggedHeld is floodgate.NewTaggedHeld, documented there.
func NewTaggedHeld(ctx context.Context, release func(Held), n, tag int64) Held {
	return Held{ctx: ctx, tagged: release, n: n, tag: tag}
}

// Tag returns the word the gate stored in the Held (NewTaggedHeld); 0 for
// any other Held.
func (h Held) Tag() int64 { return h.tag }

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
	if h.tagged != nil {
		h.tagged(h)
		return
	}
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
