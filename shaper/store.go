package shaper

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// numShards is the number of independently locked parts of a keyed store. A power
// of two, large enough that goroutines working on different keys rarely share a lock.
const numShards = 64

// minSweep is the per-shard key count below which idle keys are never swept.
const minSweep = 512

// A store maps keys to per-key state for one meter. It is split into shards, each a
// mutex and a map from key to a pointer to the state, so a decision is one hash, one
// map lookup and an in-place update. Idle keys (those whose state is the same as a
// key never seen) are deleted by a sweep of the shard that runs when the shard has
// doubled in size since its last sweep, so memory stays within about twice the
// number of keys active at once, at an amortised O(1) cost per new key.
type store[S any] struct {
	seed   maphash.Seed
	shards [numShards]shard[S]
}

type shard[S any] struct {
	mu sync.Mutex
	// mu guards:
	m       map[string]*S
	sweepAt int
	mruKey  string // the key of the last lookup, and its state: a hot key
	mru     *S     // skips the map lookup
}

func (st *store[S]) init() { st.seed = maphash.MakeSeed() }

func (st *store[S]) shard(key string) *shard[S] {
	return &st.shards[maphash.String(st.seed, key)&(numShards-1)]
}

// getLocked returns the state for key, creating a zero one if absent (created
// reports that). The key is copied, so a caller's large buffer is never retained.
func (sh *shard[S]) getLocked(key string) (s *S, created bool) {
	if s = sh.m[key]; s != nil {
		return s, false
	}
	if sh.m == nil {
		sh.m = make(map[string]*S)
		sh.sweepAt = minSweep
	}
	s = new(S)
	sh.m[strings.Clone(key)] = s
	return s, true
}

// lookupLocked returns the state for key, or nil.
func (sh *shard[S]) lookupLocked(key string) *S {
	if sh.mru != nil && key == sh.mruKey {
		return sh.mru
	}
	s := sh.m[key]
	if s != nil {
		sh.mruKey, sh.mru = key, s
	}
	return s
}

// maybeSweepLocked deletes idle entries once the shard has doubled since its last
// sweep. The entry for keep is never deleted.
func (sh *shard[S]) maybeSweepLocked(keep *S, idle func(*S) bool) {
	if len(sh.m) < sh.sweepAt {
		return
	}
	sh.mruKey, sh.mru = "", nil
	for k, s := range sh.m {
		if s != keep && idle(s) {
			delete(sh.m, k)
		}
	}
	sh.sweepAt = max(minSweep, 2*len(sh.m))
}

func (st *store[S]) len() int {
	n := 0
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// A clock reads the current time in Unix microseconds cheaply: the wall clock once
// at construction, then only the monotonic clock (one vDSO call, about half the cost
// of time.Now, which reads both clocks). Meter decisions therefore follow elapsed
// time and are immune to wall-clock steps; they may drift from time.Now by the NTP
// slew since construction, which matters only when mixing Allow with AllowAt.
type clock struct {
	base   time.Time // has a monotonic reading
	baseUS int64
}

func newClock() clock {
	now := time.Now()
	return clock{base: now, baseUS: now.UnixMicro()}
}

func (c *clock) nowUS() int64 { return c.baseUS + int64(time.Since(c.base)/time.Microsecond) }
