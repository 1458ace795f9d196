package shaperredis

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/rateconv"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/stamp"
	"github.com/floodgate-go/floodgate/internal/storecall"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/redis/go-redis/v9"
)

// DefaultMaxKeyLen is the longest key (or Queue name) accepted when
// Config.MaxKeyLen is zero, in bytes.
const DefaultMaxKeyLen = 1024

// Config configures a Redis-backed meter ([Meter]), a [Queue] and the leases
// taken from a meter. The zero value is a valid Config: keys under
// "shaper:<algorithm>:", a breaker of its own (so breaker.DefaultCallTimeout
// per call), breaker.FailClosed, and keys of at most DefaultMaxKeyLen bytes.
type Config struct {
	// Prefix starts every Redis key. The key of a user key k is Prefix + "{" + k +
	// "}": k is the hash tag, so every script touches one slot and works on Redis
	// Cluster, and different keys spread over the slots. (Each script touches one
	// Redis key, so a k with braces needs no escape; see Meter.Key.) If empty,
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
	// breaker.Config{}, hence breaker.DefaultCallTimeout; to
	// choose another timeout, pass breaker.New(name, breaker.Config{CallTimeout: d}).
	Breaker *breaker.Breaker

	// Policy says what a decision is when Redis cannot answer (the breaker is
	// open, or the call failed with a store failure):
	//   - breaker.FailClosed (the zero value, as for every limiter in floodgate)
	//     returns the breaker's error (matching breaker.ErrUnavailable; an
	//     *breaker.OpenError carries RetryAfter);
	//   - breaker.FailOpen admits: the Decision is Allowed with Remaining 0, and
	//     the breaker's Stats count it in FailOpen. Most rate limits should fail
	//     open: a dead Redis then costs protection, not availability;
	//   - breaker.FailLocal decides with an in-process meter of the same
	//     algorithm enforcing LocalShare (state kept per process).
	// Each meter has its own Policy, even when they share a Breaker.
	Policy breaker.Policy

	// LocalShare is the limit of the in-process meter used under
	// breaker.FailLocal, usually the shared limit divided by the number of
	// processes: while Redis is down the fleet admits up to LocalShare × the
	// number of processes. If zero, the meter's own limit (each process then
	// admits the whole limit: N× over-admission while Redis is down).
	//
	// The edges of an outage are kept too: while Redis answers, a key's
	// share holds at most its part of what Redis says remains, so an outage
	// starts from what the fleet has left; after one, for a period of the
	// share (its window, or its burst at its rate) a decision of a key the
	// share decided needs the share's room as well as Redis's, and a GCRA,
	// token bucket or fixed window carries what its share admitted into
	// Redis (Stats().Carried). A process busier than its share is held to it for
	// that period on those keys. (This is the Meter's; a
	// Queue's FailLocal pacing does not keep the edges.)
	LocalShare shaper.Limit

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

	// MaxKeyLen bounds the length in bytes of a key passed to a meter (and of
	// a Queue's name, and a Lease's key). A longer key is refused before any
	// round trip with ErrInvalidKey: it is bad input, not a store failure, so
	// the breaker does not count it (a huge key would hold Redis, which runs
	// one script at a time, for everyone). If zero, DefaultMaxKeyLen. If
	// negative, keys are not bounded.
	MaxKeyLen int

	// Observer, if non-nil, is told of what the meter, queue or lease does
	// (nil: nothing is observed, at the cost of one comparison a call):
	//   - a Meter's decisions of n > 0, Component floodgate.ComponentMeter:
	//     KindAdmit and KindReject (Reason limited for a denial, or the word
	//     of the error the call returned, in Err) with Source, where the
	//     answer came from (store, fail_open, fail_local; a FailClosed
	//     refusal is Reason unavailable, Source fail_closed); KindCancel
	//     when the caller's context ended first;
	//   - a Queue's calls, Component floodgate.ComponentQueue (see Queue);
	//   - a Lease's calls, Component floodgate.ComponentLease (see Lease).
	// The store calls themselves are the breaker's to observe.
	Observer floodgate.Observer
}

