package distsem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/redis/go-redis/v9"
)

// Config configures a Semaphore. The zero value is a valid Config: 10s leases,
// a breaker of its own (so breaker.DefaultCallTimeout per Redis call), 3s
// waiter heartbeats, 10s tombstones, no re-adoption.
type Config struct {
	// Lease is how long a permit stays valid at the store without a renewal. A
	// holder renews every Lease/3; if it dies, its permit is free again at most
	// Lease after its last renewal. If zero, 10s. It must be at least
	// 3 × the breaker's CallTimeout.
	Lease time.Duration

	// WaiterTTL is how long a queued caller stays in the queue without a
	// heartbeat. Waiters heartbeat every min(WaiterTTL, Lease)/3; that heartbeat is also the
	// poll that covers a lost notification, so it bounds the extra wait a lost
	// pub/sub message can cause. A waiter that dies is dropped from the queue
	// within WaiterTTL; if it is granted by hand-off before that, its permit is
	// held for one Lease, like a holder that crashed. If zero, 3s. It must be
	// at least 3 × the breaker's CallTimeout.
	WaiterTTL time.Duration

	// TombstoneTTL is how long Redis remembers the token of an acquire that
	// failed or was cancelled, once it is released, so that the acquire, if it
	// runs late (a go-redis retry, a call that timed out at the client but sat in
	// a socket), is refused rather than granted. If zero, 10s.
	TombstoneTTL time.Duration

	// Readopt makes a holder whose token vanished from Redis (expiry during a
	// pause, data loss after a restart or failover) insert it again, with its old
	// fence, when capacity is free and no waiter is left queued once the queue has
	// been served (it never overtakes a waiter). Re-adoption is
	// counted in Stats.Readopted. If false, such a permit is lost: Lost is closed
	// and its context cancelled.
	Readopt bool

	// Breaker guards every Redis call of the Semaphore: failures (timeouts,
	// refused connections, LOADING, ...) are counted, caller cancellation is
	// not, and while it is open no call waits on the network. Its CallTimeout
	// (breaker.Config.CallTimeout) is the one per-call timeout of every Redis
	// call; a call that outlives it while the caller's context is not done is
	// a store failure (an error matching breaker.ErrTimeout, not
	// context.DeadlineExceeded). Share one Breaker per Redis endpoint. If nil,
	// the Semaphore makes its own with breaker.Config{Policy: Policy}, hence
	// breaker.DefaultCallTimeout.
	Breaker *breaker.Breaker

	// Policy decides what Acquire and TryAcquire do when Redis cannot answer
	// (the breaker is open, or the call failed): breaker.FailClosed (the zero
	// value) returns an error matching breaker.ErrUnavailable, with RetryAfter
	// when the breaker is open; breaker.FailOpen grants a permit held nowhere
	// (Permit.Degraded); breaker.FailLocal grants from a local share of
	// LocalShare. Renewals and releases always fail closed: they report the error
	// (a renewal keeps retrying until the local deadline).
	Policy breaker.Policy

	// LocalShare is the capacity of this process's local share under
	// breaker.FailLocal, typically limit / number of processes. The share also
	// counts the permits this process holds in Redis (as far as they fit), so
	// that while Redis is down the process admits at most LocalShare in total,
	// including what it already held. If zero, 1.
	LocalShare int64
}

// A Semaphore is a weighted semaphore shared by every process that uses the same
// Redis and name. Use New; a zero Semaphore panics when used. A Semaphore is safe
// for simultaneous use by multiple goroutines.
type Semaphore struct {
	client  redis.UniversalClient
	name    string
	limit   int64
	cfg     Config
	keys    []string
	prefix  string // notify channel prefix, {name}:n:
	pub     string // publish or spublish
	sharded bool
	id      string // notify id of this Semaphore: its channel is prefix+id
	keyTTL  int64  // ms
	// cmdHead is the start of every script command: "evalsha", the digest
	// (set per call), the keys and the common ARGV (see lua/head.lua), the
	// token at argTok (set per call). The constant arguments below are boxed
	// once, so that a call does not allocate them again.
	cmdHead                           []any
	leaseArg, waitArg, tombArg, idArg any
	seq                               atomic.Uint64
	fail                              failure

	stopCtx  context.Context // cancelled by Close: background cleanups give up
	stopFn   context.CancelFunc
	bg       sync.WaitGroup // background cleanups, the listener, and renewal calls of permits released during them
	readopts atomic.Int64
	lost     atomic.Int64
	renewals renewals     // the renewal schedule of this Semaphore's permits
	hold     atomic.Int64 // mean hold time of this Semaphore's released permits (ns, EWMA); 0 if none yet

	// closed is set by Close under mu, and read under mu where what follows
	// must not race with Close (track, listen), without it elsewhere (every
	// acquire checks it).
	closed atomic.Bool

	// wmu guards waiters (apart from mu: every Acquire registers and
	// unregisters).
	wmu     sync.Mutex
	waiters map[string]chan int64

	mu sync.Mutex
	// mu guards:
	ps        *redis.PubSub
	listening bool
}

