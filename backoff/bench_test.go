package backoff_test

import (
	"context"
	"testing"

	"github.com/floodgate-go/floodgate/backoff"
)

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.Run("impl=bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fn(ctx)
		}
	})
	b.Run("impl=backoff", func(b *testing.B) {
		c := backoff.New(backoff.Config{})
		b.ReportAllocs()
		for b.Loop() {
			c.Do(ctx, fn)
		}
	})
	b.Run("impl=backoff/parallel", func(b *testing.B) {
		c := backoff.New(backoff.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Do(ctx, fn)
			}
		})
	})
}
