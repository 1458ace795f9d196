package semaphore

import (
	"context"
	"sync"
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// ErrTooManyKeys: the call named a key that has no semaphore yet, and
// KeyedConfig.MaxKeys keys are already live, so it was refused at once. Keys
// with holders or waiters are never evicted to make room.
var ErrTooManyKeys = reject.Sentinel(floodgate.ReasonTooManyKeys, "semaphore: too many keys")

// DefaultMaxKeys is the bound on live keys when KeyedConfig.MaxKeys is zero:
// floodgate.DefaultMaxKeys, the one default of every keyed gate.
const DefaultMaxKeys = floodgate.DefaultMaxKeys

// maxFree bounds the idle semaphores a Keyed keeps for reuse.
const maxFree = 64

// KeyedConfig configures a Keyed. The zero value is a valid KeyedConfig: at most
// DefaultMaxKeys live keys, and for each key no bound on waiters or wait time
// beyond the caller's context.
type KeyedConfig struct {
	// MaxKeys bounds the number of live keys (keys with holders or waiters). A
	// call for a new key while MaxKeys keys are live fails at once with
	// ErrTooManyKeys. If zero, DefaultMaxKeys. If negative, no bound.
	MaxKeys int

	// MaxWaiters, MaxWait and NoEarlyReject configure each key's semaphore, as
	// the Config fields of the same names do for a Weighted.
	MaxWaiters    int
	MaxWait       time.Duration
	NoEarlyReject bool

	// Observer, if non-nil, is told what every key's semaphore does, as
	// Config.Observer is for a Weighted (Component
	// floodgate.ComponentSemaphore; the key is never in an event: keys are
	// unbounded, metric attributes must not be), and of the Acquire calls
	// refused with ErrTooManyKeys (TryAcquire and TryHold refusals are not
	// events, as for a Weighted). It is called without any lock held.
	Observer floodgate.Observer
}

// Keyed is a set of weighted semaphores, one per key, each with the same limit:
// "at most 2 at once per tenant" for any number of tenants. A key's semaphore is
// made on its first use and dropped as soon as it has no holders and no
// waiters, so memory follows the keys in use, not every key ever seen; nothing
// runs in the background (no goroutine, no timer). A key with holders or
// waiters is never dropped. Each key is FIFO, with the guarantees and
// rejections of [Weighted].
//
// All keys share one mutex, held for a map lookup and a non-blocking grant or
// release, never while waiting. Use NewKeyed; a zero Keyed has limit 0 and
// rejects every Acquire with ErrTooLarge. A Keyed is safe for simultaneous use by
// multiple goroutines.
type Keyed struct {
	limit   int64
	maxKeys int
	cfg     Config                    // of each key's Weighted: no Observer
	obs     floodgate.Observer        // KeyedConfig.Observer
	release func(key string, n int64) // Release, for Hold; nil in a zero Keyed

	mu sync.Mutex
	// mu guards:
	keys     map[string]*keyEntry
	free     []*keyEntry // idle entries for reuse, at most maxFree
	inUse    int64
	waiting  int
	tooMany  uint64
	acquired uint64
}

// keyEntry is one live key. mu guards its fields: it is removed from the map,
// under mu, when held and waitingN are both zero.
type keyEntry struct {
	w        *Weighted
	held     int64 // weight held by granted callers
	waitingN int64 // weight asked for by callers inside w.Acquire
}

// NewKeyed returns a Keyed whose keys each have the given limit. It panics if
// limit is negative.
func NewKeyed(limit int64, cfg KeyedConfig) *Keyed {
	checkLimit(limit)
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	k := &Keyed{
		limit:   limit,
		maxKeys: maxKeys,
		cfg:     Config{MaxWaiters: cfg.MaxWaiters, MaxWait: cfg.MaxWait, NoEarlyReject: cfg.NoEarlyReject},
		obs:     cfg.Observer,
	}
	k.release = k.Release
	return k
}

// Limit returns the limit of every key.
func (k *Keyed) Limit() int64 { return k.limit }

// entryLocked returns key's entry, making it if absent, or nil if key is new and
// MaxKeys keys are live.
func (k *Keyed) entryLocked(key string) *keyEntry {
	if e := k.keys[key]; e != nil {
		return e
	}
	if k.maxKeys > 0 && len(k.keys) >= k.maxKeys {
		k.tooMany++
		return nil
	}
	if k.keys == nil {
		k.keys = make(map[string]*keyEntry)
	}
	var e *keyEntry
	if n := len(k.free); n > 0 {
		// A semaphore with nothing held and no one queued behaves as a new
		// one; only its retry-after estimate carries over.
		e, k.free = k.free[n-1], k.free[:n-1]
	} else {
		e = &keyEntry{w: New(k.limit, k.cfg)}
	}
	k.keys[key] = e
	return e
}

// dropIfIdleLocked removes key's entry if it has no holders and no waiters.
func (k *Keyed) dropIfIdleLocked(key string, e *keyEntry) {
	if e.held != 0 || e.waitingN != 0 {
		return
	}
	delete(k.keys, key)
	if len(k.free) < maxFree {
		k.free = append(k.free, e)
	}
}

// Acquire acquires weight n on key's semaphore, waiting in FIFO order behind
// that key's earlier callers until it is granted, ctx is done or a bound is hit.
// On failure it returns, leaving the Keyed unchanged:
//   - ctx.Err() if ctx is done (checked first, even if the weight is free);
//   - a *RejectError matching ErrTooLarge at once if n exceeds the limit;
//   - a *RejectError matching ErrTooManyKeys at once if key is not live and
//     MaxKeys keys are;
//   - any rejection of [Weighted.Acquire] under the KeyedConfig.
//
// It panics if n <= 0.
func (k *Keyed) Acquire(ctx context.Context, key string, n int64) error {
	if n <= 0 {
		panic("semaphore: acquire of non-positive weight")
	}
	if err := ctx.Err(); err != nil {
		if k.obs != nil {
			report(k.obs, floodgate.KindCancel, n, 0)
		}
		return err
	}
	if n > k.limit {
		return k.rejected(n, reject.New(ErrTooLarge, 0), 0)
	}
	k.mu.Lock()
	e := k.entryLocked(key)
	if e == nil {
		k.mu.Unlock()
		return k.rejected(n, reject.New(ErrTooManyKeys, 0), 0)
	}
	if e.w.TryAcquire(n) { // never overtakes a queued caller
		e.held += n
		k.inUse += n
		k.acquired++
		k.mu.Unlock()
		if k.obs != nil {
			k.admitted(key, n, 0)
		}
		return nil
	}
	e.waitingN += n
	k.waiting++
	k.mu.Unlock()

	var start time.Time
	if k.obs != nil {
		start = time.Now()
	}
	err := e.w.Acquire(ctx, n)

	k.mu.Lock()
	e.waitingN -= n
	k.waiting--
	if err == nil {
		e.held += n
		k.inUse += n
		k.acquired++
	} else {
		k.dropIfIdleLocked(key, e)
	}
	k.mu.Unlock()
	if k.obs != nil {
		k.waited(key, n, time.Since(start), err)
	}
	return err
}

// TryAcquire acquires weight n on key's semaphore without waiting and reports
// whether it did; on failure the Keyed is unchanged. It fails while callers are
// queued on key, for a new key while MaxKeys keys are live, and if n exceeds the
// limit. It panics if n <= 0.
func (k *Keyed) TryAcquire(key string, n int64) bool {
	if n <= 0 {
		panic("semaphore: acquire of non-positive weight")
	}
	if n > k.limit {
		return false
	}
	k.mu.Lock()
	e := k.entryLocked(key)
	ok := e != nil && e.w.TryAcquire(n)
	if ok {
		e.held += n
		k.inUse += n
		k.acquired++
	} else if e != nil {
		k.dropIfIdleLocked(key, e)
	}
	k.mu.Unlock()
	if ok && k.obs != nil {
		k.admitted(key, n, 0)
	}
	return ok
}

// Hold acquires weight n on key as Acquire does and returns it as a
// floodgate.Held (the gate contract every floodgate consumer takes), whose
// context is ctx and whose Release releases n on key, once. On error nothing
// is held; the errors are Acquire's.
func (k *Keyed) Hold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	if err := k.Acquire(ctx, key, n); err != nil {
		return floodgate.Held{}, err
	}
	return floodgate.NewHeld(ctx, k.releaser(), key, n), nil
}