// maxKeyLen returns the bound on key length (< 0: none).
func (cfg Config) maxKeyLen() int {
	if cfg.MaxKeyLen == 0 {
		return DefaultMaxKeyLen
	}
	return cfg.MaxKeyLen
}

// keyOK reports whether key is within max (< 0: no bound).
func keyOK(key string, max int) bool { return max < 0 || len(key) <= max }

// algoKind names the algorithm of a Meter.
type algoKind uint8

const (
	kindGCRA algoKind = iota
	kindTokenBucket
	kindFixedWindow
	kindSlidingLog
	kindSlidingCounter
)

// kinds: each algorithm's constructor name, default Prefix, whether it is a
// window, and the suffix of its Redis keys (see Meter.Key). The token bucket
// and the windows once stored their state as decimal text under keys with
// no suffix; they store it packed under keys ending in ":p", so that a
// process of an older version, sharing the Redis during a rolling deploy,
// never reads a packed state as text (it would take it for a fresh one and
// overwrite it) nor a new process the old text.
var kinds = [...]struct {
	name, prefix string
	window       bool
	suffix       string
}{
	kindGCRA:           {"NewMeter", "shaper:gcra:", false, ""},
	kindTokenBucket:    {"NewTokenBucket", "shaper:tb:", false, ":p"},
	kindFixedWindow:    {"NewFixedWindow", "shaper:fw:", true, ":p"},
	kindSlidingLog:     {"NewSlidingLog", "shaper:sl:", true, ":p"},
	kindSlidingCounter: {"NewSlidingCounter", "shaper:sc:", true, ":p"},
}

// newLocal returns the in-process meter of kind enforcing lim: the fallback
// under breaker.FailLocal.
func newLocal(kind algoKind, lim shaper.Limit) *shaper.Meter {
	switch kind {
	case kindTokenBucket:
		return shaper.NewTokenBucket(lim)
	case kindFixedWindow:
		return shaper.NewFixedWindow(lim)
	case kindSlidingLog:
		return shaper.NewSlidingLog(lim)
	case kindSlidingCounter:
		return shaper.NewSlidingCounter(lim)
	}
	return shaper.NewMeter(lim)
}

// Meter is a keyed meter whose state lives in Redis, so that every process
// using the same Redis, Prefix, algorithm and limit shares one quota per key.
// Each decision is one Lua script run atomically in Redis (one round trip,
// EVALSHA, then EVAL if Redis lost its script cache), with time from Redis TIME,
// so no client clock matters and there is no check-then-act race between
// processes. The scripts run, line by line in integer microseconds, the same
// arithmetic as the in-process [shaper.Meter] of the same algorithm
// ([shaper.NewMeter], [shaper.NewTokenBucket], [shaper.NewFixedWindow],
// [shaper.NewSlidingLog], [shaper.NewSlidingCounter]), and give
// the same decisions for the same times and costs. Every key has a TTL: a key
// disappears once it is idle (for the token bucket, after max(60 s, twice the
// time to fill it), as in the usual Redis token-bucket script).
//
// Invalid calls (a negative cost panics; a cost above the burst returns a
// *RejectError; a key longer than Config.MaxKeyLen returns ErrInvalidKey) are
// refused before any round trip.
//
// The zero Meter refuses every call with ErrTooLarge; use [NewMeter] or one of
// its siblings. A Meter is safe for concurrent use by multiple goroutines. Its
// constructors do no I/O and start no goroutine.
type Meter struct {
	st     storecall.Store // the client and its breaker
	kind   algoKind
	script *redisscript.Script
	prefix string
	maxKey int // < 0: no bound
	policy breaker.Policy
	local  *shaper.Meter // FailLocal only
	rec    *recovery     // FailLocal only
	batch  *batcher      // Batch only
	lim    atomic.Pointer[redisLimit]
	stats  meterCounters
	obs    floodgate.Observer
}

