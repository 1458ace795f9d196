package bench

import (
	"context"
	"encoding"
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// The distsem benchmarks run against a private redis-server child (so that
// other tests cannot skew the Redis CPU figures). Round trips are counted with a
// go-redis hook: every command or pipeline sent is one round trip. Acquire
// calls are told apart by their arguments (isAcquire).

type rttCounter struct {
	all, acquire atomic.Int64
}

func (c *rttCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rttCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.all.Add(1)
		if isAcquire(cmd) {
			c.acquire.Add(1)
		}
		return next(ctx, cmd)
	}
}

// isAcquire reports whether cmd is a distsem acquire call (see distsem's
// lua/head.lua): EVALSHA or EVAL, the script, 6 keys and 2 ARGV, the second
// the call's numbers with a weight (n8, at least 1) in its eighth (a release
// also has 2, with n8 0; a renewal has 4). TestIsAcquire holds it to
// distsem's calls.
func isAcquire(cmd redis.Cmder) bool {
	a := cmd.Args()
	if name := cmd.Name(); (name != "evalsha" && name != "eval") || len(a) != 3+6+2 {
		return false
	}
	m, ok := a[len(a)-1].(encoding.BinaryMarshaler)
	if !ok {
		return false
	}
	b, err := m.MarshalBinary()
	return err == nil && len(b) >= 64 && math.Float64frombits(binary.LittleEndian.Uint64(b[56:])) >= 1
}

func (c *rttCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.all.Add(1)
		return next(ctx, cmds)
	}
}

func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// benchServer starts a private redis-server for a distsem benchmark (INFO
// commandstats and cpu are Redis-wide) and returns its address, a client and
// the client's round-trip counter. With BENCH_PRIVATE_REDIS_ADDR set it uses
// that server instead, which must be as private: the report's callgrind pass
// runs one under valgrind (see report/callgrind.go).
func benchServer(b *testing.B) (string, *redis.Client, *rttCounter) {
	addr := os.Getenv("BENCH_PRIVATE_REDIS_ADDR")
	if addr == "" {
		addr = redistest.Start(b).Addr
	}
	opt := redistest.Options(addr)
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { rdb.Close() })
	c := &rttCounter{}
	rdb.AddHook(c)
	return addr, rdb, c
}

// BenchmarkDistsemRoundTrips: round trips per uncontended Acquire and per
// Release. Target: rtt/acquire = 1; rtt/release = 1.
func BenchmarkDistsemRoundTrips(b *testing.B) {
	_, rdb, c := benchServer(b)
	s := distsem.New(rdb, "rtt", 1<<20, distsem.Config{})
	defer s.Close()
	ctx := context.Background()
	if p, err := s.Acquire(ctx, 1); err == nil { // load the scripts
		p.Release(ctx)
	}
	var acq, rel int64
	for b.Loop() {
		n0 := c.all.Load()
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		n1 := c.all.Load()
		if err := p.Release(ctx); err != nil {
			b.Fatal(err)
		}
		acq += n1 - n0
		rel += c.all.Load() - n1
	}
	b.ReportMetric(float64(acq)/float64(b.N), "rtt/acquire")
	b.ReportMetric(float64(rel)/float64(b.N), "rtt/release")
}

