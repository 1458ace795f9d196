package distsem

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/storecall"

	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/redis/go-redis/v9"
)

// Errors of a Keyed.
var (
	// ErrTooManyKeys: a call for a key that is not live would make more than
	// KeyedConfig.MaxKeys keys live in this process. Returned at once, without
	// I/O, in a *RejectError with no delay (it depends on when other keys'
	// calls end, which the Keyed cannot estimate). Keys already live are not
	// affected.
	ErrTooManyKeys = reject.Sentinel(floodgate.ReasonTooManyKeys, "distsem: too many live keys")

	// ErrInvalidKey: the key is empty or longer than the Keyed's
	// Config.MaxNameLen. Returned, wrapped with the reason, without I/O;
	// nothing changes. It is not a rejection: retrying cannot help.
	// Keyed.CheckKey tells in advance. Any other byte string is a valid key,
	// braces included (see the package doc on names).
	ErrInvalidKey = reject.Sentinel(floodgate.ReasonInvalidKey, "distsem: invalid key")
)

// DefaultMaxKeys is the bound on live keys of a Keyed when
// KeyedConfig.MaxKeys is zero: floodgate.DefaultMaxKeys, the one default of
// every keyed gate.
const DefaultMaxKeys = floodgate.DefaultMaxKeys

// KeyedConfig configures a Keyed. The zero value is a valid KeyedConfig: every
// key configured by the zero Config, at most DefaultMaxKeys live keys.
//
// It embeds Config rather than adding MaxKeys to Config: a field that New
// would have to ignore is a trap, and the per-key settings keep the one set of
// docs they have on Config.
type KeyedConfig struct {
	// Config configures the Semaphore of every key, as for New, except:
	//   - MaxNameLen bounds the key, not prefix + key (default
	//     DefaultMaxNameLen);
	//   - Breaker: if nil, the Keyed makes one breaker for all its keys
	//     (they share one Redis endpoint), not one per key;
	//   - LocalShare is the local share of each key under
	//     breaker.FailLocal (while that key is live).
	Config

	// MaxKeys bounds the keys live at once in this process: keys with a call
	// waiting or a permit held. A call for a key that is not live when
	// MaxKeys keys are is refused at once with ErrTooManyKeys. It bounds the
	// memory an unbounded set of keys (a scan over tenant ids) can take; it
	// never evicts a live key. If zero, DefaultMaxKeys; it must not be
	// negative.
	MaxKeys int
}

// A Keyed is a distributed semaphore per key with the same limit for every
// key: "each tenant runs at most 2 exports at once, across the fleet", for
// any number of tenants. Each key is a Semaphore named prefix + key, so
// every process that uses the same Redis, prefix and limit shares each
// key's limit, and all the Redis keys of one key share one hash tag, that of
// the name prefix + key (Redis Cluster safe; different keys spread over
// slots; braces in a key are escaped, see the package doc). End
// prefix with a separator such as ':' that no other Keyed's prefix continues
// with: names are plain concatenations, so prefixes "a" and "ab" could meet.
//
// A key is live in this process while it has a call waiting (Acquire,
// TryAcquire, Do) or a permit held (until Permit.Release returns): its
// Semaphore is made by the first such call and dropped as soon as the last
// one ends. A live key is never dropped, whatever MaxKeys pressure there is;
// a new key beyond MaxKeys is refused instead. Keys that are not live cost
// nothing in the process: the Semaphores of a Keyed share one pub/sub
// connection and receiver goroutine for wake-ups (opened by the first call
// that queues, closed by Close), one renewal schedule (one timer for every
// permit) and one breaker, so a key owns no goroutine, timer or subscription,
// and a churn of short-lived keys costs no subscribe or unsubscribe. In Redis
// an idle key's state expires as a Semaphore's does (see the package doc).
//
// Hand-off notifications go to one channel per Keyed process with PUBLISH,
// also on Redis Cluster, where PUBLISH is broadcast to every node (a
// Semaphore uses SPUBLISH on its key's shard; one connection cannot
// subscribe on every shard). Wake-ups on Cluster therefore cost cluster bus
// traffic; a lost one costs latency only, as for a Semaphore.
//
// The limit is per key and stored in Redis per key, as for a Semaphore
// (see New); Keyed has no SetLimit: a new limit could reach only the keys
// whose state exists, so it would depend on which keys were idle long
// enough to expire. Use a new prefix to change it.
//
// Every Permit from a Keyed must be released (a lost one too): a Permit
// never released keeps its key live. A Keyed is safe for simultaneous use by
// multiple goroutines. Use NewKeyed; the zero Keyed panics.
type Keyed struct {
	h       *hub
	st      storecall.Store
	client  redis.UniversalClient
	prefix  string
	limit   int64
	cfg     Config // per key, with defaults and the shared Breaker
	maxKeys int

	waiting, held, degraded atomic.Int64 // calls in progress, permits held, degraded grants (Stats)

	mu sync.Mutex
	// mu guards (with keyEntry.refs):
	keys                    map[string]*keyEntry
	opened, closed, refused int64
}