// redisLimit is a limit with its script arguments, boxed once.
type redisLimit struct {
	lim  shaper.Limit
	max  int64
	p, c int64
	pcb  string // P, C, B packed (see limithead.lua), the start of a meter call's head
	arg  any    // pcb, the first argument of every script but the meter scripts
}

func newRedisLimit(what string, lim shaper.Limit, window bool) *redisLimit {
	p, c, b := rateconv.Validate("shaperredis", what, lim.Rate.Count, lim.Rate.Period, lim.Burst, window)
	lim.Burst = b // explicit, as the in-process meters report it
	pcb := packLimit(p, c, b)
	return &redisLimit{lim: lim, max: b, p: p, c: c, pcb: pcb, arg: pcb}
}

// NewMeter returns a GCRA meter (see [shaper.NewMeter]) enforcing lim for every
// key, its state in Redis on client (a *redis.Client, *redis.ClusterClient,
// Sentinel failover client or *redis.Ring). It panics on an invalid limit, as
// [shaper.NewMeter] does (and if Burst×Period or Count×Period in µs reaches
// 2^53, the largest integer a Lua number holds exactly), on a nil client, or on
// a client without ContextTimeoutEnabled (go-redis would then ignore the
// per-call timeout, and a frozen Redis would hold every caller for its socket
// timeouts).
func NewMeter(client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	return newMeter(kindGCRA, client, lim, cfg)
}

// NewTokenBucket returns a token bucket (see [shaper.NewTokenBucket]) in Redis;
// its script follows the usual Redis Lua token-bucket script (see
// lua/tokenbucket.lua for the two
// differences). It panics as [NewMeter] does.
func NewTokenBucket(client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	return newMeter(kindTokenBucket, client, lim, cfg)
}

// NewFixedWindow returns a fixed-window counter (see [shaper.NewFixedWindow]) in
// Redis. It panics as [NewMeter] does, and if lim.Burst is not 0 or
// lim.Rate.Count.
func NewFixedWindow(client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	return newMeter(kindFixedWindow, client, lim, cfg)
}

// NewSlidingLog returns a sliding-window log (see [shaper.NewSlidingLog]) in
// Redis: a list of at most Rate.Count entries per key, read whole by each
// decision. It panics as [NewFixedWindow] does.
func NewSlidingLog(client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	return newMeter(kindSlidingLog, client, lim, cfg)
}

// NewSlidingCounter returns a sliding-window counter (see
// [shaper.NewSlidingCounter]) in Redis. It panics as [NewFixedWindow] does.
func NewSlidingCounter(client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	return newMeter(kindSlidingCounter, client, lim, cfg)
}

func newMeter(kind algoKind, client redis.UniversalClient, lim shaper.Limit, cfg Config) *Meter {
	k := kinds[kind]
	storecall.Check("shaperredis", client)
	m := &Meter{
		kind:   kind,
		script: scripts.meter[kind],
		prefix: cfg.Prefix,
		maxKey: cfg.maxKeyLen(),
		policy: cfg.Policy,
		obs:    cfg.Observer,
	}
	m.lim.Store(newRedisLimit(k.name, lim, k.window))
	if m.prefix == "" {
		m.prefix = k.prefix
	}
	m.st = storecall.New("shaperredis", client, cfg.Breaker, "shaper:"+m.prefix)
	if cfg.Policy == breaker.FailLocal {
		ll := cfg.LocalShare
		if ll == (shaper.Limit{}) {
			ll = lim
		}
		m.local = newLocal(kind, ll)
		m.rec = newRecovery(kind, ll)
	} else if cfg.Policy > breaker.FailLocal {
		panic("shaperredis: " + k.name + ": invalid Policy")
	}
	if cfg.Batch {
		m.batch = newBatcher(client, cfg.MaxBatch, scripts.meter[kind], scripts.batch[kind])
	}
	return m
}

