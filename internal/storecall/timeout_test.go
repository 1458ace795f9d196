package storecall_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// TestStoreTimeoutIsNotTheCallersDeadline: with Redis frozen (a
// floodgatetest.Proxy between the clients and Redis stops forwarding), every
// Redis caller (a shared Breaker used directly, a RedisMeter, a RedisQueue, a
// distsem.Semaphore) answers a store timeout the same way: an error matching
// breaker.ErrTimeout and breaker.ErrUnavailable, never
// context.DeadlineExceeded, while the caller's context (with a longer
// deadline) is not done, and the breaker counts it. With a caller deadline
// shorter than CallTimeout, every caller returns context.DeadlineExceeded and
// the breaker counts nothing.
func TestStoreTimeoutIsNotTheCallersDeadline(t *testing.T) {
	srv := redistest.Start(t)
	proxy := floodgatetest.StartProxy(t, srv.Addr)
	rdb := redis.NewClient(redistest.Options(proxy.Addr()))
	t.Cleanup(func() { rdb.Close() }) // after the queue's Close
	const callTimeout = 200 * time.Millisecond
	type subject struct {
		name string
		brk  *breaker.Breaker
		call func(ctx context.Context) error
	}
	var subjects []subject
	newBreaker := func(name string) *breaker.Breaker {
		return breaker.New(name, breaker.Config{CallTimeout: callTimeout, ConsecutiveFailures: 1000})
	}
	{
		brk := newBreaker("direct")
		subjects = append(subjects, subject{"breaker.Do", brk, func(ctx context.Context) error {
			_, _, err := breaker.Do(ctx, brk, breaker.FailClosed, func(ctx context.Context) (string, error) {
				return rdb.Set(ctx, "storecall-timeout", "v", time.Minute).Result()
			}, nil)
			return err
		}})
	}
	{
		brk := newBreaker("meter")
		m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 1000}, shaperredis.Config{Prefix: "storecall-timeout:m:", Breaker: brk})
		subjects = append(subjects, subject{"shaperredis.Meter", brk, func(ctx context.Context) error {
			_, err := m.AllowN(ctx, "k", 1)
			return err
		}})
	}
	{
		brk := newBreaker("queue")
		q := shaperredis.NewQueue(rdb, "q", shaper.PerSecond(1000), shaper.QueueConfig{}, shaperredis.Config{Prefix: "storecall-timeout:q:", Breaker: brk})
		t.Cleanup(func() { q.Close() })
		subjects = append(subjects, subject{"shaperredis.Queue", brk, func(ctx context.Context) error {
			return q.Wait(ctx, 1)
		}})
	}
	{
		// A Semaphore per call, closed before the breaker is read: Close
		// cancels the background release of the failed acquire's token, so
		// that the counts are the acquire's own.
		brk := newBreaker("distsem")
		subjects = append(subjects, subject{"distsem.Semaphore", brk, func(ctx context.Context) error {
			s := distsem.New(rdb, "storecall-timeout-sem", 4, distsem.Config{Breaker: brk})
			defer s.Close()
			p, err := s.Acquire(ctx, 1)
			if err == nil {
				p.Release(ctx)
			}
			return err
		}})
	}
	ctx := t.Context()
	for _, sj := range subjects { // connected, scripts cached
		if err := sj.call(ctx); err != nil {
			t.Fatalf("%s before the freeze: %v", sj.name, err)
		}
	}
	proxy.Freeze()
	defer proxy.Heal()

	for _, sj := range subjects {
		before := sj.brk.Stats()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := sj.call(cctx)
		el := time.Since(start)
		if !errors.Is(err, breaker.ErrTimeout) || !errors.Is(err, breaker.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s, store timeout: err = %v; want breaker.ErrTimeout and ErrUnavailable, not context.DeadlineExceeded", sj.name, err)
		}
		if ne, ok := errors.AsType[interface {
			error
			Timeout() bool
		}](err); !ok || !ne.Timeout() {
			t.Errorf("%s, store timeout: err = %v has no Timeout() true", sj.name, err)
		}
		if cctx.Err() != nil {
			t.Errorf("%s: the caller's context ended (%v) after %v: the test did not test a store timeout", sj.name, cctx.Err(), el)
		}
		if el > 5*time.Second {
			t.Errorf("%s returned after %v, want within a few CallTimeouts", sj.name, el)
		}
		if after := sj.brk.Stats(); after.StoreFailures == before.StoreFailures {
			t.Errorf("%s: store timeout not counted as a store failure (%d)", sj.name, after.StoreFailures)
		}
		cancel()
	}

	for _, sj := range subjects {
		before := sj.brk.Stats()
		cctx, cancel := context.WithTimeout(ctx, callTimeout/4)
		err := sj.call(cctx)
		cancel()
		if err != context.DeadlineExceeded {
			t.Errorf("%s, caller deadline sooner than CallTimeout: err = %v, want context.DeadlineExceeded", sj.name, err)
		}
		if after := sj.brk.Stats(); after.StoreFailures != before.StoreFailures || after.FailClosed != before.FailClosed {
			t.Errorf("%s: the caller's deadline was counted: store failures %d -> %d, rejections %d -> %d",
				sj.name, before.StoreFailures, after.StoreFailures, before.FailClosed, after.FailClosed)
		}
	}
}
