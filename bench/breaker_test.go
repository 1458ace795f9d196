package bench

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/sony/gobreaker/v2"
)

var breakerSink int

func guarded(context.Context) (int, error) { return 1, nil }

// BenchmarkBreakerSuccess is the guarded success path (breaker closed, call
// succeeds) of floodgate's breaker.Do beside a direct call and beside
// gobreaker's own Execute and two-step Allow, in one run; impl=floor is
// gobreaker's Execute with only what Do's contract adds to it that no
// implementation can skip (see the row). Target:
// impl=floodgate/timeout=off: ns/op ≤ 1.15× impl=gobreaker;
// impl=floodgate/timeout=off: allocs/op = 0.
//
// timeout=off is Do when it derives no per-call context: CallTimeout < 0, or
// (timeout=callerdeadline) the caller's context already has a deadline no
// later than CallTimeout. timeout=on is the default CallTimeout with a
// Background context, timeout=on-cancellable with a cancellable context
// without deadline: both pay for a context.WithDeadline per call.
func BenchmarkBreakerSuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := guarded(ctx)
			breakerSink += v
		}
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		b.ReportAllocs()
		cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
		for b.Loop() {
			v, err := cb.Execute(func() (int, error) { return guarded(ctx) })
			if err != nil {
				b.Fatal(err)
			}
			breakerSink += v
		}
	})
	b.Run("impl=gobreaker-twostep", func(b *testing.B) {
		b.ReportAllocs()
		cb := gobreaker.NewTwoStepCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			v, err := guarded(ctx)
			done(err)
			breakerSink += v
		}
	})
	b.Run("impl=floor", func(b *testing.B) {
		// What Do cannot do without on this path: its context check, the
		// call's result and error kept beside gobreaker's verdict (Execute
		// of struct{}), and its answers counter. No state check, no policy.
		b.ReportAllocs()
		cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
		var answers atomic.Uint64
		for b.Loop() {
			if err := ctx.Err(); err != nil {
				b.Fatal(err)
			}
			var v int
			var cerr error
			_, err := cb.Execute(func() (struct{}, error) {
				v, cerr = guarded(ctx)
				return struct{}{}, cerr
			})
			if err != nil || cerr != nil {
				b.Fatal(err, cerr)
			}
			answers.Add(1)
			breakerSink += v
		}
	})
	b.Run("impl=floodgate/timeout=off", func(b *testing.B) {
		b.ReportAllocs()
		br := breaker.New("bench", breaker.Config{CallTimeout: -1})
		for b.Loop() {
			v, _, err := breaker.Do(ctx, br, breaker.FailClosed, guarded, nil)
			if err != nil {
				b.Fatal(err)
			}
			breakerSink += v
		}
	})
	b.Run("impl=floodgate/timeout=callerdeadline", func(b *testing.B) {
		b.ReportAllocs()
		br := breaker.New("bench", breaker.Config{CallTimeout: time.Hour})
		dctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		for b.Loop() {
			v, _, err := breaker.Do(dctx, br, breaker.FailClosed, guarded, nil)
			if err != nil {
				b.Fatal(err)
			}
			breakerSink += v
		}
	})
	b.Run("impl=floodgate/timeout=on", func(b *testing.B) {
		b.ReportAllocs()
		br := breaker.New("bench", breaker.Config{})
		for b.Loop() {
			v, _, err := breaker.Do(ctx, br, breaker.FailClosed, guarded, nil)
			if err != nil {
				b.Fatal(err)
			}
			breakerSink += v
		}
	})
	b.Run("impl=floodgate/timeout=on-cancellable", func(b *testing.B) {
		b.ReportAllocs()
		br := breaker.New("bench", breaker.Config{})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for b.Loop() {
			v, _, err := breaker.Do(cctx, br, breaker.FailClosed, guarded, nil)
			if err != nil {
				b.Fatal(err)
			}
			breakerSink += v
		}
	})
}

// BenchmarkBreakerOpen is a call while the breaker is open: no store call.
func BenchmarkBreakerOpen(b *testing.B) {
	ctx := context.Background()
	fail := func() (int, error) { return 0, context.DeadlineExceeded }
	b.Run("impl=gobreaker", func(b *testing.B) {
		b.ReportAllocs()
		cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
			Timeout: time.Hour, ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		})
		cb.Execute(fail)
		for b.Loop() {
			cb.Execute(func() (int, error) { return guarded(ctx) })
		}
	})
	for _, p := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen, breaker.FailLocal} {
		b.Run("impl=floodgate/policy="+p.String(), func(b *testing.B) {
			b.ReportAllocs()
			br := breaker.New("bench", breaker.Config{
				ConsecutiveFailures: 1, OpenDuration: time.Hour, IsFailure: func(error) bool { return true },
				Logger: slog.New(slog.DiscardHandler),
			})
			breaker.Do(ctx, br, breaker.FailOpen, func(context.Context) (int, error) { return fail() }, nil)
			for b.Loop() {
				breaker.Do(ctx, br, p, guarded, guarded)
			}
		})
	}
}

// BenchmarkBreakerParallel is the success path with every goroutine sharing one
// breaker, as the limiters on one Redis endpoint do.
func BenchmarkBreakerParallel(b *testing.B) {
	b.Run("impl=gobreaker", func(b *testing.B) {
		b.ReportAllocs()
		cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				cb.Execute(func() (int, error) { return guarded(ctx) })
			}
		})
	})
	b.Run("impl=floodgate/timeout=off", func(b *testing.B) {
		b.ReportAllocs()
		br := breaker.New("bench", breaker.Config{CallTimeout: -1})
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				breaker.Do(ctx, br, breaker.FailClosed, guarded, nil)
			}
		})
	})
}
