package distsem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/redis/go-redis/v9"
)

// Config configures a Semaphore. The zero value is a valid Config: 10s leases,
// a breaker of its own (so breaker.DefaultCallTimeout per Redis call), 1s
// waiter liveness, 10s tombstones, names of at most 1024 bytes, no re-adoption.
type Config struct {
	// Lease is how long a permit stays valid at the store without a renewal. A
	// holder renews every Lease/3; if it dies, its permit is free again at most
	// Lease after its last renewal. If zero, 10s. It must be at least
	// 3 × the breaker's CallTimeout and at most MaxTTL.
	Lease time.Duration

	// WaiterTTL is the liveness of a queued caller: its queue entry, and a
	// permit handed to it by the hand-off that it has not claimed yet, live
	// WaiterTTL after its last call to Redis. A waiter calls (heartbeats)
	// every min(WaiterTTL, Lease)/3; that heartbeat is also the poll that covers
	// a lost notification, so it bounds the extra wait a lost pub/sub message
	// can cause. A permit handed to a waiter is held with the full Lease once
	// the waiter claims it: by its first renewal, due within half of what is
	// left of that window, or by a heartbeat that finds it granted.
	//
	// WaiterTTL is therefore the bound on what a process that dies while
	// callers wait takes with it beyond what it held: its queue entries and
	// everything granted to them are free again within WaiterTTL of its last
	// call (so within WaiterTTL of its death); only the weight it held stays
	// out until its leases end. If zero, 1s. It must be at least 3 × the
	// breaker's CallTimeout.
	WaiterTTL time.Duration

	// TombstoneTTL is how long Redis remembers the token of an acquire that
	// failed or was cancelled, once it is released, so that the acquire, if it
	// runs late (a go-redis retry, a call that timed out at the client but sat in
	// a socket), is refused rather than granted. If zero, 10s.
	TombstoneTTL time.Duration

	// MaxNameLen bounds the length of the semaphore's name in bytes: the name is
	// part of every key and notify channel, and a huge key costs Redis time on
	// every call. If zero, DefaultMaxNameLen.
	MaxNameLen int

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
	// the Semaphore makes its own with breaker.Config{}, hence
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
	// including what it already held. After Redis returns, the permits the
	// share granted without Redis are carried into Redis, which counts them
	// from then on; until they all are, a grant from Redis needs room on the
	// share too (TryAcquire: ErrLocalBusy; Acquire waits for it). If zero, 1.
	LocalShare int64

	// Observer, if non-nil, is told what the Semaphore does, with Component
	// floodgate.ComponentDistsem and no key ever:
	//   - KindAdmit for every grant of Acquire or TryAcquire (and Hold,
	//     TryHold, Do), with N, the wait (Duration: the time the call took,
	//     Redis calls included, if it queued in Redis or on the local share;
	//     else 0) and Source: floodgate.SourceStore, or SourceFailOpen or
	//     SourceFailLocal for a permit granted without Redis (Degraded);
	//   - KindReject for a refusal, with its Reason, the wait, the error
	//     and, when a failure policy made it, Source (SourceFailLocal for
	//     ErrLocalBusy, SourceFailClosed for breaker.ErrUnavailable), but not
	//     for TryAcquire's ErrNoCapacity: a non-waiting call that finds no
	//     room is a probe whose caller reports the outcome (LocalStats counts
	//     it); KindCancel for a call that returned ctx.Err(), with the wait;
	//   - KindRelease by the first Release of a permit that was not lost, with
	//     N and how long it was held (from the return of Acquire);
	//   - KindRenew for every renewal call that returned (Err set if it
	//     failed; it is retried until the local deadline), and KindLeaseLost
	//     with N and Err ErrLeaseLost when a permit's lease is lost.
	// It is called without any lock held, on the caller's goroutine (a
	// renewal's and a loss's on the renewal goroutine), before the release
	// call to Redis for KindRelease.
	Observer floodgate.Observer

	// Logger receives one record per lost lease (Warn, "distsem: lease lost",
	// with the semaphore's name as "limiter"), and never one per call. If nil,
	// slog.Default() at the time of the loss. To silence it, use
	// slog.New(slog.DiscardHandler).
	Logger *slog.Logger
}