// New returns a Semaphore of the given limit named name on client. It does no
// I/O: the first call reports connectivity.
//
// The limit lives in Redis. The first call that finds no state for name stores
// limit; after that the stored limit is authoritative for every process until
// the semaphore's keys expire (they do when it is idle for about
// 2 × max(Lease, WaiterTTL, TombstoneTTL)) or SetLimit changes it. A process
// configured with a different limit therefore obeys the stored one; its own limit
// is only used to refuse at once a weight above it. Stats reports both.
//
// New panics if limit < 1, if name is empty or contains '{' or '}', if a
// duration in cfg is negative, if Lease or WaiterTTL < 3 × the breaker's
// CallTimeout (a renewal or heartbeat must fit in its period), with
// "distsem: nil client" if client is nil or a typed nil, or if client is a
// *redis.Client, *redis.ClusterClient or *redis.Ring without
// ContextTimeoutEnabled: without it go-redis ignores context deadlines and a
// frozen Redis would hold callers for its socket timeouts.
func New(client redis.UniversalClient, name string, limit int64, cfg Config) *Semaphore {
	storecall.Check("distsem", client)
	if limit < 1 {
		panic("distsem: limit < 1")
	}
	if name == "" || strings.ContainsAny(name, "{}") {
		panic("distsem: name must be non-empty and without braces")
	}
	if cfg.Lease < 0 || cfg.WaiterTTL < 0 || cfg.TombstoneTTL < 0 {
		panic("distsem: negative duration in Config")
	}
	if cfg.Lease == 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.WaiterTTL == 0 {
		cfg.WaiterTTL = 3 * time.Second
	}
	if cfg.TombstoneTTL == 0 {
		cfg.TombstoneTTL = 10 * time.Second
	}
	st := storecall.New("distsem", client, cfg.Breaker, "distsem:"+name, cfg.Policy)
	callTimeout := st.Breaker.CallTimeout()
	if cfg.Lease < 3*callTimeout {
		panic("distsem: Lease < 3 × CallTimeout")
	}
	if cfg.WaiterTTL < 3*callTimeout {
		panic("distsem: WaiterTTL < 3 × CallTimeout")
	}
	_, sharded := client.(*redis.ClusterClient)
	tag := "{" + name + "}"
	var id [8]byte
	rand.Read(id[:])
	s := &Semaphore{
		client:  client,
		name:    name,
		limit:   limit,
		cfg:     cfg,
		keys:    []string{tag + ":s", tag + ":h", tag + ":q", tag + ":qe", tag + ":d", tag + ":t"},
		prefix:  tag + ":n:",
		pub:     "publish",
		sharded: sharded,
		id:      hex.EncodeToString(id[:]),
		waiters: make(map[string]chan int64),
	}
	if sharded {
		s.pub = "spublish"
	}
	s.keyTTL = 2*max(cfg.Lease, cfg.WaiterTTL, cfg.TombstoneTTL).Milliseconds() + 10_000
	s.cmdHead = []any{"evalsha", nil, len(s.keys)}
	for _, k := range s.keys {
		s.cmdHead = append(s.cmdHead, k)
	}
	s.cmdHead = append(s.cmdHead, nil, s.limit, s.keyTTL, s.pub, s.prefix)
	s.leaseArg = cfg.Lease.Milliseconds()
	s.waitArg = cfg.WaiterTTL.Milliseconds()
	s.tombArg = cfg.TombstoneTTL.Milliseconds()
	s.idArg = s.id
	s.stopCtx, s.stopFn = context.WithCancel(context.Background())
	s.fail.init(st, cfg)
	return s
}