// A keyEntry is a live key: its Semaphore and how many calls and permits
// use it. It is in Keyed.keys exactly while refs > 0.
type keyEntry struct {
	k    *Keyed
	key  string
	sem  *Semaphore
	refs int64 // guarded by k.mu: calls waiting + permits held
}

// NewKeyed returns a Keyed of limit per key whose keys are named prefix + key
// on client. It does no I/O and starts no goroutine.
//
// NewKeyed panics, with a message starting "distsem: ", on a programmer
// error: as New for client, limit and cfg.Config; prefix longer than
// cfg.MaxNameLen; cfg.MaxKeys negative.
func NewKeyed(client redis.UniversalClient, prefix string, limit int64, cfg KeyedConfig) *Keyed {
	storecall.Check("distsem", client)
	if limit < 1 || limit > MaxLimit {
		panic("distsem: limit out of range [1, MaxLimit]")
	}
	if cfg.MaxKeys < 0 {
		panic("distsem: negative MaxKeys")
	}
	c := withDefaults(cfg.Config)
	if len(prefix) > c.MaxNameLen {
		panic("distsem: prefix longer than MaxNameLen")
	}
	// One breaker for all the keys: the Keyed's own if cfg has none.
	st := storecall.New("distsem", client, c.Breaker, "distsem:"+prefix)
	c.Breaker = st.Breaker
	if callTimeout := st.Breaker.CallTimeout(); c.Lease < 3*callTimeout || c.WaiterTTL < 3*callTimeout {
		panic("distsem: Lease or WaiterTTL < 3 × CallTimeout")
	}
	k := &Keyed{
		// Never sharded: one connection cannot SSUBSCRIBE on every key's
		// shard, so the scripts PUBLISH (see Keyed).
		h:       newHub(client, hashTag(prefix)+":n:", false, subscribeTimeout(st)),
		st:      st,
		client:  client,
		prefix:  prefix,
		limit:   limit,
		cfg:     c,
		maxKeys: cfg.MaxKeys,
		keys:    make(map[string]*keyEntry),
	}
	if k.maxKeys == 0 {
		k.maxKeys = DefaultMaxKeys
	}
	return k
}

func (k *Keyed) mustBeMade() {
	if k.h == nil {
		panic("distsem: Keyed not made by NewKeyed")
	}
}

// CheckKey returns, without I/O, the error wrapping ErrInvalidKey that
// Acquire, TryAcquire, Hold, TryHold and Do return for key, or nil if key is valid:
// any byte string that is not empty and at most MaxNameLen bytes long. It is
// what bulkhead asks of a layer's KeyedGate before it charges any layer, so
// that a key this Keyed refuses never costs the client quota elsewhere. The
// error never quotes the key: it may be huge.
func (k *Keyed) CheckKey(key string) error {
	k.mustBeMade()
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > k.cfg.MaxNameLen:
		return fmt.Errorf("%w: %d bytes, longer than MaxNameLen (%d)", ErrInvalidKey, len(key), k.cfg.MaxNameLen)
	}
	return nil
}

// hashTag returns the hash tag of the Redis keys of the semaphore named name.
// A name without braces is its own tag, "{" + name + "}", as it always was:
// processes of releases that refused braces share its state. In a name with
// braces, each '{' is written "{(" and each '}' "{)". The tag then holds no
// '}' of the name, so Redis Cluster hashes exactly the escaped name and all
// of a semaphore's keys stay in one slot; and the escape is injective (each
// byte has one code, "{" alone is none, and a name without braces has no
// '{'), so two different names never share a key.
func hashTag(name string) string {
	n := strings.Count(name, "{") + strings.Count(name, "}")
	if n == 0 {
		return "{" + name + "}"
	}
	b := make([]byte, 0, len(name)+n+2)
	b = append(b, '{')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '{':
			b = append(b, "{("...)
		case '}':
			b = append(b, "{)"...)
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '}'))
}

// Acquire waits for n of key's limit and returns a Permit holding it, as
// Semaphore.Acquire does for the Semaphore of key. In addition it returns,
// without I/O and leaving everything unchanged, an error wrapping
// ErrInvalidKey for an invalid key, a *RejectError matching ErrTooManyKeys if
// key is not live and MaxKeys keys are, and ErrClosed after Close. On every
// error nothing is held, and key is no longer live if nothing else uses it.
// It panics if n < 1.
func (k *Keyed) Acquire(ctx context.Context, key string, n int64) (*Permit, error) {
	return k.acquire(ctx, key, n, true)
}

// TryAcquire takes n of key's limit if it is free and no one is queued for
// key, as Semaphore.TryAcquire does; other errors are as for Acquire. The
// RetryAfter of its ErrNoCapacity is estimated from the mean hold time of
// the permits this Keyed released, over all keys (a key made live afresh has
// no history of its own).
func (k *Keyed) TryAcquire(ctx context.Context, key string, n int64) (*Permit, error) {
	return k.acquire(ctx, key, n, false)
}

