package shaper

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// numShards is the number of independently locked parts of a keyed store. A power
// of two, large enough that goroutines working on different keys rarely share a lock.
const (
	shardBits = 6
	numShards = 1 << shardBits
)

// inlineKey is the longest key kept inside its slot; a longer one is kept once in
// the shard's long slice and the slot holds its index.
const inlineKey = 24

// minSlots is the smallest table a shard allocates.
const minSlots = 8

// A store maps keys to per-key state for one meter. It is split into shards, each a
// mutex and an open-addressing hash table (linear probing) whose slots hold the
// key's hash, the key itself when it is at most inlineKey bytes, and the state S,
// all inline: a lookup of a short key reads one slot (48 bytes for GCRA's state),
// usually one or two cache lines and never a pointer, where a map[string]*S costs a
// map probe, the key's bytes and the state, each its own cache miss. A state S
// without pointers makes the whole table pointer-free, so the garbage collector does
// not scan it.
//
// There is no delete: idle keys (those whose state is the same as a key never seen)
// are dropped when the table is rebuilt, which happens when it is 3/4 full; the
// survivors go into a table at most half full (a power of two, so between 1/4 and
// 1/2 full, smaller if many keys were idle). Each rebuild costs O(slots) and is
// followed by at least slots/4 insertions, so the sweep is amortised O(1) per new
// key and memory stays within about twice the number of keys active at once:
// 64–128 bytes per key for GCRA while a table grows (a 48-byte slot at a load of
// 3/8 to 3/4), up to 192 just after a sweep dropped many idle keys (1/4).
type store[S any] struct {
	shards [numShards]shard[S] // first, so that they start at a cache line
	seed   maphash.Seed
}

type slot[S any] struct {
	// tag is 0 for an empty slot, else the key's hash with its top byte replaced
	// by a code for its length: 1 + len for an inline key, longKey otherwise.
	tag uint64
	// key holds the key's bytes if inline, else its index in shard.long.
	key [inlineKey]byte
	s   S
}

const (
	tagShift = 56
	hashMask = 1<<tagShift - 1
	longKey  = 0xff
)

type shard[S any] struct {
	mu sync.Mutex
	// mu guards:
	tab  []slot[S] // len a power of two, or 0 before the first key
	long []string  // the keys longer than inlineKey, indexed from their slots
	used int       // non-empty slots
	// Decisions, for MeterStats: calls with n > 0 admitted and denied.
	allowed, denied uint64
	refunded        uint64 // Refund calls that gave something back
	_               [40]byte
	// 128 bytes in all, two cache lines a shard (a test checks it): no false
	// sharing between shards.
}

func (st *store[S]) init() { st.seed = maphash.MakeSeed() }

// locate returns the shard of key and the tag its slot carries.
func (st *store[S]) locate(key string) (*shard[S], uint64) {
	h := maphash.String(st.seed, key)
	code := uint64(longKey)
	if len(key) <= inlineKey {
		code = uint64(1 + len(key))
	}
	return &st.shards[h>>(64-shardBits)], h&hashMask | code<<tagShift
}

// lookupLocked returns the state for key, whose tag is tag, or nil.
func (sh *shard[S]) lookupLocked(key string, tag uint64) *S {
	if len(sh.tab) == 0 {
		return nil
	}
	mask := uint64(len(sh.tab) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		sl := &sh.tab[i]
		if sl.tag == tag && sh.keyIs(sl, key) {
			return &sl.s
		}
		if sl.tag == 0 {
			return nil
		}
	}
}

// keyIs reports whether sl, whose tag matches key's, holds key.
func (sh *shard[S]) keyIs(sl *slot[S], key string) bool {
	if len(key) <= inlineKey {
		return string(sl.key[:len(key)]) == key
	}
	return sh.long[binary.LittleEndian.Uint32(sl.key[:4])] == key
}

// fullLocked reports whether the table must be rebuilt before the next insertion.
func (sh *shard[S]) fullLocked() bool { return 4*(sh.used+1) > 3*len(sh.tab) }

// insertLocked adds a zero state for key, which is absent, and returns it. The
// table must not be full. The key is copied, so a caller's buffer is never retained.
func (sh *shard[S]) insertLocked(key string, tag uint64) *S {
	sl := sh.emptySlotLocked(tag)
	sl.tag = tag
	if len(key) <= inlineKey {
		copy(sl.key[:], key)
	} else {
		binary.LittleEndian.PutUint32(sl.key[:4], uint32(len(sh.long)))
		sh.long = append(sh.long, strings.Clone(key))
	}
	sh.used++
	return &sl.s
}

// emptySlotLocked returns the first empty slot of tag's probe sequence.
func (sh *shard[S]) emptySlotLocked(tag uint64) *slot[S] {
	mask := uint64(len(sh.tab) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		if sl := &sh.tab[i]; sl.tag == 0 {
			return sl
		}
	}
}

// rebuildLocked moves the slots whose state is not idle into a new table at most
// half full, and their long keys into a new long slice. It invalidates every *S the
// shard has returned.
func (sh *shard[S]) rebuildLocked(idle func(*S) bool) {
	live := 0
	for i := range sh.tab {
		if sl := &sh.tab[i]; sl.tag != 0 {
			if idle(&sl.s) {
				sl.tag = 0
			} else {
				live++
			}
		}
	}
	size := minSlots
	for size < 2*(live+1) {
		size *= 2
	}
	old, oldLong := sh.tab, sh.long
	sh.tab, sh.long, sh.used = make([]slot[S], size), nil, live
	for i := range old {
		sl := &old[i]
		if sl.tag == 0 {
			continue
		}
		if sl.tag>>tagShift == longKey {
			k := oldLong[binary.LittleEndian.Uint32(sl.key[:4])]
			binary.LittleEndian.PutUint32(sl.key[:4], uint32(len(sh.long)))
			sh.long = append(sh.long, k)
		}
		*sh.emptySlotLocked(sl.tag) = *sl
	}
}

func (st *store[S]) len() int {
	n := 0
	for i := range st.shards {
		sh := &st.shards[i]
		sh.mu.Lock()
		n += sh.used
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