func (cfg Config) store(client redis.UniversalClient, prefix string) storecall.Store {
	return storecall.New("shaperredis", client, cfg.Breaker, "shaper:"+prefix)
}

// Key returns the Redis key holding the state of key: Prefix + "{" + key +
// "}", followed for the token bucket and the windows by ":p" (their state is
// packed, and earlier versions kept it as text under the key without the
// suffix: a fleet in a rolling deploy keeps the two apart). Every decision
// touches that one key, so any key is safe on Redis Cluster, braces included
// (a key with a '}' is hashed by a part of it, or whole, but one Redis key is
// always in one slot), and different keys never share a Redis key.
func (m *Meter) Key(key string) string { return m.prefix + "{" + key + "}" + kinds[m.kind].suffix }

// CheckKey returns, without I/O, the ErrInvalidKey that AllowN, Allow and
// Admit return for key, or nil if key is valid: any byte string of at most
// Config.MaxKeyLen bytes (the empty one and braces included). It is what
// bulkhead asks of a layer's Rate before it charges any layer, so that a key
// this meter refuses never costs the client quota elsewhere.
func (m *Meter) CheckKey(key string) error {
	if m.lim.Load() != nil && !keyOK(key, m.maxKey) {
		return ErrInvalidKey
	}
	return nil
}

// Limit returns the current limit, with Burst made explicit.
func (m *Meter) Limit() shaper.Limit {
	if rl := m.lim.Load(); rl != nil {
		return rl.lim
	}
	return shaper.Limit{}
}

// SetLimit changes the limit this process enforces, from its next decision on.
// The state in Redis is kept and read under the new limit exactly as the
// in-process meter's SetLimit does. Processes sharing a key should change their
// limits together: each decision is made under the caller's own limit. It panics
// on an invalid limit (see [NewMeter]), leaving the limit unchanged.
func (m *Meter) SetLimit(lim shaper.Limit) {
	k := kinds[m.kind]
	m.lim.Store(newRedisLimit(k.name, lim, k.window))
}

// Allow reports whether one event for key may happen now, and records it if so.
// It never returns an error: when Redis cannot answer, Config.Policy decides
// (FailClosed: false; FailOpen: true; FailLocal: the local share), and it
// returns false if ctx is done, the key is too long or the meter is the zero
// Meter. Use AllowN for the whole Decision and the reason of a refusal.
func (m *Meter) Allow(ctx context.Context, key string) bool {
	d, err := m.AllowN(ctx, key, 1)
	return err == nil && d.Allowed
}

// AllowN decides in Redis whether an event of cost n for key may happen now, and
// records it if so. A denial is a Decision with Allowed false and an error of nil
// (use [shaper.Decision.Err] to turn it into a *RejectError). A cost of zero
// reports the state without recording anything.
//
// It returns, without any round trip: ctx.Err() if ctx is already done;
// ErrInvalidKey if key is longer than Config.MaxKeyLen; a *RejectError
// (ErrTooLarge) if n exceeds the burst (or window count); and it panics if n is
// negative. When Redis cannot answer, the result depends on Config.Policy (see
// there): under FailOpen and FailLocal the Decision has Degraded set. Other Redis
// errors are returned wrapped, with a zero Decision; a caller's cancellation
// returns ctx.Err().
func (m *Meter) AllowN(ctx context.Context, key string, n int64) (shaper.Decision, error) {
	d, err := m.allowN(ctx, key, n)
	if n > 0 {
		i := m.count(ctx, key, d, err)
		if m.obs != nil {
			m.observe(i, n, err)
		}
	}
	return d, err
}

