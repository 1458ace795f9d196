package shaper

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/redis/go-redis/v9"
)

// RedisConfig configures a Redis-backed meter ([RedisMeter]), a [RedisQueue] and
// the leases taken from a meter. The zero value is a valid RedisConfig: keys under
// "shaper:<algorithm>:", a breaker of its own (so breaker.DefaultCallTimeout
// per call), and breaker.FailClosed.
type RedisConfig struct {
	// Prefix starts every Redis key. The key of a user key k is Prefix + "{" + k +
	// "}": k is the hash tag, so every script touches one slot and works on Redis
	// Cluster, and different keys spread over the slots. If empty,
	// "shaper:gcra:", "shaper:tb:", "shaper:fw:", "shaper:sl:", "shaper:sc:" or
	// "shaper:q:" by algorithm, so meters of different algorithms never share a
	// key. Processes that share a limit must use the same Prefix and algorithm.
	Prefix string

	// Breaker guards every Redis call: store failures (timeouts, refused
	// connections, LOADING, ...) are counted, while it is open no call waits on
	// the network, and its CallTimeout (breaker.Config.CallTimeout) is the one
	// per-call timeout of each call. A call that outlives it while the caller's
	// context is not done is a store failure (under FailClosed, an error
	// matching breaker.ErrTimeout, not context.DeadlineExceeded). Share one
	// Breaker per Redis endpoint. If nil, the meter or queue makes its own with
	// breaker.Config{Policy: Policy}, hence breaker.DefaultCallTimeout; to
	// choose another timeout, pass breaker.New(name, breaker.Config{CallTimeout: d}).
	Breaker *breaker.Breaker

	// Policy says what a decision is when Redis cannot answer (the breaker is
	// open, or the call failed with a store failure):
	//   - breaker.FailClosed (the zero value, as for every limiter in floodgate)
	//     returns the breaker's error (matching breaker.ErrUnavailable; an
	//     *breaker.OpenError carries RetryAfter);
	//   - breaker.FailOpen admits: the Decision is Allowed with Remaining 0, and
	//     the breaker's Stats count it as Degraded. Most rate limits should fail
	//     open: a dead Redis then costs protection, not availability;
	//   - breaker.FailLocal decides with an in-process meter of the same
	//     algorithm enforcing LocalLimit (state kept per process).
	// Each meter has its own Policy, even when they share a Breaker.
	Policy breaker.Policy

	// LocalLimit is the limit of the in-process meter used under
	// breaker.FailLocal, usually the shared limit divided by the number of
	// processes: while Redis is down the fleet admits up to LocalLimit × the
	// number of processes. If zero, the meter's own limit (each process then
	// admits the whole limit: N× over-admission while Redis is down).
	LocalLimit Limit

	// Batch, if true, sends the decisions that goroutines of this process ask
	// for at the same time in one round trip (up to MaxBatch), so that at high
	// concurrency a decision costs a fraction of a round trip and of a Redis
	// syscall. On a *redis.Client (one Redis, or a Sentinel failover client)
	// the batch is one call of a script that decides every key in turn, at one
	// Redis TIME; on a Cluster or Ring client, whose keys may be on different
	// nodes, it is a pipeline of single-key calls. A lone decision is sent at
	// once, as without Batch. The decisions are the same; only their latency
	// under load changes, and a batch holds Redis for up to MaxBatch decisions.
	Batch bool

	// MaxBatch bounds the decisions sent in one round trip when Batch is set.
	// If zero, 128.
	MaxBatch int
}

// algoKind names the algorithm of a RedisMeter.
type algoKind uint8

const (
	kindGCRA algoKind = iota
	kindTokenBucket
	kindFixedWindow
	kindSlidingLog
	kindSlidingCounter
)

var kinds = [...]struct {
	name, prefix  string
	window        bool
	script, batch *redisscript.Script // single-key script and its batch form
}{
	kindGCRA:           {"NewRedisMeter", "shaper:gcra:", false, gcraScript, gcraBatchScript},
	kindTokenBucket:    {"NewRedisTokenBucket", "shaper:tb:", false, tokenBucketScript, tokenBucketBatchScript},
	kindFixedWindow:    {"NewRedisFixedWindow", "shaper:fw:", true, fixedWindowScript, fixedWindowBatchScript},
	kindSlidingLog:     {"NewRedisSlidingLog", "shaper:sl:", true, slidingLogScript, slidingLogBatchScript},
	kindSlidingCounter: {"NewRedisSlidingCounter", "shaper:sc:", true, slidingCounterScript, slidingCounterBatchScript},
}

