package shaper_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/shaper"
)

// A limit no benchmark loop can exhaust, so every call takes the allow path.
var benchLimit = shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: 1_000_000}

// BenchmarkAllow compares the allow path of the GCRA meter and the token bucket (one
// key, real clock) and of the unkeyed GCRA Limiter with x/time/rate's Limiter.Allow
// in the same run.
func BenchmarkAllow(b *testing.B) {
	b.Run("impl=gcra", func(b *testing.B) {
		m := shaper.NewMeter(benchLimit)
		b.ReportAllocs()
		for b.Loop() {
			m.Allow("k")
		}
	})
	b.Run("impl=tokenbucket", func(b *testing.B) {
		m := shaper.NewTokenBucket(benchLimit)
		b.ReportAllocs()
		for b.Loop() {
			m.Allow("k")
		}
	})
	b.Run("impl=limiter", func(b *testing.B) {
		l := shaper.NewLimiter(benchLimit)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=xtime", func(b *testing.B) {
		l := rate.NewLimiter(1_000_000, 1_000_000)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
}

// BenchmarkAllowParallel: every goroutine on one key.
func BenchmarkAllowParallel(b *testing.B) {
	b.Run("impl=gcra", func(b *testing.B) {
		m := shaper.NewMeter(benchLimit)
		var errs atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := m.AllowN("k", 1); err != nil {
					errs.Add(1)
				}
			}
		})
		if errs.Load() != 0 {
			b.Fatalf("%d errors", errs.Load())
		}
	})
	b.Run("impl=limiter", func(b *testing.B) {
		l := shaper.NewLimiter(benchLimit)
		var errs atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.AllowN(1); err != nil {
					errs.Add(1)
				}
			}
		})
		if errs.Load() != 0 {
			b.Fatalf("%d errors", errs.Load())
		}
	})
	b.Run("impl=xtime", func(b *testing.B) {
		l := rate.NewLimiter(1_000_000, 1_000_000)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
}

// BenchmarkAllowAt is the pure decision with a caller-supplied time, without the
// clock read, for each algorithm.
func BenchmarkAllowAt(b *testing.B) {
	for _, name := range []string{"Meter", "TokenBucket", "FixedWindow", "SlidingCounter", "SlidingLog"} {
		b.Run("algo="+name, func(b *testing.B) {
			lim := benchLimit
			if name == "FixedWindow" || name == "SlidingCounter" || name == "SlidingLog" {
				lim = shaper.Limit{Rate: shaper.Rate{Count: 1000, Period: time.Millisecond}}
			}
			m := meterMakers[name](lim)
			at := t0
			b.ReportAllocs()
			for b.Loop() {
				at = at.Add(time.Microsecond)
				m.AllowNAt("k", at, 1)
			}
		})
	}
}

// BenchmarkQueueWaitFast is a Wait that is due at once (the common case of a queue
// that is not backlogged).
func BenchmarkQueueWaitFast(b *testing.B) {
	q := shaper.NewQueue(shaper.PerSecond(1e9), shaper.QueueConfig{Burst: 1e9})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		q.Wait(ctx, 1)
	}
}

// The 1M-key meter and the Queue's accuracy from 1k/s to 1M/s are measured in
// bench/shaper_test.go, beside the peer libraries.