// Keys returns the Redis keys of the semaphore, all under the hash tag {name}.
// The notify channels of waiting processes are "{name}:n:<id>".
func (s *Semaphore) Keys() []string { return append([]string(nil), s.keys...) }

// argTok is the index of the token (ARGV[1]) in a script command.
const argTok = 9

// newToken returns a new token "<id>.<seq>", with one allocation.
func (s *Semaphore) newToken() string {
	var b [40]byte
	t := append(append(b[:0], s.id...), '.')
	return string(strconv.AppendUint(t, s.seq.Add(1), 36))
}

// Acquire waits for weight of the semaphore and returns a Permit holding it.
// Waiting callers of all processes are granted in FIFO order: a caller is
// never overtaken, so heavy callers are not starved (at the cost of
// head-of-line blocking).
//
// It returns a *RejectError matching ErrWeightExceedsLimit at once, without I/O,
// if weight exceeds the configured limit (or later, if it exceeds the limit
// stored in Redis); ctx.Err() if ctx is done first; and a wrapped Redis error,
// or what the failure policy decides, if Redis fails. On every error nothing is
// held: the token is released in the background (detached from ctx), so a
// cancelled or timed-out Acquire leaves no orphan permit even if its call ran
// in Redis after the caller gave up. Acquire panics if weight < 1.
func (s *Semaphore) Acquire(ctx context.Context, weight int64) (*Permit, error) {
	return s.acquire(ctx, weight, true)
}

// TryAcquire takes weight if it is free and no one is queued, with one Redis
// call, and otherwise returns a *RejectError matching ErrNoCapacity, with an
// estimated RetryAfter (see RejectError.Delay). It never queues. Other errors
// are as for Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context, weight int64) (*Permit, error) {
	return s.acquire(ctx, weight, false)
}

// Do acquires weight, runs fn with a context that is cancelled if the lease is
// lost or ctx is done, and releases the permit when fn returns or panics.
func (s *Semaphore) Do(ctx context.Context, weight int64, fn func(context.Context) error) error {
	p, err := s.Acquire(ctx, weight)
	if err != nil {
		return err
	}
	defer p.Release(ctx)
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(p.Context(), func() { cancel(context.Cause(p.Context())) })
	defer stop()
	return fn(fctx)
}