// A localMeter is an in-process meter: the fallback under breaker.FailLocal.
type localMeter interface {
	AllowN(key string, n int64) (Decision, error)
}

func newLocal(kind algoKind, lim Limit) localMeter {
	switch kind {
	case kindTokenBucket:
		return NewTokenBucket(lim)
	case kindFixedWindow:
		return NewFixedWindow(lim)
	case kindSlidingLog:
		return NewSlidingLog(lim)
	case kindSlidingCounter:
		return NewSlidingCounter(lim)
	}
	return NewMeter(lim)
}

// RedisMeter is a keyed meter whose state lives in Redis, so that every process
// using the same Redis, Prefix, algorithm and limit shares one quota per key.
// Each decision is one Lua script run atomically in Redis (one round trip,
// EVALSHA, then EVAL if Redis lost its script cache), with time from Redis TIME,
// so no client clock matters and there is no check-then-act race between
// processes. The scripts run, line by line in integer microseconds, the same
// arithmetic as the in-process meters ([Meter], [TokenBucket], [FixedWindow],
// [SlidingLog], [SlidingCounter]), and give the same decisions for the same
// times and costs. Every key has a TTL: a key disappears once it is idle (for
// the token bucket, after max(60 s, twice the time to fill it), as in the seed).
//
// Invalid calls (a negative cost panics; a cost above the burst returns a
// *RejectError) are refused before any round trip.
//
// The zero RedisMeter refuses every call with ErrTooLarge; use
// [NewRedisMeter] or one of its siblings. A RedisMeter is safe for concurrent
// use by multiple goroutines. Its constructors do no I/O and start no goroutine.
type RedisMeter struct {
	st     storecall.Store // the client and its breaker
	kind   algoKind
	script *redisscript.Script
	prefix string
	policy breaker.Policy
	local  localMeter // FailLocal only
	batch  *batcher   // Batch only
	lim    atomic.Pointer[redisLimit]

	// now, if set (by tests in this package only), supplies the time passed to
	// the scripts instead of Redis TIME.
	now func() int64
}

// redisLimit is a limit with its script arguments, boxed once.
type redisLimit struct {
	lim  Limit
	max  int64
	p, c int64
	args [3]any // P, C, B as strings
}

func newRedisLimit(what string, lim Limit, window bool) *redisLimit {
	p, c, b := lim.validate(what, window)
	lim.Burst = b // explicit, as the in-process meters report it
	return &redisLimit{
		lim: lim, max: b, p: p, c: c,
		args: [3]any{strconv.FormatInt(p, 10), strconv.FormatInt(c, 10), strconv.FormatInt(b, 10)},
	}
}

// NewRedisMeter returns a GCRA meter (see [Meter]) enforcing lim for every key,
// its state in Redis on client (a *redis.Client, *redis.ClusterClient, Sentinel
// failover client or *redis.Ring). It panics on an invalid limit, as [NewMeter]
// does, on a nil client, or on a client without ContextTimeoutEnabled (go-redis
// would then ignore the per-call timeout, and a frozen Redis would hold every
// caller for its socket timeouts).
func NewRedisMeter(client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	return newRedisMeter(kindGCRA, client, lim, cfg)
}

// NewRedisTokenBucket returns a token bucket (see [TokenBucket]) in Redis; its
// script follows the seed document's (see lua/tokenbucket.lua for the two
// differences). It panics as [NewRedisMeter] does.
func NewRedisTokenBucket(client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	return newRedisMeter(kindTokenBucket, client, lim, cfg)
}

// NewRedisFixedWindow returns a fixed-window counter (see [FixedWindow]) in
// Redis. It panics as [NewRedisMeter] does, and if lim.Burst is not 0 or
// lim.Rate.Count.
func NewRedisFixedWindow(client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	return newRedisMeter(kindFixedWindow, client, lim, cfg)
}

