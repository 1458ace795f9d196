package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/internal/servertest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
)

// roundTrips counts round trips (commands and pipelines).
type roundTrips = redistest.RoundTrips

// redisClient returns a client for REDIS_ADDR with a round-trip counter, or skips.
func redisClient(b *testing.B) (*redis.Client, *roundTrips) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		servertest.Missing(b, "REDIS_ADDR is not set") // a failure under CI=true, a skip by hand
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DisableIdentity: true, PoolSize: 256})
	b.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		servertest.Missing(b, fmt.Sprintf("redis at %s: %v", addr, err))
	}
	rt := &roundTrips{}
	rdb.AddHook(rt)
	return rdb, rt
}

// redisProcessCPU returns the Redis process's CPU time (INFO cpu: user + sys),
// which also counts what commandstats leaves out: reading requests and writing
// replies, the part pipelining saves.
func redisProcessCPU(b *testing.B, rdb *redis.Client) time.Duration {
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// latencies is a fixed ring of per-call latencies (the last 1<<16), so that
// recording allocates nothing.
type latencies struct {
	i    atomic.Uint64
	ring [1 << 16]int64
}

func (l *latencies) add(d time.Duration) { l.ring[l.i.Add(1)&(1<<16-1)] = int64(d) }

func (l *latencies) report(b *testing.B) {
	n := min(l.i.Load(), 1<<16)
	if n == 0 {
		return
	}
	s := slices.Clone(l.ring[:n])
	slices.Sort(s)
	b.ReportMetric(float64(s[n*50/100])/1e3, "p50-µs")
	b.ReportMetric(float64(s[n*99/100])/1e3, "p99-µs")
}

// decider makes one decision for key; it reports whether it was admitted.
type decider func(ctx context.Context, key string) (bool, error)

// A trivial script for the EVALSHA floor: one key, four arguments, a
// four-integer reply, like a meter script.
var floorScript = redis.NewScript(`return {1, 0, 0, 0}`)

// benchRate and benchBurst make every call of the meter benchmarks admitted and
// written by every implementation: at 1e6/s each call moves the schedule by 1µs
// while calls are more than 1µs apart. (At 1e9/s redis_rate writes nothing: its
// float seconds since 2017 cannot hold a 1ns increment, so new_tat = now.)
const benchRate, benchBurst = 1_000_000, 1_000_000

// leaseRate is the rate of the lease benchmarks: high enough that the meter
// never limits a Lease serving millions of calls a second.
const leaseRate = 1_000_000_000

func redisImpls(b *testing.B, rdb *redis.Client, prefix string) []struct {
	name string
	d    decider
} {
	ctx := context.Background()
	if err := floorScript.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	lim := shaper.Limit{Rate: shaper.PerSecond(benchRate), Burst: benchBurst}
	fg := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: prefix + "fg:", Breaker: breaker.New("bench", breaker.Config{CallTimeout: time.Second})})
	fgBatch := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: prefix + "fgb:", Batch: true, Breaker: breaker.New("bench", breaker.Config{CallTimeout: time.Second})})
	rr := redis_rate.NewLimiter(rdb)
	rrLim := redis_rate.Limit{Rate: benchRate, Period: time.Second, Burst: benchBurst}
	st, err := goredisstore.NewCtx(rdb, prefix+"th:")
	if err != nil {
		b.Fatal(err)
	}
	th, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(benchRate), MaxBurst: benchBurst - 1})
	if err != nil {
		b.Fatal(err)
	}
	floorArgs := []any{"1000000", "1000000", "1000000", 1}
	return []struct {
		name string
		d    decider
	}{
		{"evalsha", func(ctx context.Context, key string) (bool, error) {
			err := rdb.EvalSha(ctx, floorScript.Hash(), []string{prefix + "floor:{" + key + "}"}, floorArgs...).Err()
			return err == nil, err
		}},
		{"floodgate", func(ctx context.Context, key string) (bool, error) {
			d, err := fg.AllowN(ctx, key, 1)
			return d.Allowed, err
		}},
		{"floodgate-batch", func(ctx context.Context, key string) (bool, error) {
			d, err := fgBatch.AllowN(ctx, key, 1)
			return d.Allowed, err
		}},
		{"redis_rate", func(ctx context.Context, key string) (bool, error) {
			r, err := rr.Allow(ctx, prefix+"rr:"+key, rrLim)
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		}},
		{"throttled", func(ctx context.Context, key string) (bool, error) {
			limited, _, err := th.RateLimitCtx(ctx, key, 1)
			return !limited, err
		}},
	}
}

