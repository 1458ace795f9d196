package shaperredis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/redis/go-redis/v9"
)

// Exhaustion says what a [Lease] does with a call that finds no local token,
// while a refill is on its way or Redis has none to give.
type Exhaustion uint8

const (
	// ExhaustReject refuses the call at once: Allow returns false, Wait a
	// *RejectError whose RetryAfter is the meter's wait for a token, if known.
	ExhaustReject Exhaustion = iota

	// ExhaustWait makes Wait wait up to LeaseConfig.MaxWait (and the context) for
	// the refill, then refuse as ExhaustReject does. Allow never waits.
	ExhaustWait

	// ExhaustLocal admits the call from a bounded local allowance, an
	// in-process GCRA meter enforcing LeaseConfig.LocalShare, and refuses when
	// that is spent too. The allowance is not counted in Redis: it is
	// over-admission, bounded by LocalShare per process.
	ExhaustLocal
)

// LeaseConfig configures a [Lease]. The zero value is a valid LeaseConfig for a
// meter with a burst of at least 4: batches of min(burst, 64) tokens, a refill
// when a quarter of a batch is left, tokens dropped 1s after they were leased,
// ExhaustReject.
type LeaseConfig struct {
	// Batch is the most tokens a Lease holds: each refill takes up to Batch
	// minus what is left, in one call. It bounds this process's over-admission
	// (see Lease). It must not exceed the meter's burst. If zero,
	// min(burst, 64).
	Batch int64

	// LowWater starts an asynchronous refill when the local balance falls below
	// it, so that a steady stream of calls rarely finds the Lease empty. It must
	// be less than Batch. If zero, Batch/4 (at least 1).
	LowWater int64

	// Expiry is how long leased tokens may be used: a batch not spent within
	// Expiry of its refill is dropped (and counted in LeaseStats.Expired), so a
	// process that goes quiet does not sit on quota indefinitely. If zero, 1s.
	// If negative, tokens never expire.
	Expiry time.Duration

	// Exhaustion says what a call does when no local token is left.
	Exhaustion Exhaustion

	// MaxWait bounds Wait under ExhaustWait. If zero, 50ms.
	MaxWait time.Duration

	// LocalShare is the allowance used under ExhaustLocal. It must be set (a
	// valid GCRA limit) when Exhaustion is ExhaustLocal.
	LocalShare shaper.Limit
}

// LeaseStats are a Lease's counters since it was made.
type LeaseStats struct {
	Leased   int64 // tokens taken from Redis
	Served   int64 // calls admitted from leased tokens (by cost)
	Local    int64 // cost admitted from the local allowance (ExhaustLocal)
	Rejected int64 // calls refused
	Expired  int64 // leased tokens dropped unused by Expiry
	Returned int64 // leased tokens given back to Redis by Close
	Refills  int64 // lease calls made
	Errors   int64 // lease calls that failed
}

// A Lease serves one key of a GCRA [Meter] from tokens it leases in batches
// (token leasing): a call takes a token from a local balance in tens of
// nanoseconds, without I/O, and when the balance falls below LowWater one
// background call takes up to Batch more from Redis in one round trip. The
// tokens come out of the same Redis key that Meter.AllowN decides on, so
// per-call decisions and leases can share a quota.
//
// # Over-admission and unused quota
//
// Every token is counted in Redis when it is leased, not when it is used. A
// process therefore never uses more than it leased, but it may use tokens later
// than they were granted: over any time window, a fleet of P processes admits at
// most what the meter admits (burst + rate × window) plus the tokens the
// processes held at the start of the window, at most Batch × P (plus, under
// ExhaustLocal, each process's local allowance). Conversely, tokens held by one
// process are unavailable to the others until they are used, returned by Close,
// or dropped by Expiry (dropped tokens are simply lost quota): a large Batch
// saves round trips and costs fairness and unused quota. A Batch of about the
// calls a process makes in a few round trips' time keeps Redis off the hot path
// with little of either.
//
// Waiting (ExhaustWait) is not FIFO: a refill wakes every waiter, and callers
// already running may take the tokens first. When the key is saturated, a waiter
// can lose every race and be refused after MaxWait; the benchmark sees a few in
// millions at 128 goroutines.
//
// The meter's Config.Observer is told of each call of n > 0, Component
// floodgate.ComponentLease: KindAdmit (Source store for leased tokens,
// fail_local for ExhaustLocal's allowance; Duration, the wait for a refill),
// KindReject (Reason limited or too_large; Err, the error Wait returned,
// nil from AllowN) and KindCancel.
//
// The zero Lease rejects every call; use [Meter.Lease]. A Lease is safe
// for concurrent use by multiple goroutines. It starts a goroutine only for a
// refill in flight, and Close waits for it.
type Lease struct {
	m      *Meter
	key    string
	batch  int64
	low    int64
	expiry int64 // ns; ≤ 0: never
	exh    Exhaustion
	wait   time.Duration
	local  *shaper.Meter
	base   time.Time
	obs    floodgate.Observer // the meter's Config.Observer

	bal       atomic.Int64 // tokens held
	expiresAt atomic.Int64 // ns since base
	retryAt   atomic.Int64 // ns since base: no refill before (Redis had none)
	refilling atomic.Bool
	primed    atomic.Bool // a first refill has completed (with tokens or not)
	isClosed  atomic.Bool

	leased, served, localN, rejected, expired, returned, refills, errs atomic.Int64

	mu sync.Mutex
	// mu guards:
	refilled chan struct{} // closed and replaced after each refill
	closed   bool
	wg       sync.WaitGroup
}