// A Semaphore is a weighted semaphore shared by every process that uses the same
// Redis and name. Use New; every method of a zero Semaphore panics with a
// "distsem: " message. A Semaphore is safe
// for simultaneous use by multiple goroutines.
type Semaphore struct {
	// The hub runs wake-ups, renewals, background work and Close: its own
	// for a Semaphore made by New, shared with the other keys for one of a
	// Keyed (see hub).
	*hub

	client redis.UniversalClient
	name   string
	limit  int64
	cfg    Config
	keys   []string
	keyTTL int64 // ms
	// cmdHead is the start of every script command: "evalsha", the digest
	// (set per call), the keys and the token at argTok (set per call; see
	// lua/head.lua). numHead is the start of every call's numbers (see
	// nums).
	cmdHead []any
	numHead nums
	fail    failure

	readopts atomic.Int64
	lost     atomic.Int64
	local    localCounters
}

// Bounds of the values a Semaphore sends to Redis. The scripts compute in Lua
// numbers (doubles), exact only up to 2^53: a limit, a weight and their sum
// must stay below that, and so must the Redis time in ms plus a duration.
const (
	// MaxLimit is the largest limit (and so the largest n) a Semaphore accepts:
	// the weight in use plus n is then at most 2^53, exact in a Lua number.
	MaxLimit = 1 << 52

	// MaxTTL is the longest Lease, WaiterTTL, TombstoneTTL or CallTimeout a
	// Config may set.
	MaxTTL = 30 * 24 * time.Hour

	// DefaultMaxNameLen is the longest name New accepts when
	// Config.MaxNameLen is zero, in bytes.
	DefaultMaxNameLen = 1024
)

// New returns a Semaphore of the given limit named name on client. It does no
// I/O: the first call reports connectivity.
//
// The limit lives in Redis. The first call that finds no state for name stores
// limit; after that the stored limit is authoritative for every process until
// the semaphore's keys expire (they do when it is idle for about
// 2 × max(Lease, WaiterTTL, TombstoneTTL)) or SetLimit changes it. A process
// configured with a different limit therefore obeys the stored one; its own limit
// is only used to refuse at once an n above it. Stats reports both.
//
// New panics, with a message starting "distsem: ", on a programmer error:
// client is nil or a typed nil ("distsem: nil client"); limit < 1 or >
// MaxLimit; name is empty or longer than Config.MaxNameLen bytes
// (DefaultMaxNameLen if zero); a duration in cfg is
// negative or above MaxTTL; MaxNameLen is negative; Lease or WaiterTTL < 3 ×
// the breaker's CallTimeout (a renewal or heartbeat must fit in its period);
// or client is a *redis.Client, *redis.ClusterClient or *redis.Ring without
// ContextTimeoutEnabled: without it go-redis ignores context deadlines and a
// frozen Redis would hold callers for its socket timeouts.
func New(client redis.UniversalClient, name string, limit int64, cfg Config) *Semaphore {
	storecall.Check("distsem", client)
	if limit < 1 || limit > MaxLimit {
		panic("distsem: limit out of range [1, MaxLimit]")
	}
	cfg = withDefaults(cfg)
	if name == "" || len(name) > cfg.MaxNameLen {
		panic("distsem: name must be non-empty and at most MaxNameLen bytes")
	}
	st := storecall.New("distsem", client, cfg.Breaker, "distsem:"+name)
	callTimeout := st.Breaker.CallTimeout()
	if cfg.Lease < 3*callTimeout {
		panic("distsem: Lease < 3 × CallTimeout")
	}
	if cfg.WaiterTTL < 3*callTimeout {
		panic("distsem: WaiterTTL < 3 × CallTimeout")
	}
	_, sharded := client.(*redis.ClusterClient)
	return newSemaphore(client, name, limit, cfg, st, newHub(client, hashTag(name)+":n:", sharded, subscribeTimeout(st)))
}

// newSemaphore returns the Semaphore of New on hub h. cfg has its defaults;
// name and limit are valid.
func newSemaphore(client redis.UniversalClient, name string, limit int64, cfg Config, st storecall.Store, h *hub) *Semaphore {
	tag := hashTag(name)
	s := &Semaphore{
		hub:    h,
		client: client,
		name:   name,
		limit:  limit,
		cfg:    cfg,
		keys:   []string{tag + ":s", tag + ":h", tag + ":q", tag + ":qe", tag + ":d", tag + ":t"},
	}
	s.keyTTL = 2*max(cfg.Lease, cfg.WaiterTTL, cfg.TombstoneTTL).Milliseconds() + 10_000
	s.fail.init(st, cfg)
	s.setHead()
	return s
}