// BenchmarkRedisMeter compares one rate-limit decision in Redis: floodgate's GCRA
// meter (plain, and with Batch: concurrent decisions sent together, here in one
// call of the batch script, as rdb is a *redis.Client) beside
// go-redis/redis_rate and throttled (GCRA, go-redis store), on the same Redis,
// with a bare EVALSHA of a trivial script as the floor. Every call is admitted
// and written (see benchRate). conc=1 is one goroutine; conc=32 and conc=128
// are goroutines calling at once (each on its own key). Metrics: ops/s, p50 and
// p99 latency, round trips per decision (a go-redis hook), Redis CPU µs per
// decision (INFO commandstats, each command once: redis-µs/op is the scripts
// in full and the commands the clients sent themselves, not a script's inner
// GET, SET and TIME again, see redisCPUOnce; script-µs/op the scripts alone;
// redis-proc-µs/op is the whole Redis process, INFO cpu, which includes
// request and reply I/O), and allocs/op (client side). Target:
// impl=floodgate: roundtrips/op = 1; impl=floodgate: redis-µs/op ≤ 0.85× impl=redis_rate;
// impl=floodgate/conc=32: ops/s ≥ 1× impl=redis_rate;
// impl=floodgate/conc=128: ops/s ≥ 1× impl=redis_rate;
// impl=floodgate-batch/conc=32: ops/s ≥ 1.75× impl=floodgate/conc=32.
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run='^$' -bench=RedisMeter -benchmem -count=5
func BenchmarkRedisMeter(b *testing.B) {
	rdb, rt := redisClient(b)
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	b.Cleanup(func() { deletePrefix(rdb, prefix) })
	impls := redisImpls(b, rdb, prefix)
	// By concurrency, then implementation: the cases compared with each other
	// run next to each other, on a machine whose load drifts.
	for _, conc := range []int{1, 32, 128} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/conc=%d", impl.name, conc), func(b *testing.B) {
				benchDecider(b, rdb, rt, impl.d, conc)
			})
		}
	}
}

func benchDecider(b *testing.B, rdb *redis.Client, rt *roundTrips, d decider, conc int) {
	ctx := context.Background()
	lat := new(latencies)
	b.ReportAllocs()
	if _, err := d(ctx, "warm"); err != nil {
		b.Fatal(err)
	}
	cpu := redisCPUOnce(b, rdb)
	rt0, proc0 := rt.N.Load(), redisProcessCPU(b, rdb)
	start := time.Now()
	var ops atomic.Int64
	if conc == 1 {
		for b.Loop() {
			t := time.Now()
			if _, err := d(ctx, "k"); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(t))
		}
		ops.Store(int64(b.N))
	} else {
		b.SetParallelism(max(1, conc/runtimeProcs()))
		var id atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			key := "k" + strconv.FormatInt(id.Add(1), 10)
			n := int64(0)
			for pb.Next() {
				t := time.Now()
				if _, err := d(ctx, key); err != nil {
					b.Error(err)
					return
				}
				lat.add(time.Since(t))
				n++
			}
			ops.Add(n)
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	usec := cpu.usec(b)
	rt1, proc1 := rt.N.Load(), redisProcessCPU(b, rdb)
	n := float64(ops.Load())
	b.ReportMetric(n/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(rt1-rt0-2)/n, "roundtrips/op") // -2: the INFO calls
	b.ReportMetric(float64(proc1-proc0)/1e3/n, "redis-proc-µs/op")
	b.ReportMetric(usec/n, "redis-µs/op")
	if cpu.script > 0 {
		b.ReportMetric(cpu.script/n, "script-µs/op")
	}
	lat.report(b)
}

