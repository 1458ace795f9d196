package distsem

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// BenchmarkHandOffReleaseScriptCPU: Redis script CPU (µs of evalsha in INFO
// commandstats) of a release that hands the freed permit to the head
// waiter, sequential, on a private redis-server: limit 1, batches of 100
// waiters queued (not measured), then 100 releases, each of the holder,
// granting the next waiter (measured), as Permit.Release sends them (weight
// known, no tombstone). The batches alternate between release.lua as built
// (built-µs/op) and with its fast paths disabled (general-µs/op, as
// TestFastPathsMatchGeneralPaths does), so that the two compare on a noisy
// machine. bench/ measures the contended rows (every call counted).
func BenchmarkHandOffReleaseScriptCPU(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(redistest.Options(srv.Addr))
	b.Cleanup(func() { rdb.Close() })
	rels := [2]*redisscript.Script{releaseScript, redisscript.NewPacked(withoutFastPaths(b, releaseSource))}
	s := New(rdb, "handoff-cpu", 1, Config{Lease: time.Minute, WaiterTTL: time.Minute, Breaker: breaker.New("bench", breaker.Config{CallTimeout: time.Second})})
	defer s.Close()
	ctx := context.Background()
	acquire := func(tok string) []int64 {
		v, err := s.eval(ctx, acquireScript, tok, 1, s.cfg.Lease.Milliseconds(), 1, s.cfg.WaiterTTL.Milliseconds(), s.id)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	if v := acquire("h.0"); v[0] != stGranted {
		b.Fatalf("acquire(h.0) = %v", v)
	}
	const batch = 100
	var usec, n [2]int64 // built, general
	held, queued := 0, 0 // the holder's number, the last waiter's
	cur, u0 := 1, int64(-1)
	for b.Loop() {
		if held == queued {
			b.StopTimer()
			if u0 >= 0 {
				usec[cur] += redistest.ScriptUsec(b, rdb) - u0
			}
			for range batch {
				queued++
				if v := acquire("h." + strconv.Itoa(queued)); v[0] != stQueued {
					b.Fatalf("acquire = %v, want queued", v)
				}
			}
			cur = 1 - cur
			u0 = redistest.ScriptUsec(b, rdb)
			b.StartTimer()
		}
		v, err := s.eval(ctx, rels[cur], "h."+strconv.Itoa(held), s.cfg.TombstoneTTL.Milliseconds(), 0, 0, 1)
		if err != nil || v[0] != 1 || v[2] != 1 {
			b.Fatalf("release = %v, %v; want held, 1 in use (handed off)", v, err)
		}
		held++
		n[cur]++
	}
	usec[cur] += redistest.ScriptUsec(b, rdb) - u0
	for i, name := range []string{"built-µs/op", "general-µs/op"} {
		if n[i] > 0 {
			b.ReportMetric(float64(usec[i])/float64(n[i]), name)
		}
	}
	rdb.Del(ctx, s.keys...)
}