func (s *Semaphore) acquire(ctx context.Context, w int64, wait bool) (*Permit, error) {
	if w < 1 {
		panic("distsem: weight < 1")
	}
	if w > s.limit {
		return nil, &RejectError{Reason: ErrWeightExceedsLimit}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if s.fail.open() && s.fail.policy != breaker.FailClosed {
		return s.fallback(ctx, w, wait)
	}
	tok := s.newToken()
	tokArg := any(tok) // boxed once for every call with it
	var wake chan int64
	if wait {
		// Registered before the first call, so a hand-off notification that
		// arrives before that call returns is not lost.
		wake = s.register(tok)
		defer s.unregister(tok)
	}
	// Heartbeat at a third of the shorter of WaiterTTL and Lease: a waiter
	// granted by hand-off whose message was lost must call (and find itself
	// held) before that grant's lease runs out, or it would be reaped and queued
	// again at the back, for ever under load.
	beat := min(s.cfg.WaiterTTL, s.cfg.Lease) / 3
	// queuedAt is the Redis time (µs) of the last call that left tok queued. A
	// hand-off message whose fence is not above it is stale: it is for an
	// earlier grant of tok that expired unseen before tok was queued again.
	var queuedAt int64
	var timer *time.Timer
	errs := 0
	sent := false // a call with tok was sent: Redis may know tok
	calls := 0    // calls with tok sent: more than one means its release needs a tombstone
	for {
		start := time.Now()
		// Through the breaker with FailClosed: the policy is applied here, so
		// that a queued waiter can ride out a blip before falling back.
		r, _, ran, err := s.call(ctx, breaker.FailClosed, acquireScript, tokArg, w, s.leaseArg, b2i(wait), s.waitArg, s.idArg)
		sent = sent || ran
		if ran {
			calls++
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				if sent {
					// The outcome is unknown: the call may still run in Redis.
					s.cleanup(tokArg)
				}
				return nil, cerr
			}
			down := errors.Is(err, breaker.ErrUnavailable)
			var open *breaker.OpenError
			if wait && down && errs < 2 && r == nil && !errors.As(err, &open) && sent {
				// A queued waiter survives a blip: the script is idempotent per
				// token, so retrying keeps its place in the queue (the entry
				// lives for WaiterTTL without a heartbeat).
				errs++
				if !sleepCtx(ctx, beat/8) {
					s.cleanup(tokArg)
					return nil, ctx.Err()
				}
				continue
			}
			if sent {
				s.cleanup(tokArg)
			}
			if down && s.fail.policy != breaker.FailClosed {
				return s.fallback(ctx, w, wait)
			}
			return nil, fmt.Errorf("distsem: acquire %q: %w", s.name, err)
		}
		errs = 0
		switch r[0] {
		case stGranted:
			if timer != nil {
				timer.Stop()
			}
			return s.newPermit(tokArg, w, r[1], start, calls > 1), nil
		case stBusy:
			return nil, &RejectError{Reason: ErrNoCapacity, Delay: s.retryAfter(w, r)}
		case stTooHeavy:
			return nil, &RejectError{Reason: ErrWeightExceedsLimit}
		case stTomb:
			// Only our own cleanup tombstones our token, and we never reuse a
			// token after cleanup: a broken invariant, not a caller error.
			return nil, fmt.Errorf("distsem: acquire %q: token released while acquiring", s.name)
		case stQueued:
			if len(r) > 6 {
				queuedAt = r[6]
			}
		default:
			s.cleanup(tokArg)
			return nil, fmt.Errorf("distsem: acquire %q: unexpected status %d", s.name, r[0])
		}
		s.listen()
		// Heartbeat every beat. The head of the queue also calls just
		// after the earliest lease expires, so that a crashed holder's permit is
		// reaped and handed on at once rather than at the next heartbeat.
		next := beat
		if len(r) > 5 && r[4] == 0 && r[5] >= 0 {
			next = min(next, time.Duration(r[5])*time.Millisecond+5*time.Millisecond)
		}
		if timer == nil {
			timer = time.NewTimer(next)
			defer timer.Stop()
		} else {
			timer.Reset(next)
		}
		select {
		case <-ctx.Done():
			s.cleanup(tokArg)
			return nil, ctx.Err()
		case fence := <-wake:
			if fence > 0 && fence > queuedAt {
				// Granted by hand-off with our lease, after our last call
				// was sent: start is a safe base for the local deadline.
				return s.newPermit(tokArg, w, fence, start, calls > 1), nil
			}
		case <-timer.C:
		}
	}
}

// observeHold folds the hold time of a released permit into s.hold, an
// exponentially weighted mean (weight 1/8). Concurrent updates may lose one
// another's sample: it is an estimate.
func (s *Semaphore) observeHold(d time.Duration) {
	old := time.Duration(s.hold.Load())
	if old > 0 {
		d = old + (d-old)/8
	}
	s.hold.Store(int64(max(d, 1)))
}

// retryAfter estimates when a TryAcquire of w refused with the busy reply r
// ({2, 0, limit, used, waiters}) could succeed: the weight short (what is held,
// plus one per waiter queued ahead, plus w, minus the limit) divided by the
// rate at which held weight is released, taken as used / the mean hold time
// this Semaphore observed. An estimate from this process's own permits (0
// before it released any), never negative, at most an hour.
func (s *Semaphore) retryAfter(w int64, r []int64) time.Duration {
	hold := time.Duration(s.hold.Load())
	if hold <= 0 || len(r) < 5 {
		return 0
	}
	limit, used, waiters := r[2], r[3], r[4]
	short := max(used+waiters+w-limit, 1)
	d := float64(hold) * float64(short) / float64(max(used, 1))
	return time.Duration(min(d, float64(time.Hour)))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// track counts one more goroutine that Close waits for (call s.bg.Done when it
// ends), and reports whether it did: false once the Semaphore is closed.
func (s *Semaphore) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.bg.Add(1) // under mu, so never concurrent with Close's Wait
	return true
}