// allowN is AllowN without its counters.
func (m *Meter) allowN(ctx context.Context, key string, n int64) (shaper.Decision, error) {
	if n < 0 {
		panic("shaperredis: negative cost")
	}
	rl := m.lim.Load()
	if rl == nil {
		return shaper.Decision{}, tooLarge()
	}
	if n > rl.max {
		return shaper.Decision{Limit: rl.lim}, tooLarge()
	}
	if !keyOK(key, m.maxKey) {
		return shaper.Decision{Limit: rl.lim}, ErrInvalidKey
	}
	c := call{m: m, rl: rl, key: key, n: n}
	var fallback func(context.Context) (result, error)
	if m.local != nil {
		if n > 0 && m.rec.recovering(key) {
			return m.allowRecovering(ctx, c)
		}
		fallback = c.fallback
	}
	r, src, err := storecall.Do(ctx, &m.st, m.policy, c.run, fallback)
	switch src {
	case breaker.FromFailOpen:
		return shaper.Decision{Allowed: true, Limit: rl.lim, Degraded: true}, nil
	case breaker.FromFailLocal:
		if n > 0 { // a peek decides nothing
			m.rec.outage(key, admittedCost(r.d, err, n))
		}
		r.d.Degraded = true
		return r.d, err
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return shaper.Decision{}, cerr
		}
		return shaper.Decision{}, err
	}
	if m.local != nil && n > 0 {
		m.rec.failing.Store(false)
		m.rec.follow(m.local, key, r.d.Remaining, rl.max)
	}
	return r.d, nil
}

// Admit decides whether key may spend n now, as AllowN does, and returns a
// denial as an error (d.Err(): ErrLimited, with RetryAfter): (d, nil) when
// admitted, (d, d.Err()) when denied, and AllowN's error when the call could not
// be decided. It is the Admit of the in-process meters (see [shaper.Meter.Admit]),
// so one small interface covers both.
func (m *Meter) Admit(ctx context.Context, key string, n int64) (shaper.Decision, error) {
	d, err := m.AllowN(ctx, key, n)
	if err == nil && !d.Allowed {
		err = d.Err()
	}
	return d, err
}

// refundTimeout bounds a refund's store call when the meter's breaker has
// no shorter CallTimeout: a refund runs on the refusal path, after the
// caller's own budget may have ended.
const refundTimeout = time.Second