// setHead builds s.cmdHead from the keys, and s.numHead, the start of every
// call's ARGV[2] (see nums; the notify id and channel prefix are the hub's):
// the scripts SPUBLISH where the hub SSUBSCRIBEs (a Semaphore on Cluster).
func (s *Semaphore) setHead() {
	s.cmdHead = make([]any, 0, argTok+1)
	s.cmdHead = append(s.cmdHead, "evalsha", nil, len(s.keys))
	for _, k := range s.keys {
		s.cmdHead = append(s.cmdHead, k)
	}
	s.cmdHead = append(s.cmdHead, nil)
	s.numHead = append(append(make(nums, numsLen), s.id...), s.chanPrefix...)
	s.numHead.set(0, s.limit)
	s.numHead.set(1, s.keyTTL)
	s.numHead.set(2, int64(b2i(s.sharded)))
}

// withDefaults returns cfg with its zero fields set to their defaults; it
// panics on a value out of range (see New).
func withDefaults(cfg Config) Config {
	for _, d := range []time.Duration{cfg.Lease, cfg.WaiterTTL, cfg.TombstoneTTL} {
		if d < 0 || d > MaxTTL {
			panic("distsem: duration in Config out of range [0, MaxTTL]")
		}
	}
	if cfg.MaxNameLen < 0 {
		panic("distsem: negative MaxNameLen")
	}
	if cfg.Lease == 0 {
		cfg.Lease = 10 * time.Second
	}
	if cfg.WaiterTTL == 0 {
		cfg.WaiterTTL = time.Second
	}
	if cfg.TombstoneTTL == 0 {
		cfg.TombstoneTTL = 10 * time.Second
	}
	if cfg.MaxNameLen == 0 {
		cfg.MaxNameLen = DefaultMaxNameLen
	}
	return cfg
}

// mustBeMade panics if s is a zero Semaphore (not made by New).
func (s *Semaphore) mustBeMade() {
	if s.client == nil {
		panic("distsem: Semaphore not made by New")
	}
}

// Keys returns the Redis keys of the semaphore, all under one hash tag: {name}
// for a name without braces, and otherwise the name with each '{' written
// "{(" and each '}' written "{)" (see the package doc). The notify channels
// of waiting processes are that tag followed by ":n:<id>".
func (s *Semaphore) Keys() []string {
	s.mustBeMade()
	return append([]string(nil), s.keys...)
}

// argTok is the index of the token (ARGV[1]) in a script command.
const argTok = 9

// newToken returns a new token "<id>.<seq>", with one allocation.
func (s *Semaphore) newToken() string {
	var b [40]byte
	t := append(append(b[:0], s.id...), '.')
	return string(strconv.AppendUint(t, s.seq.Add(1), 36))
}

// Acquire waits for n of the semaphore's limit and returns a Permit holding
// it. Waiting callers of all processes are granted in FIFO order: a caller is
// never overtaken, so heavy callers are not starved (at the cost of
// head-of-line blocking).
//
// It returns a *RejectError matching ErrTooLarge at once, without I/O, if n
// exceeds the configured limit (or later, if it exceeds the limit stored in
// Redis); ctx.Err() if ctx is done first; ErrClosed if the Semaphore is
// closed before or while it waits; and a wrapped Redis error, or what the
// failure policy decides, if Redis fails. On every error nothing is held: the
// token is released in the background (detached from ctx), so a cancelled or
// timed-out Acquire leaves no orphan permit even if its call ran in Redis
// after the caller gave up. Acquire panics if n < 1.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Permit, error) {
	return s.acquireCounted(ctx, n, true)
}

// TryAcquire takes n if it is free and no one is queued, with one Redis call,
// and otherwise returns a *RejectError matching ErrNoCapacity, with an
// estimated RetryAfter (see ErrNoCapacity). It never queues. Other errors are
// as for Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (*Permit, error) {
	return s.acquireCounted(ctx, n, false)
}

// acquireCounted is acquire, counted in LocalStats and reported to the
// Observer.
func (s *Semaphore) acquireCounted(ctx context.Context, n int64, wait bool) (*Permit, error) {
	obs := s.cfg.Observer
	var start time.Time
	if obs != nil {
		start = time.Now()
	}
	var queued bool
	p, err := s.acquire(ctx, n, wait, &queued)
	s.count(ctx, p, err)
	if obs == nil {
		return p, err
	}
	var waited time.Duration
	if queued {
		waited = time.Since(start)
	}
	if err == nil {
		p.acquiredAt = time.Now()
	}
	s.observeAcquire(ctx, n, p, waited, err)
	return p, err
}