// NewRedisSlidingLog returns a sliding-window log (see [SlidingLog]) in Redis: a
// list of at most Rate.Count entries per key, read whole by each decision. It
// panics as [NewRedisFixedWindow] does.
func NewRedisSlidingLog(client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	return newRedisMeter(kindSlidingLog, client, lim, cfg)
}

// NewRedisSlidingCounter returns a sliding-window counter (see [SlidingCounter])
// in Redis. It panics as [NewRedisFixedWindow] does.
func NewRedisSlidingCounter(client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	return newRedisMeter(kindSlidingCounter, client, lim, cfg)
}

func newRedisMeter(kind algoKind, client redis.UniversalClient, lim Limit, cfg RedisConfig) *RedisMeter {
	k := kinds[kind]
	storecall.Check("shaper", client)
	m := &RedisMeter{
		kind:   kind,
		script: k.script,
		prefix: cfg.Prefix,
		policy: cfg.Policy,
	}
	m.lim.Store(newRedisLimit(k.name, lim, k.window))
	if m.prefix == "" {
		m.prefix = k.prefix
	}
	m.st = storecall.New("shaper", client, cfg.Breaker, "shaper:"+m.prefix, cfg.Policy)
	if cfg.Policy == breaker.FailLocal {
		ll := cfg.LocalLimit
		if ll == (Limit{}) {
			ll = lim
		}
		m.local = newLocal(kind, ll)
	} else if cfg.Policy > breaker.FailLocal {
		panic("shaper: " + k.name + ": invalid Policy")
	}
	if cfg.Batch {
		m.batch = newBatcher(client, cfg.MaxBatch, k.script, k.batch)
	}
	return m
}

func (cfg RedisConfig) store(client redis.UniversalClient, prefix string) storecall.Store {
	return storecall.New("shaper", client, cfg.Breaker, "shaper:"+prefix, cfg.Policy)
}

// Key returns the Redis key holding the state of key.
func (m *RedisMeter) Key(key string) string { return m.prefix + "{" + key + "}" }

// Limit returns the current limit, with Burst made explicit.
func (m *RedisMeter) Limit() Limit {
	if rl := m.lim.Load(); rl != nil {
		return rl.lim
	}
	return Limit{}
}

// SetLimit changes the limit this process enforces, from its next decision on.
// The state in Redis is kept and read under the new limit exactly as the
// in-process meter's SetLimit does. Processes sharing a key should change their
// limits together: each decision is made under the caller's own limit. It panics
// on an invalid limit.
func (m *RedisMeter) SetLimit(lim Limit) {
	k := kinds[m.kind]
	m.lim.Store(newRedisLimit(k.name, lim, k.window))
}

// Allow is AllowN(ctx, key, 1).
func (m *RedisMeter) Allow(ctx context.Context, key string) (Decision, error) {
	return m.AllowN(ctx, key, 1)
}

// AllowN decides in Redis whether an event of cost n for key may happen now, and
// records it if so. A denial is a Decision with Allowed false and an error of nil
// (use [Decision.Err] to turn it into a *RejectError). A cost of zero reports the
// state without recording anything.
//
// It returns, without any round trip: ctx.Err() if ctx is already done; a
// *RejectError (ErrTooLarge) if n exceeds the burst (or window count); and it
// panics if n is negative. When Redis cannot answer, the result depends on
// RedisConfig.Policy (see there). Other Redis errors are returned wrapped, with
// a zero Decision; a caller's cancellation returns ctx.Err().
func (m *RedisMeter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if n < 0 {
		panic("shaper: negative cost")
	}
	rl := m.lim.Load()
	if rl == nil {
		return Decision{}, tooLarge()
	}
	if n > rl.max {
		return Decision{Limit: rl.lim}, tooLarge()
	}
	c := call{m: m, rl: rl, key: key, n: n}
	var fallback func(context.Context) (result, error)
	if m.local != nil {
		fallback = c.fallback
	}
	r, src, err := storecall.Do(ctx, &m.st, m.policy, c.run, fallback)
	switch src {
	case breaker.Degraded:
		return Decision{Allowed: true, Limit: rl.lim}, nil
	case breaker.FromFallback:
		return r.d, err
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Decision{}, cerr
		}
		return Decision{}, err
	}
	return r.d, nil
}

