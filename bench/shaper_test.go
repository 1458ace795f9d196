package bench

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/floodgate-go/floodgate/shaper"
)

// A rate no benchmark loop can exhaust, so every implementation takes its allow path.
const hugeRate = 1_000_000_000

var hugeLimit = shaper.Limit{Rate: shaper.PerSecond(hugeRate), Burst: hugeRate}

// wholeLimit is as inexhaustible for a benchmark loop, but its emission interval is a
// whole number of microseconds (1µs), like most real limits (n/s for n dividing 1e6,
// n/min for n dividing 6e7): GCRA then takes its division-free path. hugeLimit's
// interval is a fraction of a µs, which costs GCRA one division per call.
var wholeLimit = shaper.Limit{Rate: shaper.PerSecond(1_000_000), Burst: hugeRate}

// BenchmarkRateAllow: the allow path of each local rate limiter, one goroutine, real
// clock. floodgate's Meter and TokenBucket are keyed (one key here); its Limiter and
// the peers are single limiters.
// uber's Take never sleeps at this rate, so it measures its bookkeeping.
func BenchmarkRateAllow(b *testing.B) {
	b.Run("impl=floodgate-gcra", func(b *testing.B) {
		m := shaper.NewMeter(wholeLimit)
		b.ReportAllocs()
		for b.Loop() {
			m.Allow("k")
		}
	})
	b.Run("impl=floodgate-gcra-fractional", func(b *testing.B) {
		m := shaper.NewMeter(hugeLimit)
		b.ReportAllocs()
		for b.Loop() {
			m.Allow("k")
		}
	})
	b.Run("impl=floodgate-limiter", func(b *testing.B) {
		l := shaper.NewLimiter(wholeLimit)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=floodgate-limiter-fractional", func(b *testing.B) {
		l := shaper.NewLimiter(hugeLimit)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=floodgate-tokenbucket", func(b *testing.B) {
		m := shaper.NewTokenBucket(hugeLimit)
		b.ReportAllocs()
		for b.Loop() {
			m.Allow("k")
		}
	})
	b.Run("impl=xtime", func(b *testing.B) {
		l := rate.NewLimiter(hugeRate, hugeRate)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow()
		}
	})
	b.Run("impl=failsafe-smooth", func(b *testing.B) {
		l := ratelimiter.NewSmooth[any](hugeRate, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			l.TryAcquirePermit()
		}
	})
	b.Run("impl=uber", func(b *testing.B) {
		l := ratelimit.New(hugeRate)
		b.ReportAllocs()
		for b.Loop() {
			l.Take()
		}
	})
}

// BenchmarkRateAllowContended: every goroutine on one key (throttled's in-memory GCRA
// fails 0.3–0.6% of such calls). Fails if any call returns an error.
func BenchmarkRateAllowContended(b *testing.B) {
	b.Run("impl=floodgate-gcra", func(b *testing.B) {
		m := shaper.NewMeter(wholeLimit)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Allow("k")
			}
		})
	})
	// The full Decision (remaining, retry-after, reset-after), counting errors.
	b.Run("impl=floodgate-gcra-allown", func(b *testing.B) {
		m := shaper.NewMeter(wholeLimit)
		var errs atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := m.AllowN("k", 1); err != nil {
					errs.Add(1)
				}
			}
		})
		if n := errs.Load(); n != 0 {
			b.Fatalf("%d errors under contention", n)
		}
	})
	b.Run("impl=floodgate-limiter", func(b *testing.B) {
		l := shaper.NewLimiter(wholeLimit)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
	b.Run("impl=floodgate-limiter-allown", func(b *testing.B) {
		l := shaper.NewLimiter(wholeLimit)
		var errs atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.AllowN(1); err != nil {
					errs.Add(1)
				}
			}
		})
		if n := errs.Load(); n != 0 {
			b.Fatalf("%d errors under contention", n)
		}
	})
	b.Run("impl=floodgate-limiter-fractional", func(b *testing.B) {
		l := shaper.NewLimiter(hugeLimit)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
	b.Run("impl=xtime", func(b *testing.B) {
		l := rate.NewLimiter(hugeRate, hugeRate)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
	b.Run("impl=failsafe-smooth", func(b *testing.B) {
		l := ratelimiter.NewSmooth[any](hugeRate, time.Second)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.TryAcquirePermit()
			}
		})
	})
}

