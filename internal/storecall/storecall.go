// Package storecall is the one guarded path of every Redis call in floodgate:
// the client is checked once, at construction ([New]), and every call goes
// through [breaker.Do] ([Do]), which owns the per-call timeout
// (breaker.Config.CallTimeout), classifies the outcome (store failure, the
// caller's cancellation, an answer) and resolves an open breaker by policy.
// The caller's ctx flows down into the call unchanged but for that deadline.
package storecall

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/storeprobe"
)

// A Store is a checked Redis client and the breaker that guards every call to
// it. The zero Store is not usable; use New.
type Store struct {
	Client  redis.UniversalClient
	Breaker *breaker.Breaker
	Clock   *Clock // the deadlines of the scripts run through the Store
}

// New returns the Store of client guarded by brk, or, if brk is nil, by a
// breaker of its own named name with the default breaker.Config (so the
// default per-call timeout, breaker.DefaultCallTimeout). A breaker without
// a Probe gets a PING on client as its probe. pkg prefixes the panic
// messages.
//
// New panics with "<pkg>: nil client" if client is nil or a typed nil (such
// as (*redis.Client)(nil)), and with "<pkg>: client without
// ContextTimeoutEnabled" if client is a *redis.Client, *redis.ClusterClient
// or *redis.Ring without it: go-redis would then ignore the call's deadline,
// and a frozen Redis would hold every caller for its socket timeouts.
func New(pkg string, client redis.UniversalClient, brk *breaker.Breaker, name string) Store {
	Check(pkg, client)
	if brk == nil {
		brk = breaker.New(name, breaker.Config{})
	}
	// A breaker without a probe of its own probes Redis with a PING on this
	// client, off the callers' path (see breaker.Config.Probe).
	storeprobe.Install.(func(*breaker.Breaker, func(context.Context) error))(brk, func(ctx context.Context) error {
		return client.Ping(ctx).Err()
	})
	return Store{Client: client, Breaker: brk, Clock: new(Clock)}
}

// Check panics as New does if client is nil, a typed nil, or a go-redis
// client without ContextTimeoutEnabled.
func Check(pkg string, client redis.UniversalClient) {
	if client == nil {
		panic(pkg + ": nil client")
	}
	switch v := reflect.ValueOf(client); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		if v.IsNil() {
			panic(pkg + ": nil client")
		}
	}
	ok := true
	switch c := client.(type) {
	case *redis.Client:
		ok = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		ok = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		ok = c.Options().ContextTimeoutEnabled
	}
	if !ok {
		panic(pkg + ": client without ContextTimeoutEnabled")
	}
}

// Do makes one guarded call: call runs with s.Client and ctx bounded by the
// breaker's CallTimeout, through breaker.Do with policy p and fallback (see
// breaker.Do for the outcomes: a store timeout is a *breaker.StoreError
// matching breaker.ErrTimeout, the caller's context ending returns ctx.Err()).
func Do[T any](ctx context.Context, s *Store, p breaker.Policy, call func(context.Context, redis.UniversalClient) (T, error), fallback func(context.Context) (T, error)) (T, breaker.Source, error) {
	return breaker.Do(ctx, s.Breaker, p, func(ctx context.Context) (T, error) { return call(ctx, s.Client) }, fallback)
}

// Slack is added to every script deadline (see [Clock.Deadline]): the margin
// by which this host's clock may run behind Redis's before a call still
// within its budget reaches Redis after its deadline, as Redis sees it, and
// is not run.
const Slack = 10 * time.Millisecond

// A Clock turns the deadline of a call into the deadline of its script, in
// Redis time: a script that spends something on behalf of its caller (a meter
// decision, a reservation, a semaphore acquire) receives it, compares it with
// Redis TIME, and does nothing once it has passed, because the caller was
// then already answered with a timeout (a call that sat in a frozen Redis's
// socket runs when Redis wakes). The client's clock and Redis's may differ:
// the Clock starts from this host's clock plus [Slack], and learns how far
// Redis is ahead from the replies of scripts that found their deadline
// passed while the caller was still waiting (proof that Redis's clock is
// ahead by at least the difference), so that skew costs one extra round trip
// when it is learned, never an outage. A Clock never learns that Redis is
// behind: a stale call then still runs if Redis starts it within Slack plus
// that skew after the call's deadline. The zero Clock is ready to use and
// safe for concurrent use; a nil *Clock is a zero Clock that never learns.
type Clock struct {
	ahead atomic.Int64 // µs by which Redis's clock is known to be ahead of ours, ≥ 0
}

// Deadline returns the script deadline of a call made with ctx (the call's
// context from Do, bounded by the breaker's CallTimeout): ctx's deadline in
// Unix µs, plus what c has learned of Redis's clock and Slack; 0 (none) if ctx
// has no deadline.
func (c *Clock) Deadline(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	var ahead int64
	if c != nil {
		ahead = c.ahead.Load()
	}
	return d.UnixMicro() + int64(Slack/time.Microsecond) + ahead
}

// Expired takes the reply of a script that found its deadline passed, with
// redisNow, the Redis time (Unix µs) at which it ran, and reports whether the
// call may be sent again with a new Deadline: ctx (the call's context) is not
// done yet, so Redis's clock was ahead of ours by more than c knew, which c
// has now learned. If it returns false, the call's budget is spent: return
// context.DeadlineExceeded, which Do reports as the timeout it is.
func (c *Clock) Expired(ctx context.Context, redisNow int64) bool {
	now := time.Now()
	// Redis ran the script at Redis time redisNow, before now on our clock.
	if ahead := redisNow - now.UnixMicro(); ahead > 0 && c != nil {
		for {
			old := c.ahead.Load()
			if ahead <= old || c.ahead.CompareAndSwap(old, ahead) {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return false
	}
	d, ok := ctx.Deadline()
	return ok && now.Before(d)
}