// BenchmarkDistsemPair: one Acquire+Release pair, sequentially, beside a bare
// EVALSHA round trip of a trivial script on the same server. The pair is two
// round trips, so it costs at least two EVALSHAs. Its Redis CPU is held to
// GCRA decisions by BenchmarkDistsemScriptCPU; this row only shows the time.
func BenchmarkDistsemPair(b *testing.B) {
	_, rdb, _ := benchServer(b)
	ctx := context.Background()
	b.Run("impl=evalsha", func(b *testing.B) {
		sc := redis.NewScript("return 1")
		sc.Load(ctx, rdb)
		for b.Loop() {
			if err := sc.EvalSha(ctx, rdb, []string{"{x}"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=distsem", func(b *testing.B) {
		s := distsem.New(rdb, "pair", 1<<20, distsem.Config{})
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(ctx)
		}
	})
}

// BenchmarkDistsemParallel: Acquire+Release pairs from 32 goroutines with no
// contention for permits (limit 1<<20), reported as pairs/s and as pairs per
// Redis CPU second ("per core": Redis runs scripts on one thread), beside two
// bare EVALSHA calls of a trivial script per op from the same 32 goroutines (the
// ceiling for two round trips on this machine). Redis CPU per pair is
// reported here and held to GCRA decisions by BenchmarkDistsemScriptCPU.
func BenchmarkDistsemParallel(b *testing.B) {
	_, rdb, _ := benchServer(b)
	ctx := context.Background()
	par := max(1, 32/max(1, runtime.GOMAXPROCS(0)))
	measure := func(b *testing.B, op func() error) {
		cpu0 := redisCPU(b, rdb)
		start := time.Now()
		b.SetParallelism(par)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		el := time.Since(start)
		cpu := redisCPU(b, rdb) - cpu0
		b.ReportMetric(float64(b.N)/el.Seconds(), "pairs/s")
		if cpu > 0 {
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "pairs/redis-cpu-s")
		}
	}
	b.Run("impl=evalsha2", func(b *testing.B) {
		sc := redis.NewScript("return 1")
		sc.Load(ctx, rdb)
		measure(b, func() error {
			if err := sc.EvalSha(ctx, rdb, []string{"{x}"}).Err(); err != nil {
				return err
			}
			return sc.EvalSha(ctx, rdb, []string{"{x}"}).Err()
		})
	})
	b.Run("impl=distsem", func(b *testing.B) {
		s := distsem.New(rdb, "par", 1<<20, distsem.Config{})
		defer s.Close()
		measure(b, func() error {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		})
	})
}

// BenchmarkDistsemContended: 32 goroutines in 4 simulated processes (own
// clients) share a limit of 4, each holding its permit ~1ms. Reports acquire
// script calls per grant (each waiter is granted by hand-off and claims with
// one call), grants/s and grants per Redis CPU second, and the
// p50/p99 wait beside the wait of an
// ideal FIFO queue with the same hold times (32 callers over 4 permits: each
// waits for 7 holds of the 8 in a round, 28/4 = 7 × hold).
// Target: acquire-calls/grant ≤ 1.2.
func BenchmarkDistsemContended(b *testing.B) {
	addr, rdb, c := benchServer(b)
	const procs, per, limit = 4, 8, 4
	const hold = time.Millisecond
	sems := make([]*distsem.Semaphore, procs)
	for i := range sems {
		cl := redis.NewClient(redistest.Options(addr))
		cl.AddHook(c)
		defer cl.Close()
		sems[i] = distsem.New(cl, "cont", limit, distsem.Config{})
		defer sems[i].Close()
	}
	ctx := context.Background()
	c.acquire.Store(0)
	cpu0 := redisCPU(b, rdb)
	var left atomic.Int64
	left.Store(int64(b.N))
	var mu sync.Mutex
	var waits []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range procs * per {
		wg.Go(func() {
			s := sems[i%procs]
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				time.Sleep(hold)
				p.Release(ctx)
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(waits)
	if len(waits) == 0 {
		return
	}
	b.ReportMetric(float64(c.acquire.Load())/float64(len(waits)), "acquire-calls/grant")
	b.ReportMetric(float64(len(waits))/el.Seconds(), "grants/s")
	if cpu := redisCPU(b, rdb) - cpu0; cpu > 0 {
		b.ReportMetric(float64(len(waits))/cpu.Seconds(), "grants/redis-cpu-s")
	}
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-wait-ms")
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-wait-ms")
	// Ideal FIFO: every caller waits for (callers - limit) / limit holds. The
	// real hold is longer than `hold` (sleep granularity + release time), so
	// use the measured mean hold: elapsed × limit / grants.
	meanHold := time.Duration(float64(el) * limit / float64(len(waits)))
	b.ReportMetric(float64((procs*per-limit)/limit)*float64(meanHold.Microseconds())/1000, "ideal-fifo-wait-ms")
}

// BenchmarkDistsemScriptCPU: Redis script CPU (µs of evalsha in INFO
// commandstats, each script call counted once) per operation, on a private
// redis-server, all in one run so that they compare:
//   - impl=evalsha: a trivial script with the shape of an acquire call (6
//     keys, 2 arguments, the token and its 8 numbers packed with the notify
//     id and channel prefix, a 7-integer reply packed as the scripts send
//     it), the floor of one script call;
//   - impl=gcra: one decision of shaperredis.NewMeter (GCRA), admitted and
//     written;
//   - impl=floor-pair: the commands the pair's two scripts make, with
//     their arguments, in two script calls with no other Lua: the floor of
//     the pair with the keys it keeps;
//   - impl=floodgate-pair: one uncontended Acquire+Release, sequential;
//   - impl=floor-grant, floor-grant32, floor-grant128: the commands a
//     contended grant's two script calls make (a waiter queues; a holder's
//     release hands it the permit, with its message), with their arguments,
//     in two script calls with no other Lua: the floor of a contended grant
//     with the keys it keeps, with a queue of one, and with the 28 and 124
//     waiters and 4 holders the contended rows keep (a longer queue costs
//     Redis more per command: its sorted sets and hash are scanned);
//   - impl=floodgate-contendedN: N goroutines in 4 processes (own clients) on
//     4 permits, each held ~1ms: script µs per grant, every script counted
//     (acquires, hand-offs, heartbeats, releases, renewals).
//
// The floodgate rows also report their cost in GCRA decisions (x-gcra) and the
// contended rows and floor-grant in uncontended pairs (x-pair), taken from the
// same round.
// Target: impl=floodgate-pair: script-µs/op ≤ 3× impl=gcra; impl=floodgate-contended32: script-µs/op ≤ 1.5× impl=floodgate-pair; impl=floodgate-contended128: script-µs/op ≤ 1.5× impl=floodgate-pair.
func BenchmarkDistsemScriptCPU(b *testing.B) {
	_, rdb, rtt := benchServer(b)
	srv := rdb.Options().Addr
	ctx := context.Background()
	var gcraUs, pairUs, floorUs float64 // of this round
	measure := func(b *testing.B, n func() int64, run func()) float64 {
		u0 := redistest.ScriptUsec(b, rdb)
		run()
		us := float64(redistest.ScriptUsec(b, rdb)-u0) / float64(max(n(), 1))
		b.ReportMetric(us, "script-µs/op")
		return us
	}
	b.Run("impl=evalsha", func(b *testing.B) {
		sc := redis.NewScript("return struct.pack('<i8i8i8i8i8i8i8', 1, 0, 0, 0, 0, 0, 0)")
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		keys := []string{"{e}:s", "{e}:h", "{e}:q", "{e}:qe", "{e}:d", "{e}:t"}
		args := floorArgs("0123456789abcdef.1", "{e}:n:", 4, 10000, 1, 1000, 1795978983896001, 1)
		measure(b, func() int64 { return int64(b.N) }, func() {
			for b.Loop() {
				if err := sc.EvalSha(ctx, rdb, keys, args...).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("impl=gcra", func(b *testing.B) {
		m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(benchRate), Burst: benchBurst},
			shaperredis.Config{Prefix: "gcra:", Breaker: breaker.New("bench", breaker.Config{CallTimeout: time.Second})})
		if _, err := m.AllowN(ctx, "k", 1); err != nil {
			b.Fatal(err)
		}
		gcraUs = measure(b, func() int64 { return int64(b.N) }, func() {
			for b.Loop() {
				if d, err := m.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
	})
	b.Run("impl=floor-pair", func(b *testing.B) {
		pair := newFloorPair(b, rdb)
		floorUs = measure(b, func() int64 { return int64(b.N) }, func() {
			for b.Loop() {
				pair()
			}
		})
		if gcraUs > 0 {
			b.ReportMetric(floorUs/gcraUs, "x-gcra")
		}
	})
	b.Run("impl=floodgate-pair", func(b *testing.B) {
		s := distsem.New(rdb, "cpu-pair", 1<<20, distsem.Config{})
		defer s.Close()
		if p, err := s.Acquire(ctx, 1); err == nil {
			p.Release(ctx)
		}
		pairUs = measure(b, func() int64 { return int64(b.N) }, func() {
			for b.Loop() {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		if gcraUs > 0 {
			b.ReportMetric(pairUs/gcraUs, "x-gcra")
		}
		if floorUs > 0 {
			b.ReportMetric(pairUs/floorUs, "x-floor")
		}
	})
	// floor-grant: a queue of one; floor-grant32 and floor-grant128: the
	// queue and holders the contended rows keep (N-4 waiters, 4 holders),
	// with the commands such a grant makes (MONITOR of impl=floodgate-
	// contended32: the queued acquire's fast path behind others, the
	// hand-off release's fast path).
	for _, backlog := range []int{0, 28, 124} {
		name := "impl=floor-grant"
		if backlog > 0 {
			name += strconv.Itoa(backlog + 4)
		}
		b.Run(name, func(b *testing.B) {
			us := floorGrant(b, rdb, backlog)
			if gcraUs > 0 {
				b.ReportMetric(us/gcraUs, "x-gcra")
			}
			if pairUs > 0 {
				b.ReportMetric(us/pairUs, "x-pair")
			}
		})
	}
	for _, conc := range []int{32, 128} {
		b.Run("impl=floodgate-contended"+strconv.Itoa(conc), func(b *testing.B) {
			const procs, limit = 4, 4
			sems := make([]*distsem.Semaphore, procs)
			for i := range sems {
				cl := redis.NewClient(redistest.Options(srv))
				cl.AddHook(rtt)
				defer cl.Close()
				sems[i] = distsem.New(cl, "cpu-cont"+strconv.Itoa(conc), limit, distsem.Config{})
				defer sems[i].Close()
			}
			var grants atomic.Int64
			rtt.acquire.Store(0)
			us := measure(b, grants.Load, func() {
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				for i := range conc {
					wg.Go(func() {
						s := sems[i%procs]
						for left.Add(-1) >= 0 {
							p, err := s.Acquire(ctx, 1)
							if err != nil {
								b.Error(err)
								return
							}
							grants.Add(1)
							time.Sleep(time.Millisecond)
							p.Release(ctx)
						}
					})
				}
				wg.Wait()
			})
			b.ReportMetric(float64(rtt.acquire.Load())/float64(max(grants.Load(), 1)), "acquire-calls/grant")
			if gcraUs > 0 {
				b.ReportMetric(us/gcraUs, "x-gcra")
			}
			if pairUs > 0 {
				b.ReportMetric(us/pairUs, "x-pair")
			}
		})
	}
}

// floorPairAcquire and floorPairRelease are the commands of the pair's two
// fast paths (acquire.lua's grant, release.lua's first), with their
// arguments and replies, and none of the logic around them: what the pair
// would cost with the keys it keeps if its Lua were free. The state (:s's
// field p, packed) is written back as read, the same length as the state a
// script packs; the numbers a script formats (a lease expiry, a fence) are
// constants of the same length. The calls take the arguments distsem's do
// (floorArgs); the weight, 1, is the constant '1' the scripts use for it.
// TestFloorScriptsMakeDistsemCommands holds them to the scripts' commands.
var (
	floorPairAcquire = redis.NewScript(`
local S, H, D, tok = KEYS[1], KEYS[2], KEYS[5], ARGV[1]
local st = redis.call('HGET', S, 'p')
local tm = redis.call('TIME')
redis.call('ZADD', H, 'NX', '1795978993896', tok)
redis.call('HSET', D, 'w:' .. tok, '1', 'f:' .. tok, '1795978983896001', '_', '')
redis.call('HSET', S, 'p', st)
redis.call('PEXPIRE', H, '30000')
return struct.pack('<i8i8i8i8i8', 1, 1795978983896001, 1048576, 1, 0)`)
	floorPairRelease = redis.NewScript(`
local S, H, D, tok = KEYS[1], KEYS[2], KEYS[5], ARGV[1]
local st = redis.call('HGET', S, 'p')
redis.call('ZREM', H, tok)
redis.call('HDEL', D, 'w:' .. tok, 'f:' .. tok)
redis.call('HSET', S, 'p', st)
return struct.pack('<i8i8i8', 1, 1048576, 0)`)
)

// withTTL gives each of keys that exists a TTL of an hour, as distsem's keys
// always have one (see head.lua): Redis looks up a key's expiry on every
// access of a key that has one, so a floor whose keys had none would be
// cheaper than the commands it stands for. The floor scripts give the keys
// they create a TTL themselves, as the distsem scripts do.
func withTTL(tb testing.TB, rdb *redis.Client, keys []string) {
	for _, k := range keys {
		if err := rdb.PExpire(context.Background(), k, time.Hour).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// newFloorPair stores a settled semaphore state for the floor pair's scripts
// and returns a function that makes one pair of their calls. The keys are
// deleted when tb ends.
func newFloorPair(tb testing.TB, rdb *redis.Client) func() {
	ctx := context.Background()
	keys := []string{"{f}:s", "{f}:h", "{f}:q", "{f}:qe", "{f}:d", "{f}:t"}
	if err := rdb.HSet(ctx, keys[0], "p", packedState(1<<20, 0, 1795978983896001, 0, -1, 1795978983896, -1, 0)).Err(); err != nil {
		tb.Fatal(err)
	}
	if err := rdb.HSet(ctx, keys[4], "_", "").Err(); err != nil { // D is kept: see distsem's head.lua
		tb.Fatal(err)
	}
	withTTL(tb, rdb, keys)
	tb.Cleanup(func() { rdb.Del(ctx, keys...) })
	for _, sc := range []*redis.Script{floorPairAcquire, floorPairRelease} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	n := 0
	return func() {
		n++
		tok := "0123456789abcdef." + strconv.Itoa(n)
		if err := floorPairAcquire.EvalSha(ctx, rdb, keys, floorArgs(tok, "{f}:n:", 1<<20, 10000, 0, 1000, 1795978983896001+int64(n), 1)...).Err(); err != nil {
			tb.Fatal(err)
		}
		if err := floorPairRelease.EvalSha(ctx, rdb, keys, floorArgs(tok, "{f}:n:", 1<<20, 10000, 0, 0, 1, 0)...).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// floorGrantQueued is a waiter's queued acquire: the commands of acquire.lua's
// queued fast path, with their arguments and reply, a tombstone being stored
// (as in the contended rows: a waiter that calls twice is released with one).
// After the call's arguments (floorArgs), ARGV[3] = the queue number,
// ARGV[4] = the heartbeat expiry and ARGV[5] = 1: the queue was empty (the
// call is its head: it reads the earliest lease and gives Q a TTL). The
// notify id, which the script reads from its numbers, is a constant here.
var floorGrantQueued = redis.NewScript(`
local S, H, Q, QE, D, T, tok = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1]
local st = redis.call('HGET', S, 'p')
local tm = redis.call('TIME')
redis.call('ZCARD', H)
redis.call('ZSCORE', T, tok)
redis.call('ZSCORE', H, tok)
redis.call('ZADD', Q, 'NX', ARGV[3], tok)
redis.call('HSET', D, 'w:' .. tok, '1', 'c:' .. tok, '0123456789abcdef', 'l:' .. tok, '10000', '_', '')
redis.call('ZADD', QE, ARGV[4], tok, '0', '_')
local pos = redis.call('ZRANK', Q, tok)
if ARGV[5] == '1' then
  redis.call('ZRANGE', H, '0', '0', 'WITHSCORES')
end
redis.call('HSET', S, 'p', st)
if ARGV[5] == '1' then
  redis.call('PEXPIRE', Q, '30000')
end
return struct.pack('<i8i8i8i8i8i8i8', 0, 0, 4, 4, pos, 1000, 1795978983896001)`)

// floorGrantHandOff is the release of holder ARGV[1] that hands its permit
// to the head of the queue: the commands of release.lua's hand-off fast
// path. After the call's arguments (floorArgs), ARGV[3] = the grant's lease
// expiry, ARGV[4] = its fence and ARGV[5] = 1: ARGV[1] is the only holder
// (its ZREM deletes H, which the grant's ZADD creates again and gives a
// TTL). It returns the head
// granted (a floor's only deviation from the reply, so that the loop can
// release it later).
var floorGrantHandOff = redis.NewScript(`
local S, H, Q, QE, D, tok = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
local st = redis.call('HGET', S, 'p')
local tm = redis.call('TIME')
local head = redis.call('ZRANGE', Q, '0', '0')[1]
local m = redis.call('HMGET', D, 'w:' .. head, 'c:' .. head, 'l:' .. head)
redis.call('ZSCORE', QE, head)
redis.call('ZCARD', H)
redis.call('ZREM', H, tok)
redis.call('ZREM', Q, head)
redis.call('ZREM', QE, head)
redis.call('ZADD', H, ARGV[3], head)
redis.call('HSET', D, 'f:' .. head, ARGV[4])
redis.call('publish', '{g}:n:' .. m[2], head .. ':' .. ARGV[4])
redis.call('HDEL', D, 'w:' .. tok, 'f:' .. tok, 'c:' .. head, 'l:' .. head)
redis.call('HSET', S, 'p', st)
if ARGV[5] == '1' then
  redis.call('PEXPIRE', H, '30000')
end
return head`)

// floorGrant measures the script µs per grant of floorGrantQueued and
// floorGrantHandOff with backlog waiters queued ahead of each new one (0: a
// queue of one, one holder; else 4 holders, as the contended rows keep).
func floorGrant(b *testing.B, rdb *redis.Client, backlog int) float64 {
	queue, handOff := newFloorGrant(b, rdb, backlog)
	u0 := redistest.ScriptUsec(b, rdb)
	for b.Loop() {
		queue()
		handOff()
	}
	us := float64(redistest.ScriptUsec(b, rdb)-u0) / float64(max(b.N, 1))
	b.ReportMetric(us, "script-µs/op")
	return us
}

// newFloorGrant stores the state of a contended semaphore with backlog
// waiters queued and returns the two calls of one grant: queue, a new
// waiter's queued acquire (floorGrantQueued), and handOff, the release of
// the oldest holder that hands its permit to the head of the queue
// (floorGrantHandOff). The keys are deleted when tb ends.
func newFloorGrant(tb testing.TB, rdb *redis.Client, backlog int) (queue, handOff func()) {
	ctx := context.Background()
	keys := []string{"{g}:s", "{g}:h", "{g}:q", "{g}:qe", "{g}:d", "{g}:t"}
	rdb.Del(ctx, keys...)
	tb.Cleanup(func() { rdb.Del(ctx, keys...) })
	const fence, lease = 1795978983896001, 1795978993896
	tokN := 0
	newTok := func() string { tokN++; return "0123456789abcdef." + strconv.Itoa(tokN) }
	holders := []string{newTok()}
	if backlog > 0 {
		holders = append(holders, newTok(), newTok(), newTok())
	}
	for _, h := range holders {
		if err := rdb.ZAdd(ctx, keys[1], redis.Z{Score: lease, Member: h}).Err(); err != nil {
			tb.Fatal(err)
		}
		if err := rdb.HSet(ctx, keys[4], "w:"+h, 1, "f:"+h, fence, "_", "").Err(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, keys[0], "p", packedState(float64(len(holders)), float64(len(holders)), fence, float64(backlog),
		-1, 1795978983896, lease, float64(backlog))).Err(); err != nil {
		tb.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, keys[5], redis.Z{Score: lease, Member: "tombstone"}).Err(); err != nil {
		tb.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, keys[3], redis.Z{Score: 0, Member: "_"}).Err(); err != nil { // :qe is kept: see distsem's head.lua
		tb.Fatal(err)
	}
	withTTL(tb, rdb, keys)
	seq := 0
	enqueue := func(tok string) {
		seq++
		head := "0"
		if backlog == 0 {
			head = "1"
		}
		args := append(floorArgs(tok, "{g}:n:", 4, 10000, 1, 1000, fence, 1), seq, 1795978984896, head)
		if err := floorGrantQueued.EvalSha(ctx, rdb, keys, args...).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	for _, sc := range []*redis.Script{floorGrantQueued, floorGrantHandOff} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	for range backlog {
		enqueue(newTok())
	}
	queue = func() { enqueue(newTok()) }
	only := "0"
	if len(holders) == 1 {
		only = "1"
	}
	handOff = func() {
		args := append(floorArgs(holders[0], "{g}:n:", 4, 1000, 0, 1, 0, 0), 1795978984896, fence+tokN, only)
		granted, err := floorGrantHandOff.EvalSha(ctx, rdb, keys, args...).Text()
		if err != nil {
			tb.Fatal(err)
		}
		holders = append(holders[1:], granted)
	}
	return queue, handOff
}

// floorArgs returns the arguments of a distsem script call (see distsem's
// lua/head.lua): the token, then the call's numbers (the limit, the key TTL
// (30000 ms here), 0 to PUBLISH, then n4 .. n8) packed and followed by the
// notify id and the channel prefix chanPrefix, then the script's strings.
func floorArgs(tok, chanPrefix string, limit, n4, n5, n6, n7, n8 int64, strs ...any) []any {
	nums := packedState(float64(limit), 30000, 0, float64(n4), float64(n5), float64(n6), float64(n7), float64(n8))
	return append([]any{tok, nums + "0123456789abcdef" + chanPrefix}, strs...)
}

// packedState is a distsem state as the scripts store it (:s's field p):
// limit, used, fence, nq, tn, ta, he and seq, little-endian float64s
// (struct '<dddddddd'; see distsem's lua/head.lua).
func packedState(v ...float64) string {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return string(b)
}