// call is one decision: its run method is the guarded Redis call.
type call struct {
	m   *RedisMeter
	rl  *redisLimit
	key string
	n   int64
}

// result wraps a Decision so that breaker.Do's zero value is distinguishable.
type result struct{ d Decision }

// evalBuf holds the command of one script call: "evalsha", the script's SHA-1
// (both written by redisscript.Script.Cmd), 1 (numkeys), the key, P, C, B, n
// [, now]. The constants are boxed once per script and limit
// (redisLimit.args); the key, n and now are passed by pointer (go-redis writes
// *string and *int64 arguments, and Cluster reads the key through them), so
// filling the command allocates nothing (the prefixed key itself is one
// string, built by the caller). A buffer is reused (from evalPool)
// once its call has returned: go-redis is done with the arguments when Process
// returns.
type evalBuf struct {
	args   [9]any
	key    string
	n, now int64
}

var evalPool = sync.Pool{New: func() any { return new(evalBuf) }}

var oneKey any = 1

// fill sets buf's arguments for a call of n for key under rl, and returns them
// (the command of a meter script; see redisscript.Script.EvalInts).
func (buf *evalBuf) fill(key string, rl *redisLimit, n int64, now func() int64) []any {
	buf.key, buf.n = key, n
	a := &buf.args
	a[2], a[3] = oneKey, &buf.key
	a[4], a[5], a[6], a[7] = rl.args[0], rl.args[1], rl.args[2], &buf.n
	if now != nil {
		buf.now = now()
		a[8] = &buf.now
		return a[:9]
	}
	return a[:8]
}

func (c call) run(ctx context.Context, client redis.UniversalClient) (result, error) {
	m := c.m
	buf := evalPool.Get().(*evalBuf)
	args := buf.fill(m.Key(c.key), c.rl, c.n, m.now)
	var v []int64
	var err error
	abandoned := false
	if m.batch != nil {
		v, err, abandoned = m.batch.run(ctx, args)
	} else {
		v, err = m.script.EvalInts(ctx, client, args)
	}
	if !abandoned { // else its batch may still read it: left to the GC
		*buf = evalBuf{}
		evalPool.Put(buf)
	}
	if err != nil {
		return result{}, err
	}
	r, err := parseReply(v)
	if err != nil {
		return result{}, err
	}
	return result{Decision{
		Allowed:    r[0] == 1,
		Remaining:  r[1],
		RetryAfter: micros(r[2]),
		ResetAfter: micros(r[3]),
		Limit:      c.rl.lim,
	}}, nil
}

func (c call) fallback(context.Context) (result, error) {
	d, err := c.m.local.AllowN(c.key, c.n)
	return result{d}, err
}

// parseReply checks a meter script's reply: {allowed 0|1, remaining, retry ≥ 0,
// reset ≥ 0}. (go-redis has already checked that every element is an integer;
// it reads a nil element as 0, which the scripts never return.)
func parseReply(v []int64) ([4]int64, error) {
	var out [4]int64
	if len(v) != len(out) {
		return out, fmt.Errorf("shaper: unexpected reply of %d elements", len(v))
	}
	copy(out[:], v)
	if out[0] != 0 && out[0] != 1 || out[2] < 0 || out[3] < 0 {
		return out, fmt.Errorf("shaper: unexpected reply %v", out)
	}
	return out, nil
}

// evalKey runs sc (EVALSHA, then EVAL on NOSCRIPT) with the one key key and
// argv, and stores its reply, an array of len(dst) integers, in dst.
func evalKey(ctx context.Context, c redis.UniversalClient, sc *redisscript.Script, key string, dst []int64, argv ...any) error {
	args := make([]any, 4, 4+len(argv)) // args[0:2] are written by EvalInts
	args[2], args[3] = oneKey, key
	v, err := sc.EvalInts(ctx, c, append(args, argv...))
	if err != nil {
		return err
	}
	if len(v) != len(dst) {
		return fmt.Errorf("shaper: unexpected reply of %d elements", len(v))
	}
	copy(dst, v)
	return nil
}