// count counts the outcome of an acquire in LocalStats.
func (s *Semaphore) count(ctx context.Context, p *Permit, err error) {
	c := &s.local
	switch {
	case err == nil:
		c.acquired.Add(1)
		c.held.Add(p.weight)
	case errors.Is(err, ErrNoCapacity):
		c.noCapacity.Add(1)
	case errors.Is(err, ErrTooLarge):
		c.tooLarge.Add(1)
	case errors.Is(err, ErrClosed):
		c.closed.Add(1)
	case errors.Is(err, ErrLocalBusy):
		// counted by fallback
	case ctx.Err() != nil && err == ctx.Err():
		c.canceled.Add(1)
	case errors.Is(err, breaker.ErrUnavailable):
		c.unavailable.Add(1)
	default:
		c.errors.Add(1)
	}
}

// logLost logs the loss of p's lease. No lock is held.
func (s *Semaphore) logLost(p *Permit) {
	logger := s.cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.LogAttrs(context.Background(), slog.LevelWarn, "distsem: lease lost",
		slog.String("limiter", s.name),
		slog.String("component", "distsem"),
		slog.Int64("weight", p.weight),
		slog.Int64("fence", p.fence),
		slog.Int64("lost", s.lost.Load()),
	)
}

// Do acquires n, runs fn with a context that is cancelled if the lease is
// lost or ctx is done, and releases the permit when fn returns or panics.
func (s *Semaphore) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	p, err := s.Acquire(ctx, n)
	if err != nil {
		return err
	}
	return runHolding(ctx, p, fn)
}

// runHolding runs fn for Do while p is held, with the context of Hold
// (cancelled if the lease is lost or ctx is done), and releases p as Hold's
// release does when fn returns or panics.
func runHolding(ctx context.Context, p *Permit, fn func(context.Context) error) error {
	h := p.hold(ctx, "")
	defer h.Release()
	return fn(h.Context())
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

// track counts one more goroutine that Close waits for (call h.bg.Done when it
// ends), and reports whether it did: false once the hub is closed.
func (h *hub) track() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return false
	}
	h.bg.Add(1) // under mu, so never concurrent with close's Wait
	return true
}

// cleanup releases tok in the background, detached from the caller's context,
// retrying store failures until it succeeds, the lease has passed (the permit
// is then gone anyway) or the Semaphore is closed.
func (s *Semaphore) cleanup(tok any) {
	// The release always writes a tombstone.
	if !s.track() {
		// No background work after Close: one attempt, bounded by CallTimeout,
		// and none at all while the breaker is open.
		s.call(context.Background(), breaker.FailClosed, releaseScript, tok, s.releaseNums(0, true, 0))
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
			_, _, _, err := s.call(s.stopCtx, breaker.FailClosed, releaseScript, tok, s.releaseNums(0, true, 0))
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
// this Semaphore (used to refuse larger n without I/O) is not changed.
//
// It returns an error, without I/O, if limit < 1 or limit > MaxLimit, and
// ErrClosed after Close; the stored limit is then unchanged.
func (s *Semaphore) SetLimit(ctx context.Context, limit int64) error {
	s.mustBeMade()
	if limit < 1 || limit > MaxLimit {
		return fmt.Errorf("distsem: set limit %q: limit %d out of range [1, MaxLimit]", s.name, limit)
	}
	if s.isClosed() {
		return ErrClosed
	}
	_, _, _, err := s.call(ctx, breaker.FailClosed, releaseScript, "", s.releaseNums(limit, false, 0))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("distsem: set limit %q: %w", s.name, err)
	}
	return nil
}

// Close fails every Acquire still waiting with ErrClosed (each withdraws its
// queue entry, or gives back a permit granted to it meanwhile, with one call
// of at most CallTimeout), stops the Semaphore's pub/sub connection and
// background releases and waits for its goroutines to exit, including renewal
// calls still in flight for permits released before Close: a call stuck in a
// client or hook that ignores its context delays Close until it returns.
// Permits still held keep renewing until released. Acquire, TryAcquire, Do,
// SetLimit and Stats return ErrClosed after Close. Close is idempotent.
func (s *Semaphore) Close() error {
	s.mustBeMade()
	s.hub.close()
	return nil
}

// close is Close for every Semaphore on the hub.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed.Load() {
		h.mu.Unlock()
		return
	}
	h.closed.Store(true)
	ps := h.ps
	h.mu.Unlock()
	h.stopFn()
	if ps != nil {
		ps.Close()
	}
	h.bg.Wait()
}

func (h *hub) isClosed() bool { return h.closed.Load() }