// BenchmarkKeyedMeter: one GCRA meter over 1M distinct 24-byte keys, visited in
// creation order (order=sequential), with a large odd stride (order=scattered),
// or cycling over 4096 of them (order=hot4k: a hot working set inside a 1M-key
// meter). The first two miss the CPU caches on nearly every call: their cost is
// the machine's memory latency (see BenchmarkMemoryLatency), not the meter's
// arithmetic. impl=floor is the part of it that is the harness's own. B/key is the heap growth from creating
// the keys' state divided by the key count; the meter keeps its own copy of each
// key, so it includes the 24 key bytes.
func BenchmarkKeyedMeter(b *testing.B) {
	const nkeys = 1 << 20
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:%010d:export", i)
	}
	if len(keys[0]) != 24 {
		b.Fatalf("key length %d", len(keys[0]))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(10), Burst: 10}) // keys stay live
	for _, k := range keys {
		m.Allow(k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := float64(after.HeapAlloc-before.HeapAlloc) / nkeys
	for _, order := range []struct {
		name         string
		stride, mask int
	}{{"hot4k", 1, 4095}, {"sequential", 1, nkeys - 1}, {"scattered", 786433, nkeys - 1}} {
		b.Run("impl=floodgate/order="+order.name, func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				m.Allow(keys[i])
				i = (i + order.stride) & order.mask
			}
			b.ReportMetric(perKey, "B/key")
		})
		// The floor of any keyed meter in this harness: read the clock and hash
		// the caller's key, which in the scattered order is itself a cache miss
		// (two: the string header in keys, then its bytes).
		b.Run("impl=floor/order="+order.name, func(b *testing.B) {
			seed := maphash.MakeSeed()
			start := time.Now()
			var sum uint64
			i := 0
			for b.Loop() {
				sum += maphash.String(seed, keys[i]) + uint64(time.Since(start))
				i = (i + order.stride) & order.mask
			}
			sinkU = sum
		})
	}
	runtime.KeepAlive(m)
}

var sinkU uint64

// BenchmarkShaperAccuracy: a single worker loop paced at each rate for 300ms of real
// time; reports achieved/target. A loop over floodgate's Queue.Wait beside uber's
// Take (which sleeps per item, with its default slack of 10). The Queue runs with
// no burst and with a burst of 10ms worth of items, which absorbs the loop's own
// stalls (being descheduled on a busy machine), which GCRA does not credit
// otherwise. Run with -benchtime=1x.
func BenchmarkShaperAccuracy(b *testing.B) {
	for _, r := range []int{1_000, 10_000, 100_000, 1_000_000} {
		for _, burst := range []int64{0, int64(r) / 100} {
			name := "impl=floodgate-queue/rate=" + strconv.Itoa(r) + "/burst=" + strconv.FormatInt(burst, 10)
			b.Run(name, func(b *testing.B) {
				var sum float64
				for b.Loop() {
					q := shaper.NewQueue(shaper.PerSecond(int64(r)), shaper.QueueConfig{Burst: burst})
					sum += paced(r, burst, func(ctx context.Context, fn func()) {
						for q.Wait(ctx, 1) == nil {
							fn()
						}
					})
					q.Close()
				}
				b.ReportMetric(sum/float64(b.N), "achieved/target")
			})
		}
		b.Run("impl=uber/rate="+strconv.Itoa(r), func(b *testing.B) {
			var sum float64
			for b.Loop() {
				l := ratelimit.New(r)
				sum += paced(r, 0, func(ctx context.Context, fn func()) {
					for ctx.Err() == nil {
						l.Take()
						fn()
					}
				})
			}
			b.ReportMetric(sum/float64(b.N), "achieved/target")
		})
	}
}

// paced runs loop for 300ms; loop calls fn once per item. It returns the achieved
// long-run rate over r: the items after the first, less the initial burst, over the
// time from the first item to the last.
func paced(r int, burst int64, loop func(ctx context.Context, fn func())) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var n int64
	var first, last time.Time
	loop(ctx, func() {
		last = time.Now()
		if n == 0 {
			first = last
		}
		n++
	})
	return float64(n-1-max(burst-1, 0)) / last.Sub(first).Seconds() / float64(r)
}