// Lease returns a Lease serving key from tokens leased from m, which must be a
// GCRA meter (NewMeter). It does no I/O: the first call starts the first
// refill, and under ExhaustReject and ExhaustWait, Wait and Admit wait for
// that first refill (up to the context's deadline) rather than refuse calls
// only because the Lease is new. It panics if m is not a GCRA meter, if key is
// longer than Config.MaxKeyLen, or if cfg is invalid (Batch above the burst or
// negative, LowWater ≥ Batch, ExhaustLocal without a LocalShare).
func (m *Meter) Lease(key string, cfg LeaseConfig) *Lease {
	if m.kind != kindGCRA {
		panic("shaperredis: Lease: the meter is not a GCRA meter")
	}
	if !keyOK(key, m.maxKey) {
		panic("shaperredis: Lease: key longer than MaxKeyLen")
	}
	burst := burstOf(m.Limit())
	if cfg.Batch == 0 {
		cfg.Batch = min(burst, 64)
	}
	if cfg.Batch < 0 || cfg.Batch > burst {
		panic("shaperredis: Lease: Batch not in [1, burst]")
	}
	if cfg.LowWater == 0 {
		cfg.LowWater = max(1, cfg.Batch/4)
	}
	if cfg.LowWater < 0 || cfg.LowWater >= cfg.Batch && cfg.Batch > 1 {
		panic("shaperredis: Lease: LowWater not in [0, Batch)")
	}
	if cfg.Expiry == 0 {
		cfg.Expiry = time.Second
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	l := &Lease{
		m: m, key: key, batch: cfg.Batch, low: cfg.LowWater, expiry: int64(cfg.Expiry),
		exh: cfg.Exhaustion, wait: cfg.MaxWait, base: time.Now(), obs: m.obs,
		refilled: make(chan struct{}),
	}
	switch cfg.Exhaustion {
	case ExhaustReject, ExhaustWait:
	case ExhaustLocal:
		l.local = shaper.NewMeter(cfg.LocalShare) // panics on an invalid limit
	default:
		panic("shaperredis: Lease: invalid Exhaustion")
	}
	return l
}

func (l *Lease) now() int64 { return int64(time.Since(l.base)) }

// Allow is AllowN(1).
func (l *Lease) Allow() bool { return l.AllowN(1) }

// AllowN takes n local tokens if there are, and otherwise answers by the
// Exhaustion policy without waiting (ExhaustWait refuses, like ExhaustReject).
// It never does I/O; it may start a background refill. A negative n panics.
func (l *Lease) AllowN(n int64) bool {
	ok, _, local := l.take(n)
	if !ok {
		l.rejected.Add(1)
	}
	if l.obs != nil && n > 0 {
		e := floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentLease, N: n, Source: source(local)}
		if !ok {
			e.Kind, e.Reason, e.Source = floodgate.KindReject, floodgate.ReasonLimited, ""
		}
		l.obs.Observe(e)
	}
	return ok
}

// source returns the Source of a Lease's admission: the store's leased
// tokens, or ExhaustLocal's allowance.
func source(local bool) floodgate.Source {
	if local {
		return floodgate.SourceFailLocal
	}
	return floodgate.SourceStore
}

