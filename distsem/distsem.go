package distsem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
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
	// including what it already held. If zero, 1.
	LocalShare int64

	// OnAcquire, if non-nil, is called after every successful Acquire or
	// TryAcquire with the weight granted and the time the call took (its
	// Redis calls included, and the wait in the queue for Acquire). It is
	// called without any lock held, on the caller's goroutine.
	OnAcquire func(n int64, waited time.Duration)

	// OnRelease, if non-nil, is called by the first Release of a permit that
	// was not lost, with its weight and how long it was held (from the return
	// of Acquire to Release). It is called without any lock held, before the
	// release call to Redis.
	OnRelease func(n int64, held time.Duration)

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
	prefix string // notify channel prefix: the hub's channel is prefix+id
	pub    string // publish or spublish
	keyTTL int64  // ms
	// cmdHead is the start of every script command: "evalsha", the digest
	// (set per call), the keys and the common ARGV (see lua/head.lua), the
	// token at argTok (set per call). The constant arguments below are boxed
	// once, so that a call does not allocate them again.
	cmdHead                           []any
	leaseArg, waitArg, tombArg, idArg any
	fail                              failure

	readopts atomic.Int64
	lost     atomic.Int64
	local    localCounters
}

// localCounters are what LocalStats reads: this process's own calls.
type localCounters struct {
	acquired, canceled, errors                atomic.Int64
	noCapacity, tooLarge, unavailable, closed atomic.Int64
	renewals, renewalErrors                   atomic.Int64
	held                                      atomic.Int64
	failOpen, failLocal, localBusy            atomic.Int64
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
	s := newSemaphore(client, name, limit, cfg, st, newHub(client, hashTag(name)+":n:", sharded, subscribeTimeout(st)))
	if sharded {
		s.pub = "spublish"
	}
	s.setHead()
	return s
}

// newSemaphore returns the Semaphore of New on hub h, without its command
// head: the caller sets pub and prefix if they differ from "publish" and h's
// channel prefix, then calls setHead. cfg has its defaults; name and limit
// are valid.
func newSemaphore(client redis.UniversalClient, name string, limit int64, cfg Config, st storecall.Store, h *hub) *Semaphore {
	tag := hashTag(name)
	s := &Semaphore{
		hub:    h,
		client: client,
		name:   name,
		limit:  limit,
		cfg:    cfg,
		keys:   []string{tag + ":s", tag + ":h", tag + ":q", tag + ":qe", tag + ":d", tag + ":t"},
		prefix: h.chanPrefix,
		pub:    "publish",
	}
	s.keyTTL = 2*max(cfg.Lease, cfg.WaiterTTL, cfg.TombstoneTTL).Milliseconds() + 10_000
	s.leaseArg = cfg.Lease.Milliseconds()
	s.waitArg = cfg.WaiterTTL.Milliseconds()
	s.tombArg = cfg.TombstoneTTL.Milliseconds()
	s.idArg = h.id
	s.fail.init(st, cfg)
	return s
}