// TryHold is Hold without waiting: it takes n on key as TryAcquire does, and
// otherwise fails at once with a *RejectError matching ErrTooLarge (n above
// the limit), ErrTooManyKeys (a new key while MaxKeys keys are live) or
// ErrNoCapacity (key has no room now, or callers queued on it), whose delay
// estimates when key could have room (0 without a basis). A refusal is not
// reported to the Observer, as for Weighted.TryHold. It panics if n <= 0.
func (k *Keyed) TryHold(ctx context.Context, key string, n int64) (floodgate.Held, error) {
	if k.TryAcquire(key, n) {
		return floodgate.NewHeld(ctx, k.releaser(), key, n), nil
	}
	if n > k.limit {
		return floodgate.Held{}, reject.New(ErrTooLarge, 0)
	}
	k.mu.Lock()
	e := k.keys[key]
	if e == nil && k.maxKeys > 0 && len(k.keys) >= k.maxKeys {
		k.mu.Unlock()
		return floodgate.Held{}, reject.New(ErrTooManyKeys, 0)
	}
	var d time.Duration
	if e != nil {
		e.w.mu.Lock()
		d = e.w.estimateLocked(satAdd(e.w.waitingWeight.int64(), n))
		e.w.mu.Unlock()
	}
	k.mu.Unlock()
	return floodgate.Held{}, reject.New(ErrNoCapacity, d)
}