// take takes n tokens, from the balance or (local) the local allowance; if it
// cannot, it returns the wait for a token, if known.
func (l *Lease) take(n int64) (ok bool, retry time.Duration, local bool) {
	if n < 0 {
		panic("shaperredis: negative cost")
	}
	if l.m == nil {
		return false, 0, false
	}
	now := l.now()
	if l.expiry > 0 && now > l.expiresAt.Load() && l.bal.Load() > 0 {
		if b := l.bal.Swap(0); b > 0 {
			l.expired.Add(b)
		}
	}
	for {
		b := l.bal.Load()
		if b < n {
			break
		}
		if l.bal.CompareAndSwap(b, b-n) {
			l.served.Add(n)
			if b-n < l.low {
				l.refill(now)
			}
			return true, 0, false
		}
	}
	l.refill(now)
	if l.isClosed.Load() {
		return false, 0, false
	}
	if l.local != nil {
		d, _ := l.local.AllowN(l.key, n)
		if d.Allowed {
			l.localN.Add(n)
			return true, 0, true
		}
		return false, d.RetryAfter, false
	}
	return false, time.Duration(max(0, l.retryAt.Load()-now)), false
}

// Wait takes n tokens, waiting for a refill under ExhaustWait (up to MaxWait and
// ctx's deadline). A fresh Lease, whose first refill has not landed yet, waits
// for it under ExhaustReject too (up to ctx's deadline), so that its first calls
// are not refused only because nothing was fetched yet. It returns ctx.Err() if
// ctx is done first or on entry, a *RejectError (ErrLimited) with the meter's
// retry-after when the call is refused, and a *RejectError (ErrTooLarge) if n
// exceeds Batch (a Lease never holds more).
func (l *Lease) Wait(ctx context.Context, n int64) error {
	_, err := l.waitN(ctx, n)
	return err
}

// Admit takes n tokens as Wait does and reports the outcome as a Decision, so
// that a Lease stands wherever a meter's Admit is expected (see
// [shaper.Meter.Admit]); the key is ignored (a Lease serves one key). It returns
// (d, nil) with d.Allowed when admitted (d.Degraded if the local allowance of
// ExhaustLocal admitted it), (d, d.Err()) when refused (ErrLimited with
// RetryAfter), and (d, err) with ErrTooLarge or ctx.Err() as Wait does.
func (l *Lease) Admit(ctx context.Context, _ string, n int64) (shaper.Decision, error) {
	var lim shaper.Limit
	if l.m != nil {
		lim = l.m.Limit()
	}
	local, err := l.waitN(ctx, n)
	if err == nil {
		return shaper.Decision{Allowed: true, Remaining: max(0, l.bal.Load()), Limit: lim, Degraded: local}, nil
	}
	if re, ok := errors.AsType[*RejectError](err); ok && errors.Is(err, ErrLimited) {
		return shaper.Decision{RetryAfter: max(re.RetryAfter(), time.Microsecond), Limit: lim}, err
	}
	return shaper.Decision{Limit: lim}, err
}

// waitN is Wait, reporting whether the local allowance admitted the call.
func (l *Lease) waitN(ctx context.Context, n int64) (local bool, err error) {
	local, waited, err := l.await(ctx, n)
	if l.obs != nil && n > 0 {
		e := floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentLease, N: n, Duration: waited, Source: source(local)}
		switch {
		case err == nil:
		case err == ctx.Err():
			e.Kind, e.Source = floodgate.KindCancel, ""
		default:
			e.Kind, e.Reason, e.Err, e.Source = floodgate.KindReject, reject.ReasonOf(err), err, ""
		}
		l.obs.Observe(e)
	}
	return local, err
}

// await is waitN without its observer; it also returns how long the call
// waited for a refill (0 if it did not wait: the clock is not read then).
func (l *Lease) await(ctx context.Context, n int64) (local bool, waited time.Duration, err error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	if n > l.batch {
		return false, 0, tooLarge()
	}
	// primed is read before take, as in refillWait: a first refill that
	// lands after take looked must not be mistaken for one take already saw.
	primed := l.primed.Load()
	ok, ra, local := l.take(n)
	if ok {
		return local, 0, nil
	}
	// A fresh Lease under ExhaustReject waits for its first refill only.
	first := l.exh == ExhaustReject && !primed
	if l.exh != ExhaustWait && !first {
		l.rejected.Add(1)
		return false, 0, limited(ra)
	}
	start := l.now()
	local, err = l.refillWait(ctx, n, first, ra)
	return local, time.Duration(l.now() - start), err
}

