package bench

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
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
// Target: impl=floodgate-limiter: ns/op ≤ 1× impl=xtime;
// impl=floodgate-limiter: ns/op ≤ 1× impl=failsafe-smooth;
// impl=floodgate-limiter: ns/op ≤ 1× impl=uber; impl=floodgate-limiter:
// allocs/op = 0.
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

// BenchmarkKeyedMeter: one keyed rate limiter over 1M distinct 24-byte keys
// (10 per hour, burst 10, so every key stays live), for each in-process store a
// user would pick: floodgate's shaper.Meter, sethvargo/go-limiter's memorystore
// (a token bucket per key behind one RWMutex'd map) and throttled's GCRA over its
// memstore (no key bound, so no LRU). The keys are visited through an index
// slice, the same for every implementation: in creation order
// (order=sequential), in a random permutation of the 1M keys (order=random, a
// fixed seed), or cycling over the first 4096 (order=hot4k: a hot working set
// inside a 1M-key store). The index slice is read in order, so its own cost is
// a prefetched load, equal for all. In the random order every call misses the
// CPU caches, on the key as well as on the store's state: its cost is the
// machine's memory latency (see BenchmarkMemoryLatency), not the limiter's
// arithmetic. impl=floor is the part of it that is the harness's own: the
// index, the key (a miss in the random order: the string header, then its
// bytes), a hash of it and a clock read. B/key is the heap growth from creating
// the keys' state divided by the key count; each key is created from a fresh
// copy of the caller's string, as a server's request keys are, so a store that
// keeps the caller's string and one that copies it both pay for the 24 key
// bytes once. Target: impl=floodgate: B/key ≤ 128.
func BenchmarkKeyedMeter(b *testing.B) {
	const nkeys = 1 << 20
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:%010d:export", i)
	}
	if len(keys[0]) != 24 {
		b.Fatalf("key length %d", len(keys[0]))
	}
	ctx := context.Background()
	// perKey creates every key's state with allow and returns the heap growth
	// per key.
	perKey := func(create func() func(key string)) (func(key string), float64) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allow := create()
		for _, k := range keys {
			allow(strings.Clone(k))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		return allow, (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / nkeys
	}
	var fg *shaper.Meter
	fgAllow, fgKey := perKey(func() func(string) {
		fg = shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(10), Burst: 10})
		return func(k string) { fg.Allow(k) }
	})
	var sv limiter.Store
	svAllow, svKey := perKey(func() func(string) {
		var err error
		sv, err = memorystore.New(&memorystore.Config{Tokens: 10, Interval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return func(k string) { sv.Take(ctx, k) }
	})
	defer sv.Close(ctx)
	thAllow, thKey := perKey(func() func(string) {
		st, err := memstore.NewCtx(0)
		if err != nil {
			b.Fatal(err)
		}
		th, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerHour(10), MaxBurst: 9})
		if err != nil {
			b.Fatal(err)
		}
		return func(k string) { th.RateLimitCtx(ctx, k, 1) }
	})

	perm := rand.New(rand.NewPCG(1, 2)).Perm(nkeys)
	orders := []struct {
		name string
		idx  []uint32
	}{{"hot4k", make([]uint32, 4096)}, {"sequential", make([]uint32, nkeys)}, {"random", make([]uint32, nkeys)}}
	for i := range orders[0].idx {
		orders[0].idx[i] = uint32(i)
	}
	for i := range orders[1].idx {
		orders[1].idx[i] = uint32(i)
		orders[2].idx[i] = uint32(perm[i])
	}
	for _, order := range orders {
		idx, mask := order.idx, len(order.idx)-1
		for _, impl := range []struct {
			name   string
			allow  func(string)
			perKey float64
		}{{"floodgate", fgAllow, fgKey}, {"sethvargo", svAllow, svKey}, {"throttled", thAllow, thKey}} {
			b.Run("impl="+impl.name+"/order="+order.name, func(b *testing.B) {
				allow, i := impl.allow, 0
				b.ReportAllocs()
				for b.Loop() {
					allow(keys[idx[i]])
					i = (i + 1) & mask
				}
				b.ReportMetric(impl.perKey, "B/key")
			})
		}
		// The floor of any keyed limiter in this harness: the index, the
		// caller's key, a hash of it and a clock read.
		b.Run("impl=floor/order="+order.name, func(b *testing.B) {
			seed := maphash.MakeSeed()
			start := time.Now()
			var sum uint64
			i := 0
			for b.Loop() {
				sum += maphash.String(seed, keys[idx[i]]) + uint64(time.Since(start))
				i = (i + 1) & mask
			}
			sinkU = sum
		})
	}
	runtime.KeepAlive(fg)
}

var sinkU uint64

// BenchmarkShaperAccuracy: a single worker loop paced at each rate for 300ms of real
// time; reports achieved/target. A loop over floodgate's Queue.Wait beside uber's
// Take (which sleeps per item, with its default slack of 10). The Queue runs with
// no burst and with a burst of 10ms worth of items, which absorbs the loop's own
// stalls (being descheduled on a busy machine), which GCRA does not credit
// otherwise. At 1M/s impl=floor paces the same loop with no burst by spinning
// on the clock (GCRA with no sleep, so no wake-up is ever late, and no credit):
// what a pacer without burst can achieve for a loop that spends time of its
// own between items (at 1M/s the interval is 1µs, and every stall of the loop
// beyond it is lost), the floor of impl=floodgate-queue/rate=1000000/burst=0.
// Run with -benchtime=1x. Target: impl=floodgate-queue:
// achieved/target ≥ 0.99; impl=floodgate-queue: achieved/target ≤ 1.01.
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
		if r == 1_000_000 {
			b.Run("impl=floor/rate="+strconv.Itoa(r)+"/burst=0", func(b *testing.B) {
				var sum float64
				for b.Loop() {
					sum += paced(r, 0, spinPaced(r))
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

// spinPaced returns a loop that paces fn at r a second with no burst by
// spinning on the clock: each item's slot is the previous one's plus the
// interval, or now if that has passed (GCRA, τ = 0).
func spinPaced(r int) func(ctx context.Context, fn func()) {
	return func(ctx context.Context, fn func()) {
		interval := time.Second / time.Duration(r)
		base := time.Now()
		var tat time.Duration
		for ctx.Err() == nil {
			now := time.Since(base)
			tat = max(tat, now)
			for now < tat {
				now = time.Since(base)
			}
			tat += interval
			fn()
		}
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