func (k *Keyed) releaser() func(string, int64) {
	if k.release != nil {
		return k.release
	}
	return k.Release
}

// Release releases weight n on key's semaphore, granting that key's queued
// callers in order; the key is dropped if nothing is left held or queued. It
// panics if n <= 0 or if more weight is released on key than is held there.
func (k *Keyed) Release(key string, n int64) {
	k.releaseQuiet(key, n)
	if k.obs != nil {
		report(k.obs, floodgate.KindRelease, n, 0)
	}
}

// releaseQuiet is Release without the event.
func (k *Keyed) releaseQuiet(key string, n int64) {
	if n <= 0 {
		panic("semaphore: release of non-positive weight")
	}
	k.mu.Lock()
	e := k.keys[key]
	if e == nil || e.held < n {
		k.mu.Unlock()
		panic("semaphore: released more than held on key")
	}
	e.held -= n
	k.inUse -= n
	e.w.Release(n) // non-blocking; the Weighted has no Observer
	k.dropIfIdleLocked(key, e)
	k.mu.Unlock()
}

// admitted reports a grant of n on key after waiting waited; if the Observer
// panics, the weight is released before the panic goes on, as for a
// Weighted.
func (k *Keyed) admitted(key string, n int64, waited time.Duration) {
	ok := false
	defer func() {
		if !ok {
			k.releaseQuiet(key, n)
		}
	}()
	report(k.obs, floodgate.KindAdmit, n, waited)
	ok = true
}

// waited reports the outcome err of an Acquire of n on key that queued for
// waited: a grant, the caller's context ending, or a rejection.
func (k *Keyed) waited(key string, n int64, waited time.Duration, err error) {
	if err == nil {
		k.admitted(key, n, waited)
		return
	}
	if _, ok := err.(*RejectError); !ok {
		report(k.obs, floodgate.KindCancel, n, waited)
		return
	}
	k.rejected(n, err, waited)
}

// rejected reports the rejection err of n after waiting waited, and returns
// err.
func (k *Keyed) rejected(n int64, err error, waited time.Duration) error {
	if k.obs != nil {
		emit(k.obs, floodgate.Event{Kind: floodgate.KindReject, N: n, Reason: reject.ReasonOf(err), Duration: waited, Err: err})
	}
	return err
}

// Do acquires weight n on key, calls fn, and releases the weight when fn
// returns or panics, so the weight cannot leak. It returns Acquire's error
// without calling fn, or fn's error. fn receives ctx.
func (k *Keyed) Do(ctx context.Context, key string, n int64, fn func(context.Context) error) error {
	if err := k.Acquire(ctx, key, n); err != nil {
		return err
	}
	defer k.Release(key, n)
	return fn(ctx)
}

// KeyedStats is a snapshot of a Keyed.
type KeyedStats struct {
	Keys     int    // live keys: keys with holders or waiters
	InUse    int64  // weight held, over all keys
	Waiting  int    // callers waiting, over all keys
	Acquired uint64 // grants by Acquire and TryAcquire
	TooMany  uint64 // calls refused because MaxKeys keys were live
}

// Stats returns a consistent snapshot of k.
func (k *Keyed) Stats() KeyedStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return KeyedStats{Keys: len(k.keys), InUse: k.inUse, Waiting: k.waiting, Acquired: k.acquired, TooMany: k.tooMany}
}
