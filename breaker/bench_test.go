package breaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/sony/gobreaker/v2"
)

var sink int

func storeCall(context.Context) (int, error) { return 1, nil }

// BenchmarkDo compares the guarded success path with a direct call of the same
// function, in the same run. timeout=off is the path Do takes when no per-call
// context is needed (CallTimeout < 0, or the caller's deadline is sooner);
// timeout=on (Background) and timeout=on-cancellable derive a
// context.WithDeadline per call.
func BenchmarkDo(b *testing.B) {
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			v, _ := storeCall(ctx)
			sink += v
		}
	})
	b.Run("impl=gobreaker", func(b *testing.B) {
		b.ReportAllocs()
		cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
		ctx := context.Background()
		for b.Loop() {
			v, err := cb.Execute(func() (int, error) { return storeCall(ctx) })
			if err != nil {
				b.Fatal(err)
			}
			sink += v
		}
	})
	for _, bc := range []struct {
		name string
		cfg  breaker.Config
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"impl=breaker/timeout=off", breaker.Config{CallTimeout: -1}, bg},
		// The caller's deadline is sooner than CallTimeout, so Do derives no context.
		{"impl=breaker/timeout=callerdeadline", breaker.Config{CallTimeout: time.Hour}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 30*time.Minute)
		}},
		// Background: a WithDeadline per call.
		{"impl=breaker/timeout=on", breaker.Config{}, bg},
		// A cancellable caller context without a deadline: a WithDeadline per call.
		{"impl=breaker/timeout=on-cancellable", breaker.Config{}, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			br := breaker.New("bench", bc.cfg)
			ctx, cancel := bc.ctx()
			defer cancel()
			for b.Loop() {
				v, _, err := breaker.Do(ctx, br, breaker.FailClosed, storeCall, nil)
				if err != nil {
					b.Fatal(err)
				}
				sink += v
			}
		})
	}
}

func bg() (context.Context, context.CancelFunc) { return context.Background(), func() {} }

// BenchmarkDoOpen measures a call answered by policy while the breaker is open:
// no store call, no network.
func BenchmarkDoOpen(b *testing.B) {
	for _, p := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen, breaker.FailLocal} {
		b.Run("policy="+p.String(), func(b *testing.B) {
			b.ReportAllocs()
			br := breaker.New("bench", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Hour, Logger: discard})
			ctx := context.Background()
			breaker.Do(ctx, br, breaker.FailOpen, func(context.Context) (int, error) { return 0, errRefused }, nil)
			if s := br.State(); s != breaker.StateOpen {
				b.Fatalf("State() = %v, want open", s)
			}
			for b.Loop() {
				v, _, _ := breaker.Do(ctx, br, p, storeCall, storeCall)
				sink += v
			}
		})
	}
}

// BenchmarkDoParallel is the success path under contention: one Breaker shared
// by every goroutine, as when many limiters share one Redis endpoint.
func BenchmarkDoParallel(b *testing.B) {
	b.ReportAllocs()
	br := breaker.New("bench", breaker.Config{CallTimeout: -1})
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			breaker.Do(ctx, br, breaker.FailClosed, storeCall, nil)
		}
	})
}
