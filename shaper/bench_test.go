package shaper_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/shaper"
)

// A limit no benchmark loop can exhaust, so every call takes the allow path.
var benchLimit = shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: 1_000_000}

// BenchmarkAllow compares the allow path of the GCRA meter and the token bucket (one
// key, real clock) with x/time/rate's Limiter.Allow in the same run.
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

// BenchmarkKeyed: a GCRA meter over 1M distinct 24-byte keys, visited in a scattered
// order. Reports bytes of heap per key (including the key) after the keys exist.
func BenchmarkKeyed(b *testing.B) {
	const nkeys = 1 << 20
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:%010d:export", i) // 24 bytes
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10})
	for _, k := range keys {
		m.Allow(k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := float64(after.HeapAlloc-before.HeapAlloc)/nkeys + 24 // keys are cloned; +24 counts the caller's copy too? see below
	_ = perKey
	stored := float64(after.HeapAlloc-before.HeapAlloc) / nkeys
	b.ResetTimer()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Allow(keys[i])
		i = (i + 786433) & (nkeys - 1) // a large odd stride: scattered, all keys
	}
	b.ReportMetric(stored, "B/key")
	runtime.KeepAlive(keys)
}

// BenchmarkQueueWaitFast is a Wait that is due at once (the common case of a queue
// that is not backlogged).
func BenchmarkQueueWaitFast(b *testing.B) {
	q := shaper.NewQueue(shaper.PerSecond(1e9), shaper.Config{Burst: 1e9})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		q.Wait(ctx, 1)
	}
}

// BenchmarkQueueAccuracy runs a Run loop at each rate and reports achieved/target.
// Real time: run it with -benchtime=1x (each case takes about 300ms).
func BenchmarkQueueAccuracy(b *testing.B) {
	for _, r := range []int64{1_000, 10_000, 100_000, 1_000_000} {
		b.Run("rate="+strconv.FormatInt(r, 10), func(b *testing.B) {
			var sum float64
			for b.Loop() {
				sum += queueAccuracy(r, 300*time.Millisecond)
			}
			b.ReportMetric(sum/float64(b.N), "achieved/target")
		})
	}
}

// queueAccuracy returns the rate achieved by one Run loop over d, divided by r.
func queueAccuracy(r int64, d time.Duration) float64 {
	q := shaper.NewQueue(shaper.PerSecond(r), shaper.Config{})
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n int64
	var first, last time.Time
	q.Run(ctx, 1, func(context.Context) error {
		if n == 0 {
			first = time.Now()
		}
		n++
		return nil
	})
	last = time.Now()
	// n items released; the first at first, the last no later than last.
	return float64(n-1) / last.Sub(first).Seconds() / float64(r)
}
