package bench

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/semaphore"
)

// BenchmarkOtelSemaphore: the admitted path of a semaphore with
// otelfloodgate's Observer attached and without. Target: metrics=otel: ns/op ≤
// 1.10× (metrics=none + BenchmarkOtelObserve); metrics=otel: allocs/op = 0.
func BenchmarkOtelSemaphore(b *testing.B) {
	for _, attached := range []bool{false, true} {
		name := "metrics=none"
		if attached {
			name = "metrics=otel"
		}
		b.Run(name, func(b *testing.B) {
			cfg := semaphore.Config{}
			if attached {
				m, stop := otelMetrics(b)
				defer stop()
				cfg.Observer = m.Observer("db")
			}
			s := semaphore.New(1, cfg)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				s.Release(1)
			}
		})
	}
}