// refillWait waits for a refill that lets take take n, up to MaxWait (or,
// for the first refill, until it lands), and refuses with the last retry
// known, ra, when none does.
func (l *Lease) refillWait(ctx context.Context, n int64, first bool, ra time.Duration) (local bool, err error) {
	var timeout <-chan time.Time
	if !first {
		timer := time.NewTimer(l.wait)
		defer timer.Stop()
		timeout = timer.C
	}
	var retry *time.Timer // wakes the wait when Redis said to try again later
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		l.mu.Lock()
		ch := l.refilled
		closed := l.closed
		l.mu.Unlock()
		if closed {
			l.rejected.Add(1)
			return false, limited(ra)
		}
		// Check again after reading ch, so a refill between take and here is seen.
		// primed is read before take: a refill adds its tokens before it sets
		// primed, so if the first refill had landed, take saw its tokens. (Read
		// after take, a refill landing in between was refused with its tokens
		// in hand.)
		primed := l.primed.Load()
		ok, r, local := l.take(n)
		if ok {
			return local, nil
		}
		ra = r
		if first && primed {
			l.rejected.Add(1)
			return false, limited(ra)
		}
		// No refill was started if Redis had no token (or failed) and said when
		// to try again: wake up then to start one.
		var retryC <-chan time.Time
		if d := time.Duration(l.retryAt.Load() - l.now()); d > 0 && !l.refilling.Load() && !first {
			if retry == nil {
				retry = time.NewTimer(d)
			} else {
				retry.Reset(d)
			}
			retryC = retry.C
		}
		select {
		case <-ch:
		case <-retryC:
		case <-timeout:
			l.rejected.Add(1)
			return false, limited(ra)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// refill starts a background refill unless one is in flight, the Lease is
// closed, or Redis said it had no token before retryAt.
func (l *Lease) refill(now int64) {
	if now < l.retryAt.Load() || l.refilling.Load() || !l.refilling.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.refilling.Store(false)
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		l.doRefill()
	}()
}

// leaseCall runs lease.lua for want tokens (taking at least least) after giving
// back giveback, through the meter's breaker, always failing closed: a lease
// that cannot reach Redis gets no tokens.
func (l *Lease) leaseCall(ctx context.Context, want, least, giveback int64) ([4]int64, error) {
	m := l.m
	rl := m.lim.Load()
	want = min(want, rl.max)
	args := []any{rl.arg, want, giveback, least}
	r, _, err := storecall.Do(ctx, &m.st, breaker.FailClosed, func(ctx context.Context, client redis.UniversalClient) ([4]int64, error) {
		var out [4]int64
		var err error
		if want == 0 {
			// A give-back only (Close): a refund, which runs however late
			// (deadline 0).
			err = evalKey(ctx, client, leaseScript, m.Key(l.key), out[:], append(args, 0)...)
		} else {
			// Tokens taken for a call that timed out would be lost quota.
			err = evalBefore(ctx, m.st.Clock, client, leaseScript, m.Key(l.key), out[:], args...)
		}
		if err != nil {
			return out, err
		}
		if out[0] < 0 || out[0] > want || out[2] < 0 {
			return out, errors.New("shaperredis: unexpected lease reply")
		}
		return out, nil
	}, nil)
	return r, err
}

func (l *Lease) doRefill() {
	defer func() {
		l.primed.Store(true)
		l.refilling.Store(false)
		l.mu.Lock()
		close(l.refilled)
		l.refilled = make(chan struct{})
		l.mu.Unlock()
	}()
	want := l.batch - l.bal.Load()
	if want <= 0 {
		return
	}
	l.refills.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := l.leaseCall(ctx, want, 1, 0)
	now := l.now()
	if err != nil {
		l.errs.Add(1)
		delay := 100 * time.Millisecond
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 0 {
			delay = ra.RetryAfter()
		}
		l.retryAt.Store(now + int64(delay))
		return
	}
	if r[0] == 0 {
		l.retryAt.Store(now + r[2]*int64(time.Microsecond))
		return
	}
	l.leased.Add(r[0])
	l.expiresAt.Store(now + l.expiry)
	l.bal.Add(r[0])
}

// Close stops refilling, waits for a refill in flight, and gives the unused
// tokens back to Redis (one call, bounded by one second and the breaker),
// so that other processes can use them. It returns the error of that call, if
// any; the tokens are then lost until the meter's key refills. After Close,
// every call is refused. Closing twice is a no-op.
func (l *Lease) Close() error {
	if l.m == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.isClosed.Store(true)
	close(l.refilled)
	l.refilled = make(chan struct{})
	l.mu.Unlock()
	l.wg.Wait()
	l.retryAt.Store(1 << 62) // no refill ever again
	b := l.bal.Swap(0)
	if b <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := l.leaseCall(ctx, 0, 0, b); err != nil {
		return err
	}
	l.returned.Add(b)
	return nil
}

// Stats returns the Lease's counters.
func (l *Lease) Stats() LeaseStats {
	return LeaseStats{
		Leased: l.leased.Load(), Served: l.served.Load(), Local: l.localN.Load(),
		Rejected: l.rejected.Load(), Expired: l.expired.Load(), Returned: l.returned.Load(),
		Refills: l.refills.Load(), Errors: l.errs.Load(),
	}
}
