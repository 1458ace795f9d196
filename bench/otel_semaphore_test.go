package bench

import (
	"context"
	"testing"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/semaphore"
)

// BenchmarkOtelSemaphore: the admitted path of a semaphore with
// otelfloodgate's Observer attached (metrics=otel) and without
// (metrics=none); metrics=inline is the floor of reporting through an
// Observer: a semaphore without one, and the loop itself building the two
// Events the semaphore would and passing them to otelfloodgate's Observer
// (what BenchmarkOtelObserve does with two Events built once). Target:
// metrics=otel: ns/op ≤ 1.10× (metrics=none + BenchmarkOtelObserve);
// metrics=otel: allocs/op = 0.
func BenchmarkOtelSemaphore(b *testing.B) {
	for _, name := range []string{"metrics=none", "metrics=otel", "metrics=inline"} {
		b.Run(name, func(b *testing.B) {
			cfg := semaphore.Config{}
			var o floodgate.Observer
			if name != "metrics=none" {
				m, stop := otelMetrics(b)
				defer stop()
				o = m.Observer("db")
			}
			if name == "metrics=otel" {
				cfg.Observer = o
			}
			s := semaphore.New(1, cfg)
			ctx := context.Background()
			b.ReportAllocs()
			if name == "metrics=inline" {
				for b.Loop() {
					if err := s.Acquire(ctx, 1); err != nil {
						b.Fatal(err)
					}
					o.Observe(floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 1})
					s.Release(1)
					o.Observe(floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentSemaphore, N: 1})
				}
				return
			}
			for b.Loop() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				s.Release(1)
			}
		})
	}
}