// cleanup releases tok in the background, detached from the caller's context,
// retrying store failures until it succeeds, the lease has passed (the permit
// is then gone anyway) or the Semaphore is closed.
func (s *Semaphore) cleanup(tok any) {
	// The release always writes a tombstone (ARGV[8] = 1).
	if !s.track() {
		// No background work after Close: one attempt, bounded by CallTimeout,
		// and none at all while the breaker is open.
		s.call(context.Background(), breaker.FailClosed, releaseScript, tok, s.tombArg, 0, 1, 0)
		return
	}
	go func() {
		defer s.bg.Done()
		// Retry while the token can still matter: a holder lives for Lease, a
		// queued entry for WaiterTTL, and either could otherwise be granted
		// later and held by no one.
		deadline := time.Now().Add(max(s.cfg.Lease, s.cfg.WaiterTTL))
		backoff := 20 * time.Millisecond
		for {
			_, _, _, err := s.call(s.stopCtx, breaker.FailClosed, releaseScript, tok, s.tombArg, 0, 1, 0)
			if err == nil || s.stopCtx.Err() != nil || time.Now().Add(backoff).After(deadline) {
				return
			}
			if !sleepCtx(s.stopCtx, backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
		}
	}()
}

// SetLimit stores a new limit in Redis for every process. Growing it hands the
// new capacity to waiters at once; shrinking it never revokes permits: holders
// drain until the weight in use is below the new limit. The configured limit of
// this Semaphore (used to refuse heavier weights without I/O) is not changed.
func (s *Semaphore) SetLimit(ctx context.Context, limit int64) error {
	if limit < 1 {
		panic("distsem: limit < 1")
	}
	_, _, _, err := s.call(ctx, breaker.FailClosed, releaseScript, "", s.tombArg, limit, 0, 0)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("distsem: set limit %q: %w", s.name, err)
	}
	return nil
}

// Stats describes a semaphore at one moment.
type Stats struct {
	// Limit is the limit stored in Redis (0 if the semaphore has no state yet);
	// ConfiguredLimit the one given to New.
	Limit, ConfiguredLimit int64
	// InUse is the weight held, Holders the number of permits, Waiters the
	// number of queued callers of all processes. Expired holders and dead waiters
	// are counted until a script reaps them.
	InUse, Holders, Waiters int64
	// Readopted and Lost count this Semaphore's permits re-adopted after they
	// vanished from Redis and permits lost; Degraded counts permits granted
	// without Redis by the failure policy (FailOpen or FailLocal).
	Readopted, Lost, Degraded int64
}

// Stats reads the semaphore's state from Redis in one round trip (MULTI).
func (s *Semaphore) Stats(ctx context.Context) (Stats, error) {
	st := Stats{
		ConfiguredLimit: s.limit,
		Readopted:       s.readopts.Load(),
		Lost:            s.lost.Load(),
		Degraded:        s.fail.degraded.Load(),
	}
	// Through the breaker like every other call: while it is open, Stats
	// returns ErrUnavailable at once instead of waiting on the network.
	var hm *redis.SliceCmd
	var hc, qc *redis.IntCmd
	_, _, err := storecall.Do(ctx, &s.fail.st, breaker.FailClosed, func(ctx context.Context, client redis.UniversalClient) (struct{}, error) {
		_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			hm = p.HMGet(ctx, s.keys[0], "limit", "used")
			hc = p.ZCard(ctx, s.keys[1])
			qc = p.ZCard(ctx, s.keys[2])
			return nil
		})
		return struct{}{}, err
	}, nil)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return st, cerr
		}
		return st, fmt.Errorf("distsem: stats %q: %w", s.name, err)
	}
	vals := hm.Val()
	st.Limit = atoi(vals[0])
	st.InUse = atoi(vals[1])
	st.Holders = hc.Val()
	st.Waiters = qc.Val()
	return st, nil
}

func atoi(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}

// Close stops the Semaphore's pub/sub connection and background releases and
// waits for its goroutines to exit, including renewal calls still in flight
// for permits released before Close: a call stuck in a client or hook that
// ignores its context delays Close until it returns. Permits still held keep
// renewing until released. Calls after Close return ErrClosed. Close is idempotent.
func (s *Semaphore) Close() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.closed.Store(true)
	ps := s.ps
	s.mu.Unlock()
	s.stopFn()
	if ps != nil {
		ps.Close()
	}
	s.bg.Wait()
	return nil
}

func (s *Semaphore) isClosed() bool { return s.closed.Load() }
