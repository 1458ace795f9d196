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

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
)

// A Store is a checked Redis client and the breaker that guards every call to
// it. The zero Store is not usable; use New.
type Store struct {
	Client  redis.UniversalClient
	Breaker *breaker.Breaker
}

// New returns the Store of client guarded by brk, or, if brk is nil, by a
// breaker of its own named name with the default breaker.Config and policy p
// as its default (so the default per-call timeout,
// breaker.DefaultCallTimeout). pkg prefixes the panic messages.
//
// New panics with "<pkg>: nil client" if client is nil or a typed nil (such
// as (*redis.Client)(nil)), and with "<pkg>: client without
// ContextTimeoutEnabled" if client is a *redis.Client, *redis.ClusterClient
// or *redis.Ring without it: go-redis would then ignore the call's deadline,
// and a frozen Redis would hold every caller for its socket timeouts.
func New(pkg string, client redis.UniversalClient, brk *breaker.Breaker, name string, p breaker.Policy) Store {
	Check(pkg, client)
	if brk == nil {
		brk = breaker.New(name, breaker.Config{Policy: p})
	}
	return Store{Client: client, Breaker: brk}
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