// setHead builds s.cmdHead from the keys and the common ARGV.
func (s *Semaphore) setHead() {
	s.cmdHead = make([]any, 0, argTok+5)
	s.cmdHead = append(s.cmdHead, "evalsha", nil, len(s.keys))
	for _, k := range s.keys {
		s.cmdHead = append(s.cmdHead, k)
	}
	s.cmdHead = append(s.cmdHead, nil, s.limit, s.keyTTL, s.pub, s.prefix)
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

// acquireCounted is acquire, counted in LocalStats and reported to the hooks.
func (s *Semaphore) acquireCounted(ctx context.Context, n int64, wait bool) (*Permit, error) {
	var start time.Time
	if s.cfg.OnAcquire != nil || s.cfg.OnRelease != nil {
		start = time.Now()
	}
	p, err := s.acquire(ctx, n, wait)
	c := &s.local
	switch {
	case err == nil:
		c.acquired.Add(1)
		c.held.Add(p.weight)
		if s.cfg.OnRelease != nil {
			p.acquiredAt = time.Now()
		}
		if s.cfg.OnAcquire != nil {
			s.cfg.OnAcquire(n, time.Since(start))
		}
		return p, nil
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
	return nil, err
}

// LocalStats counts what this Semaphore (this process) did, without I/O: use
// it where Stats' round trip is unwelcome (a metrics callback).
type LocalStats struct {
	// Held is the weight this process's permits hold now (degraded ones
	// included, lost ones not).
	Held int64
	// Acquired counts successful Acquire and TryAcquire calls (degraded
	// grants included: see Stats.Degraded); Canceled those that returned
	// ctx.Err().
	Acquired, Canceled int64
	// Refusals by reason, and Errors for other failures (a Redis error that
	// is not a store failure, a broken invariant).
	RejectedNoCapacity, RejectedTooLarge, RejectedUnavailable, RejectedClosed int64
	// RejectedLocalBusy counts refusals by the local share under FailLocal.
	RejectedLocalBusy int64
	Errors            int64
	// FailOpen and FailLocal count the grants made without Redis, by the
	// policy that made them (they add up to Degraded).
	FailOpen, FailLocal int64
	// Renewals counts lease renewals that Redis answered, RenewalErrors those
	// that failed (retried until the local deadline).
	Renewals, RenewalErrors int64
	// Readopted, Lost and Degraded are as in Stats.
	Readopted, Lost, Degraded int64
}

// LocalStats returns this process's counters for the semaphore. It does no
// I/O, takes no lock and allocates nothing.
func (s *Semaphore) LocalStats() LocalStats {
	s.mustBeMade()
	c := &s.local
	return LocalStats{
		Held:                c.held.Load(),
		Acquired:            c.acquired.Load(),
		Canceled:            c.canceled.Load(),
		RejectedNoCapacity:  c.noCapacity.Load(),
		RejectedTooLarge:    c.tooLarge.Load(),
		RejectedUnavailable: c.unavailable.Load(),
		RejectedClosed:      c.closed.Load(),
		RejectedLocalBusy:   c.localBusy.Load(),
		FailOpen:            c.failOpen.Load(),
		FailLocal:           c.failLocal.Load(),
		Errors:              c.errors.Load(),
		Renewals:            c.renewals.Load(),
		RenewalErrors:       c.renewalErrors.Load(),
		Readopted:           s.readopts.Load(),
		Lost:                s.lost.Load(),
		Degraded:            s.fail.degraded.Load(),
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
		slog.String("kind", "distsem"),
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

// acquire is Acquire (wait) or TryAcquire (!wait): the checks that need no
// I/O, then a loop of acquire calls. Each call grants, refuses or queues the
// token; a queued caller waits for a hand-off message, its next heartbeat,
// its context or Close (see attempt).
func (s *Semaphore) acquire(ctx context.Context, n int64, wait bool) (*Permit, error) {
	s.mustBeMade()
	if n < 1 {
		panic("distsem: n < 1")
	}
	if n > s.limit {
		return nil, reject.New(ErrTooLarge, 0)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if s.fail.open() && s.fail.policy != breaker.FailClosed {
		return s.fallback(ctx, n, wait)
	}
	tok := s.newToken()
	a := attempt{s: s, n: n, wait: wait, tok: tok}
	if wait {
		// Registered before the first call, so a hand-off notification that
		// arrives before that call returns is not lost.
		a.wake = s.register(tok)
		defer s.unregister(tok)
		defer a.stopTimer()
	}
	for {
		r, err := a.send(ctx)
		if err != nil {
			if a.rideOut(ctx, err) {
				continue
			}
			return a.failed(ctx, err)
		}
		p, err := a.answer(r)
		if err != errQueued {
			return p, err
		}
		if p, err = a.await(ctx, r); err != errQueued {
			return p, err
		}
	}
}

// errQueued is what attempt.answer and attempt.await return when the caller
// is still queued and must call again; it never leaves the package.
var errQueued = errors.New("distsem: queued")

// An attempt is one Acquire or TryAcquire in progress: its token and what its
// calls so far have told it.
type attempt struct {
	s    *Semaphore
	n    int64
	wait bool
	tok  any        // the token, boxed once for every call with it
	wake chan int64 // hand-off notifications (wait only)

	start time.Time // send time of the call in flight or last made
	sent  bool      // a call with tok was sent: Redis may know tok
	calls int       // calls with tok sent: more than one means its release needs a tombstone
	errs  int       // store failures in a row ridden out (see rideOut)
	timer *time.Timer

	// queuedSent is the send time of the last call that left tok queued, and
	// queuedAt its Redis time (µs). A hand-off grant made after that call
	// lives at least min(WaiterTTL, Lease) after queuedSent, so that is the
	// local deadline of a permit claimed from a hand-off message; and a
	// message whose fence is not above queuedAt is stale: it is for an earlier
	// grant of tok that expired unseen before tok was queued again.
	queuedSent time.Time
	queuedAt   int64
}

// send makes one acquire call for the attempt.
func (a *attempt) send(ctx context.Context) ([]int64, error) {
	s := a.s
	a.start = time.Now()
	// Through the breaker with FailClosed: the policy is applied by failed, so
	// that a queued waiter can ride out a blip before falling back.
	r, _, ran, err := s.callBefore(ctx, breaker.FailClosed, acquireScript, a.tok, a.n, s.leaseArg, b2i(a.wait), s.waitArg, s.idArg)
	a.sent = a.sent || ran
	if ran {
		a.calls++
	}
	if err == nil {
		a.errs = 0
	}
	return r, err
}

// rideOut reports whether a failed call should be made again: a queued
// waiter survives a blip (at most two failures in a row, not while the
// breaker is open), because the script is idempotent per token, so retrying
// keeps its place in the queue (the entry lives for WaiterTTL without a
// heartbeat). It sleeps before the retry; false if ctx ends meanwhile (failed
// then returns ctx.Err()).
func (a *attempt) rideOut(ctx context.Context, err error) bool {
	var open *breaker.OpenError
	if !a.wait || !a.sent || a.errs >= 2 || ctx.Err() != nil ||
		!errors.Is(err, breaker.ErrUnavailable) || errors.As(err, &open) {
		return false
	}
	a.errs++
	return sleepCtx(ctx, a.s.beat()/8)
}

// failed ends the attempt after a failed call: the token is released in the
// background if Redis may know it; the caller's own cancellation is returned
// as ctx.Err(); a store failure goes to the failure policy.
func (a *attempt) failed(ctx context.Context, err error) (*Permit, error) {
	s := a.s
	if a.sent {
		// The outcome is unknown: the call may still run in Redis.
		s.cleanup(a.tok)
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if errors.Is(err, breaker.ErrUnavailable) && s.fail.policy != breaker.FailClosed {
		return s.fallback(ctx, a.n, a.wait)
	}
	return nil, fmt.Errorf("distsem: acquire %q: %w", s.name, err)
}

// answer reads the reply of an acquire call: a grant (with the full Lease:
// the call made or extended it), a refusal, or errQueued.
func (a *attempt) answer(r []int64) (*Permit, error) {
	s := a.s
	switch r[0] {
	case stGranted:
		return a.granted(r[1], a.start, s.cfg.Lease)
	case stBusy:
		return nil, reject.New(ErrNoCapacity, s.retryAfter(a.n, r))
	case stTooHeavy:
		return nil, reject.New(ErrTooLarge, 0)
	case stTomb:
		// Only our own cleanup tombstones our token, and we never reuse a
		// token after cleanup: a broken invariant, not a caller error.
		return nil, fmt.Errorf("distsem: acquire %q: token released while acquiring", s.name)
	case stQueued:
		a.queuedSent = a.start
		if len(r) > 6 {
			a.queuedAt = r[6]
		}
		return nil, errQueued
	}
	s.cleanup(a.tok)
	return nil, fmt.Errorf("distsem: acquire %q: unexpected status %d", s.name, r[0])
}

// granted returns the Permit of a grant with fence whose lease, at the
// store, lasts at least lease after sent. A grant seen after Close is given
// back: Close fails waiting callers with ErrClosed.
func (a *attempt) granted(fence int64, sent time.Time, lease time.Duration) (*Permit, error) {
	s := a.s
	if s.isClosed() {
		s.cleanup(a.tok)
		return nil, ErrClosed
	}
	return s.newPermit(a.tok, a.n, fence, sent, lease, a.calls > 1), nil
}

// await waits, after a call that left the token queued (reply r), for a
// hand-off message, the next heartbeat, ctx or Close. It returns errQueued
// when the caller must call again.
func (a *attempt) await(ctx context.Context, r []int64) (*Permit, error) {
	s := a.s
	s.listen()
	// Heartbeat every beat. The head of the queue also calls just after the
	// earliest lease expires, so that a crashed holder's permit is reaped and
	// handed on at once rather than at the next heartbeat.
	next := s.beat()
	if len(r) > 5 && r[4] == 0 && r[5] >= 0 {
		next = min(next, time.Duration(r[5])*time.Millisecond+5*time.Millisecond)
	}
	if a.timer == nil {
		a.timer = time.NewTimer(next)
	} else {
		a.timer.Reset(next)
	}
	select {
	case <-ctx.Done():
		s.cleanup(a.tok)
		return nil, ctx.Err()
	case <-s.stopCtx.Done():
		s.cleanup(a.tok) // withdraws the entry, or gives back a grant racing Close
		return nil, ErrClosed
	case fence := <-a.wake:
		// Granted by hand-off after our last queued call: the grant lives
		// until that call's queue entry would have expired, and is claimed
		// for the full Lease by the permit's first renewal. With too little of
		// that left for a renewal call (the message came late), claim it now
		// with a call instead: it finds the token held and extends it.
		claim := min(s.cfg.WaiterTTL, s.cfg.Lease)
		if fence > 0 && fence > a.queuedAt && time.Until(a.queuedSent.Add(claim)) > s.callTimeout() {
			return a.granted(fence, a.queuedSent, claim)
		}
	case <-a.timer.C:
	}
	return nil, errQueued
}

func (a *attempt) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
	}
}

// beat is the waiter heartbeat period: a third of the shorter of WaiterTTL
// and Lease. A waiter granted by hand-off whose message was lost must call
// (and find itself held) before that grant runs out, or it would be reaped
// and queued again at the back, for ever under load.
func (s *Semaphore) beat() time.Duration {
	return min(s.cfg.WaiterTTL, s.cfg.Lease) / 3
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
	// InUse is the weight held, Holders the number of permits, Waiting the
	// number of queued callers of all processes. Expired holders and dead waiters
	// are counted until a script reaps them.
	InUse, Holders, Waiting int64
	// Readopted and Lost count this Semaphore's permits re-adopted after they
	// vanished from Redis and permits lost; Degraded counts permits granted
	// without Redis by the failure policy (FailOpen or FailLocal).
	Readopted, Lost, Degraded int64
}

// Stats reads the semaphore's state from Redis in one round trip (MULTI). It
// returns ErrClosed after Close.
func (s *Semaphore) Stats(ctx context.Context) (Stats, error) {
	s.mustBeMade()
	if s.isClosed() {
		return Stats{}, ErrClosed
	}
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
	st.Waiting = qc.Val()
	return st, nil
}

func atoi(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
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