// Refund gives back the cost n of d, an admission of key by this meter, for a
// caller whose request was refused by a later step (see shaper's Refund
// contract, which the scripts follow line for line: GCRA moves the key's time
// back by n·T, never before now; the token bucket puts n tokens back, up to
// capacity; the window algorithms uncount n from the window or log entry the
// admission was counted in, which its Decision carries). A denial and n = 0 give
// nothing back. A Decision made by the FailLocal meter (Degraded) is
// refunded there; one admitted by FailOpen charged nothing. Otherwise it is
// one round trip through the meter's breaker, run without ctx's cancellation
// (a cancelled request still gets its quota back), bounded by the breaker's
// CallTimeout and by one second, and carrying no deadline (a refund is
// always due, even late). It returns the store's error if Redis could not be
// reached (the cost then stays spent: best effort). Stats counts in Refunded
// the refunds that gave something back, in RefundErrors those that failed. A negative n panics.
func (m *Meter) Refund(ctx context.Context, key string, n int64, d shaper.Decision) error {
	if n < 0 {
		panic("shaperredis: negative cost")
	}
	if !d.Allowed || n == 0 {
		return nil
	}
	if d.Degraded {
		if m.local == nil {
			return nil // FailOpen: nothing was charged
		}
		return m.local.Refund(ctx, key, n, d)
	}
	sc := scripts.refund[m.kind]
	rl := m.lim.Load()
	if rl == nil || n > rl.max || !keyOK(key, m.maxKey) {
		return nil // never admitted under this limit: nothing to give back
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	run := func(ctx context.Context, client redis.UniversalClient) (bool, error) {
		var out [1]int64
		err := evalKey(ctx, client, sc, m.Key(key), out[:], rl.arg, n, getStamp(&d))
		return out[0] == 1, err
	}
	gave, _, err := storecall.Do(ctx, &m.st, breaker.FailClosed, run, nil)
	if err != nil {
		m.stats[mRefundErrors].Add(1)
		return err
	}
	if gave {
		m.stats[mRefunds].Add(1)
	}
	return nil
}

// call is one decision: its run method is the guarded Redis call.
type call struct {
	m   *Meter
	rl  *redisLimit
	key string
	n   int64
	pre *shaper.Decision // the local share's admission before the call, when recovering
}

// result wraps a Decision so that breaker.Do's zero value is distinguishable.
type result struct{ d shaper.Decision }

// evalBuf holds the command of one meter script call: "evalsha", the
// script's SHA-1 (both written by redisscript.Script.Cmd), 1 (numkeys), the
// key, and the call's head: P, C, B, n and the call's deadline
// (storecall.Clock.Deadline) packed in one argument (see meterhead.lua). The key
// is passed by pointer (go-redis writes a *string argument, and Cluster reads
// the key through it) and the head as a []byte of the buffer's own array,
// boxed once per buffer, so filling the command allocates nothing (the prefixed
// key itself is one string, built by the caller). A buffer is reused (from
// evalPool) once its call has returned: go-redis is done with the arguments
// when Process returns.
type evalBuf struct {
	args    [5]any
	key     string
	head    [40]byte
	headArg any // head[:]
}

var evalPool = sync.Pool{New: func() any { return new(evalBuf) }}

var oneKey any = 1

// fill sets buf's arguments for a call of n for key under rl with deadline
// dl, and returns them (the command of a meter script; see
// redisscript.Script.EvalInts).
func (buf *evalBuf) fill(key string, rl *redisLimit, n, dl int64) []any {
	buf.key = key
	copy(buf.head[:24], rl.pcb)
	binary.LittleEndian.PutUint64(buf.head[24:], math.Float64bits(float64(n)))
	buf.setDeadline(dl)
	if buf.headArg == nil {
		buf.headArg = buf.head[:]
	}
	a := &buf.args
	a[2], a[3], a[4] = oneKey, &buf.key, buf.headArg
	return a[:]
}

// setDeadline sets the deadline in buf's head (Unix µs, below 2^53: exact).
func (buf *evalBuf) setDeadline(dl int64) {
	binary.LittleEndian.PutUint64(buf.head[32:], math.Float64bits(float64(dl)))
}

// headLimit returns the limit (P, C, B packed) in the head of the command
// args (see evalBuf.fill).
func headLimit(args []any) []byte { return args[4].([]byte)[:24] }

// expiredReply is the first integer of a script's reply when the call's
// deadline had passed in Redis, which then did nothing (see storecall.Clock).
const expiredReply = -2

func (c call) run(ctx context.Context, client redis.UniversalClient) (result, error) {
	m := c.m
	buf := evalPool.Get().(*evalBuf)
	args := buf.fill(m.Key(c.key), c.rl, c.n, m.st.Clock.Deadline(ctx))
	var v []int64
	var err error
	abandoned := false
	if m.batch != nil {
		v, err, abandoned = m.batch.run(ctx, args)
	} else {
		v, err = m.script.EvalInts(ctx, client, args)
	}
	if err == nil && len(v) == 4 && v[0] == expiredReply {
		// Redis's clock is ahead of ours (or the reply is late): once more,
		// alone, with what the Clock has learned, if the budget allows.
		again := m.st.Clock.Expired(ctx, v[1])
		v, err = nil, context.DeadlineExceeded
		if again {
			buf.setDeadline(m.st.Clock.Deadline(ctx))
			if v, err = m.script.EvalInts(ctx, client, args); err == nil && len(v) == 4 && v[0] == expiredReply {
				v, err = nil, context.DeadlineExceeded
			}
		}
	}
	if !abandoned { // else its batch may still read it: left to the GC
		buf.key = ""
		evalPool.Put(buf)
	}
	if err != nil {
		return result{}, err
	}
	d, err := decision(v, c.rl)
	return result{d}, err
}

// decision turns a meter script's reply into a Decision under rl.
func decision(v []int64, rl *redisLimit) (shaper.Decision, error) {
	r, err := parseReply(v)
	if err != nil {
		return shaper.Decision{}, err
	}
	d := shaper.Decision{
		Allowed:    r[0] == 1,
		Remaining:  r[1],
		ResetAfter: micros(r[3]),
		Limit:      rl.lim,
	}
	if d.Allowed {
		// An admission's retry is 0; a window script's admission sends its
		// refund stamp there instead (see fixedwindow.lua).
		setStamp(&d, r[2])
	} else {
		d.RetryAfter = micros(r[2])
	}
	return d, nil
}

// setStamp and getStamp write and read a Decision's refund stamp (see
// internal/stamp).
var (
	setStamp = stamp.Set.(func(*shaper.Decision, int64))
	getStamp = stamp.Get.(func(*shaper.Decision) int64)
)

// fallback decides c on the local share when Redis could not, at the moment
// the caller is answered: a call that waited on Redis for its CallTimeout is
// admitted then, not when it began. So while recovering, the share's
// admission made before the call (c.pre, a hold on its room while the call
// waits) is given back and c decided again now: the share admits no more in
// any stretch of time, as its callers see it, than its limit (a call that
// began before others but was answered after them is counted after them).
func (c call) fallback(ctx context.Context) (result, error) {
	if c.pre != nil {
		c.m.local.Refund(ctx, c.key, c.n, *c.pre)
	}
	d, err := c.m.local.AllowN(c.key, c.n)
	return result{d}, err
}

// parseReply checks a meter script's reply: {allowed 0|1, remaining, retry ≥ 0,
// reset ≥ 0}. (go-redis has already checked that every element is an integer;
// it reads a nil element as 0, which the scripts never return.)
func parseReply(v []int64) ([4]int64, error) {
	var out [4]int64
	if len(v) != len(out) {
		return out, fmt.Errorf("shaperredis: unexpected reply of %d elements", len(v))
	}
	copy(out[:], v)
	if out[0] != 0 && out[0] != 1 || out[2] < 0 || out[3] < 0 {
		return out, fmt.Errorf("shaperredis: unexpected reply %v", out)
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
		return fmt.Errorf("shaperredis: unexpected reply of %d elements", len(v))
	}
	copy(dst, v)
	return nil
}

// evalBefore is evalKey for a script that takes the call's deadline as its
// last argument (after argv) and, once it has passed in Redis, replies
// expiredReply then Redis's time and does nothing (lease.lua, reserve.lua: see
// the deadline check in common.lua). ctx is the call's context; clock turns its deadline
// into Redis time. An expired reply while ctx still has time means Redis's
// clock is ahead of ours: clock learns by how much and the call is sent once
// more; otherwise it returns context.DeadlineExceeded, the timeout that the
// caller has been (or is being) answered.
func evalBefore(ctx context.Context, clock *storecall.Clock, c redis.UniversalClient, sc *redisscript.Script, key string, dst []int64, argv ...any) error {
	argv = append(argv, clock.Deadline(ctx))
	dl := len(argv) - 1
	for try := 0; ; try++ {
		if err := evalKey(ctx, c, sc, key, dst, argv...); err != nil {
			return err
		}
		if dst[0] != expiredReply {
			return nil
		}
		if try > 0 || !clock.Expired(ctx, dst[1]) {
			return context.DeadlineExceeded
		}
		argv[dl] = clock.Deadline(ctx)
	}
}

// maxExact is 2^53: every number crossing into Lua stays below it.
const maxExact = rateconv.MaxExact

// burstOf returns l's burst, Rate.Count if l.Burst is zero.
func burstOf(l shaper.Limit) int64 { return rateconv.Burst(l.Rate.Count, l.Burst) }

// micros converts µs to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
