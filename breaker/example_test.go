package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/redis/go-redis/v9"
)

// A store whose calls fail while down is true, as a dead Redis would.
type fakeStore struct {
	down bool
	hits int64
}

func (s *fakeStore) incr(context.Context) (int64, error) {
	if s.down {
		return 0, syscall.ECONNREFUSED
	}
	s.hits++
	return s.hits, nil
}

func ExampleDo() {
	b := breaker.New("redis:6379", breaker.Config{
		ConsecutiveFailures: 2,
		Logger:              slog.New(slog.DiscardHandler),
		Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind == floodgate.KindStateChange {
				fmt.Printf("  [%s -> %s]\n", e.From, e.To)
			}
		}),
	})
	store := &fakeStore{}
	var local atomic.Int64 // a local count standing in for a local limiter
	fallback := func(context.Context) (int64, error) { return local.Add(1), nil }
	ctx := context.Background()

	for i, down := range []bool{false, true, true, true} {
		store.down = down
		n, src, err := breaker.Do(ctx, b, breaker.FailLocal, store.incr, fallback)
		fmt.Printf("call %d: n=%d from %v, err=%v\n", i, n, src, err)
	}
	// Output:
	// call 0: n=1 from store, err=<nil>
	// call 1: n=1 from fail_local, err=<nil>
	//   [closed -> open]
	// call 2: n=2 from fail_local, err=<nil>
	// call 3: n=3 from fail_local, err=<nil>
}

// Each call chooses its policy: one Breaker per Redis endpoint serves a
// semaphore that fails closed, a meter that fails open, and one that falls back
// to a local limiter.
func Example_policies() {
	b := breaker.New("redis:6379", breaker.Config{
		ConsecutiveFailures: 1,
		OpenDuration:        30 * time.Second,
		Jitter:              -1,
		Logger:              slog.New(slog.DiscardHandler),
	})
	ctx := context.Background()
	dead := func(context.Context) (bool, error) { return false, syscall.ECONNREFUSED }
	breaker.Do(ctx, b, breaker.FailOpen, dead, nil) // trips it

	admitLocally := func(context.Context) (bool, error) { return true, nil }
	for _, p := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen, breaker.FailLocal} {
		ok, src, err := breaker.Do(ctx, b, p, dead, admitLocally)
		// FromFailOpen means "admitted without the store"; its value is the zero T.
		admitted := err == nil && (ok || src == breaker.FromFailOpen)
		fmt.Printf("%v: admitted=%v source=%v err=%v\n", p, admitted, src, err)
		if oe, isOpen := errors.AsType[*breaker.OpenError](err); isOpen {
			fmt.Printf("  retry after %v; errors.Is(err, ErrUnavailable) = %v\n", oe.RetryAfter().Round(time.Second), errors.Is(err, breaker.ErrUnavailable))
		}
	}
	st := b.Stats()
	fmt.Printf("fail_closed=%d fail_open=%d fail_local=%d degraded=%d\n", st.FailClosed, st.FailOpen, st.FailLocal, st.Degraded)
	// Output:
	// fail_closed: admitted=false source=fail_closed err=breaker: store unavailable (circuit open)
	//   retry after 30s; errors.Is(err, ErrUnavailable) = true
	// fail_open: admitted=true source=fail_open err=<nil>
	// fail_local: admitted=true source=fail_local err=<nil>
	// fail_closed=1 fail_open=2 fail_local=1 degraded=3
}

// The log line of a transition carries the counts of answers given by each
// policy during the previous state; there is never a line per call.
func ExampleConfig_logger() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	b := breaker.New("redis:6379", breaker.Config{
		ConsecutiveFailures: 3,
		OpenDuration:        time.Second,
		Jitter:              -1,
		Logger:              slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})),
	})
	dead := func(context.Context) (int, error) { return 0, syscall.ECONNRESET }
	for range 10 {
		breaker.Do(context.Background(), b, breaker.FailOpen, dead, nil)
	}
	// Output:
	// level=WARN msg="breaker: open" limiter=redis:6379 component=breaker from=closed to=open open_for=1s trips=1 store_failures=3 fail_closed=0 fail_open=3 fail_local=0
}

// A Breaker shared by everything that uses one Redis endpoint. The client must
// honour context deadlines (ContextTimeoutEnabled) for CallTimeout to bound a
// call to a frozen server.
func Example_redis() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	b := breaker.New(rdb.Options().Addr, breaker.Config{
		FailureRatio:    0.5, // also trip when half the calls of the last 10s failed
		MinCalls:        20,
		MaxOpenDuration: 30 * time.Second,       // back off while the outage lasts
		CallTimeout:     100 * time.Millisecond, // the one per-call timeout of every call through b
	})

	ctx := context.Background()
	n, src, err := breaker.Do(ctx, b, breaker.FailClosed, func(ctx context.Context) (int64, error) {
		return rdb.Incr(ctx, "requests").Result()
	}, nil)
	switch {
	case errors.Is(err, breaker.ErrUnavailable):
		fmt.Println("Redis unavailable:", err)
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Println(n, src)
	}
}