func deletePrefix(rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pat := range []string{prefix + "*", "{" + prefix + "*"} {
		iter := rdb.Scan(ctx, 0, pat, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Unlink(ctx, iter.Val())
		}
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkRedisMeterScript compares the Redis CPU of one decision's script:
// each of floodgate's meters that reads a fixed amount of state (GCRA, token
// bucket, fixed window, sliding counter; the sliding log reads its whole list,
// O(Rate.Count)) beside go-redis/redis_rate v10 and the floor, a script that
// runs TIME, GET and SET and returns four integers (what a decision cannot do
// without), all on the same Redis, in rounds that alternate the
// implementations. The figure to compare is script-µs/op: EVALSHA's usec in
// INFO commandstats per decision, which holds the script's inner commands
// once (redis-µs/op also counts them once: see redisCPUOnce).
// Every call is admitted and written (see benchRate); conc as in
// BenchmarkRedisMeter. Run it against a Redis of its own: commandstats is
// Redis-wide.
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run='^$' -bench=RedisMeterScript -count=5
func BenchmarkRedisMeterScript(b *testing.B) {
	rdb, rt := redisClient(b)
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	b.Cleanup(func() { deletePrefix(rdb, prefix) })
	ctx := context.Background()
	brk := breaker.New("bench", breaker.Config{CallTimeout: time.Second})
	lim := shaper.Limit{Rate: shaper.PerSecond(benchRate), Burst: benchBurst}
	win := shaper.Limit{Rate: shaper.PerSecond(benchRate)}
	meter := func(name string, m *shaperredis.Meter) struct {
		name string
		d    decider
	} {
		return struct {
			name string
			d    decider
		}{name, func(ctx context.Context, key string) (bool, error) {
			d, err := m.AllowN(ctx, key, 1)
			return d.Allowed, err
		}}
	}
	if err := floorTimeGetSet.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(rdb)
	rrLim := redis_rate.Limit{Rate: benchRate, Period: time.Second, Burst: benchBurst}
	impls := []struct {
		name string
		d    decider
	}{
		{"floor", func(ctx context.Context, key string) (bool, error) {
			err := rdb.EvalSha(ctx, floorTimeGetSet.Hash(), []string{prefix + "floor:{" + key + "}"}, "1000000", "1000000", "1000000", 1).Err()
			return err == nil, err
		}},
		{"redis_rate", func(ctx context.Context, key string) (bool, error) {
			r, err := rr.Allow(ctx, prefix+"rr:"+key, rrLim)
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		}},
		meter("gcra", shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: prefix + "gcra:", Breaker: brk})),
		meter("tokenbucket", shaperredis.NewTokenBucket(rdb, lim, shaperredis.Config{Prefix: prefix + "tb:", Breaker: brk})),
		meter("fixedwindow", shaperredis.NewFixedWindow(rdb, win, shaperredis.Config{Prefix: prefix + "fw:", Breaker: brk})),
		meter("slidingcounter", shaperredis.NewSlidingCounter(rdb, win, shaperredis.Config{Prefix: prefix + "sc:", Breaker: brk})),
	}
	for _, conc := range []int{1, 32, 128} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("conc=%d/impl=%s", conc, impl.name), func(b *testing.B) {
				benchDecider(b, rdb, rt, impl.d, conc)
			})
		}
	}
}

// floorTimeGetSet is the floor of BenchmarkRedisMeterScript: what any
// decision in Redis runs (the time, the state read, the state written with a
// TTL) and a four-integer reply, with no arithmetic.
var floorTimeGetSet = redis.NewScript(`local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], t[2], 'PX', 60000)
return {1, 0, 0, 0}`)

// BenchmarkRedisLease compares token leasing with per-request decisions on the
// same Redis: impl=lease serves calls from a Lease (batches of 1000 tokens,
// refilled in the background at 250 left, ExhaustWait), impl=per-request asks
// Redis for every call. Target: impl=lease: ops/s ≥ 10× impl=per-request.
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run='^$' -bench=RedisLease -benchmem -count=5
func BenchmarkRedisLease(b *testing.B) {
	rdb, rt := redisClient(b)
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	b.Cleanup(func() { deletePrefix(rdb, prefix) })
	lim := shaper.Limit{Rate: shaper.PerSecond(leaseRate), Burst: 1000}
	m := shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: prefix, Breaker: breaker.New("bench", breaker.Config{CallTimeout: time.Second})})
	for _, conc := range []int{1, 32, 128} {
		b.Run(fmt.Sprintf("impl=per-request/conc=%d", conc), func(b *testing.B) {
			benchDecider(b, rdb, rt, func(ctx context.Context, key string) (bool, error) {
				d, err := m.AllowN(ctx, key, 1)
				return d.Allowed, err
			}, conc)
		})
		b.Run(fmt.Sprintf("impl=lease/conc=%d", conc), func(b *testing.B) {
			l := m.Lease("lease", shaperredis.LeaseConfig{Batch: 1000, LowWater: 250, Exhaustion: shaperredis.ExhaustWait, MaxWait: time.Second, Expiry: -1})
			defer l.Close()
			benchDecider(b, rdb, rt, func(ctx context.Context, _ string) (bool, error) {
				err := l.Wait(ctx, 1)
				if errors.Is(err, shaper.ErrLimited) {
					return false, nil // a waiter that lost every race for MaxWait (see Lease)
				}
				return err == nil, err
			}, conc)
			if st := l.Stats(); st.Errors > 0 {
				b.Errorf("lease stats: %+v", st)
			} else {
				b.ReportMetric(float64(st.Rejected)/float64(st.Served+st.Rejected), "rejected/op")
			}
		})
	}
}