// Do acquires n of key's limit, runs fn with a context that is cancelled if
// the lease is lost or ctx is done, and releases the permit when fn returns
// or panics. It returns fn's error, or Acquire's.
func (k *Keyed) Do(ctx context.Context, key string, n int64, fn func(context.Context) error) error {
	p, err := k.Acquire(ctx, key, n)
	if err != nil {
		return err
	}
	return runHolding(ctx, p, fn)
}

func (k *Keyed) acquire(ctx context.Context, key string, n int64, wait bool) (*Permit, error) {
	k.mustBeMade()
	if n < 1 {
		panic("distsem: n < 1")
	}
	if err := k.CheckKey(key); err != nil {
		return nil, k.failed(ctx, n, err)
	}
	if n > k.limit {
		return nil, k.failed(ctx, n, reject.New(ErrTooLarge, 0))
	}
	if err := ctx.Err(); err != nil {
		return nil, k.failed(ctx, n, err)
	}
	e, err := k.ref(key)
	if err != nil {
		return nil, k.failed(ctx, n, err)
	}
	k.waiting.Add(1)
	p, err := e.sem.acquireCounted(ctx, n, wait)
	k.waiting.Add(-1)
	if err != nil {
		e.unref()
		return nil, err
	}
	k.held.Add(1)
	if p.kind != permitRedis {
		k.degraded.Add(1)
	}
	p.entry = e
	return p, nil
}

// failed reports to the Observer an acquire of n that failed with err
// before reaching a key's Semaphore (which reports its own), and returns
// err.
func (k *Keyed) failed(ctx context.Context, n int64, err error) error {
	if o := k.cfg.Observer; o != nil {
		observeFailure(o, ctx, n, 0, err)
	}
	return err
}

// ref returns key's entry, made live if it was not, with one more reference.
func (k *Keyed) ref(key string) (*keyEntry, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h.isClosed() {
		return nil, ErrClosed
	}
	e := k.keys[key]
	if e == nil {
		if len(k.keys) >= k.maxKeys {
			k.refused++
			return nil, reject.New(ErrTooManyKeys, 0)
		}
		s := newSemaphore(k.client, k.prefix+key, k.limit, k.cfg, k.st, k.h)
		e = &keyEntry{k: k, key: key, sem: s}
		k.keys[key] = e
		k.opened++
	}
	e.refs++
	return e, nil
}

// unref drops one reference to e; the last one drops the key. Its Semaphore
// holds no goroutine, timer or subscription of its own: nothing else to stop
// (the background release of a token it started runs on the hub until it
// ends, and Close waits for it).
func (e *keyEntry) unref() {
	k := e.k
	k.mu.Lock()
	defer k.mu.Unlock()
	e.refs--
	if e.refs < 0 {
		panic("distsem: Keyed reference count below zero")
	}
	if e.refs == 0 {
		delete(k.keys, e.key)
		k.closed++
	}
}

// released is called once by Permit.Release of a permit from a Keyed.
func (e *keyEntry) released() {
	e.k.held.Add(-1)
	e.unref()
}

// KeyedStats describes a Keyed in this process at one moment.
type KeyedStats struct {
	// Limit is the limit per key given to NewKeyed; MaxKeys the bound on live
	// keys.
	Limit   int64
	MaxKeys int
	// Keys is the number of live keys: keys with a call waiting or a permit
	// held. Waiting is the number of calls in progress (Acquire, TryAcquire
	// and Do before fn), Held the number of permits not yet released.
	Keys          int
	Waiting, Held int64
	// Opened and Closed count keys made live and keys dropped when their last
	// call or permit ended; Refused counts calls refused with ErrTooManyKeys;
	// Degraded counts permits granted without Redis by the failure policy
	// (FailOpen or FailLocal), over all keys.
	Opened, Closed, Refused, Degraded int64
}

// Stats returns the Keyed's local counts, without I/O. The state of one key
// in Redis is what Semaphore.Stats reads for a Semaphore named prefix + key.
func (k *Keyed) Stats() KeyedStats {
	k.mustBeMade()
	k.mu.Lock()
	defer k.mu.Unlock()
	return KeyedStats{
		Limit:    k.limit,
		MaxKeys:  k.maxKeys,
		Keys:     len(k.keys),
		Waiting:  k.waiting.Load(),
		Held:     k.held.Load(),
		Opened:   k.opened,
		Closed:   k.closed,
		Refused:  k.refused,
		Degraded: k.degraded.Load(),
	}
}

// Close fails every call still waiting, for every key, with ErrClosed, stops
// the Keyed's pub/sub connection and background releases and waits for its
// goroutines, as Semaphore.Close does. Permits still held keep renewing
// until released, and their keys stay live until then. Acquire, TryAcquire
// and Do return ErrClosed after Close. Close is idempotent.
func (k *Keyed) Close() error {
	k.mustBeMade()
	k.h.close()
	return nil
}
