package shaperredis

import (
	"context"
	"github.com/floodgate-go/floodgate/shaper"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// waitUntil polls cond every millisecond for up to 5s (real time: these tests
// run against a real redis-server).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
	}
}

// TestBatchCrossSlotFallsBackToPipeline: a *redis.Client in front of a
// Cluster-mode server (or a cluster proxy) refuses a batch-script call whose
// keys hash to different slots with CROSSSLOT. The batcher then pipelines, and
// no caller sees the error.
func TestBatchCrossSlotFallsBackToPipeline(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	cl, ctx := srv.Client(), context.Background()
	if err := cl.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster_state never ok", func() bool {
		return strings.Contains(cl.ClusterInfo(ctx).Val(), "cluster_state:ok")
	})
	m := NewMeter(cl, shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 1000}, Config{Batch: true, Breaker: breaker.New("test", breaker.Config{CallTimeout: 2 * time.Second})})
	if _, err := m.AllowN(ctx, "solo", 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for round := range 4 {
		for i := range 64 {
			wg.Go(func() {
				if _, err := m.AllowN(ctx, "k"+strconv.Itoa(round*64+i), 1); err != nil {
					t.Log(err)
					failed.Add(1)
				}
			})
		}
		wg.Wait()
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 256 batched calls failed", n)
	}
	if !m.batch.noMulti.Load() {
		t.Error("no batch of several keys was ever refused with CROSSSLOT: the test did not test the fallback")
	}
}

// TestBatchOneFailedDecisionFailsOnlyItself: in a batch-script call, a key
// whose value has the wrong type (a prefix shared with something else) fails
// its own call with WRONGTYPE; the calls around it get their decisions.
func TestBatchOneFailedDecisionFailsOnlyItself(t *testing.T) {
	db := redistest.Connect(t)
	ctx := context.Background()
	rl := newRedisLimit("t", shaper.Limit{Rate: shaper.Rate{Count: 8, Period: time.Second}}, false)
	single, multi := scripts.meter[kindGCRA], scripts.batch[kindGCRA]
	if err := db.Client.RPush(ctx, db.Prefix+"{bad}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	var batch []*bcall
	for _, key := range []string{"good1", "bad", "good2"} {
		batch = append(batch, &bcall{args: new(evalBuf).fill(db.Prefix+"{"+key+"}", rl, 1, 0)})
	}
	if !newBatcher(db.Client, 0, single, multi).execMulti(ctx, batch) {
		t.Fatal("the batch was not sent as one batch-script call")
	}
	for _, i := range []int{0, 2} {
		if c := batch[i]; c.err != nil || len(c.v) != 4 || c.v[0] != 1 {
			t.Errorf("good key %d: %v, %v; want allowed", i, c.v, c.err)
		}
	}
	if err := batch[1].err; err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("bad key: %v, %v; want its own WRONGTYPE error", batch[1].v, err)
	}
}

// TestBatchCallerLeavesAtItsDeadline: with Redis frozen, a batched caller
// whose deadline (300ms) is sooner than the call timeout of the others in its
// batch (2s) returns at its own deadline, whether it is still waiting to be
// sent or already in flight in another caller's batch.
func TestBatchCallerLeavesAtItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	m := NewMeter(srv.Client(), shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 1000},
		Config{Batch: true, Breaker: breaker.New("test", breaker.Config{CallTimeout: 2 * time.Second})})
	ctx := context.Background()
	if _, err := m.AllowN(ctx, "warm", 1); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	b := m.batch
	state := func() (leaders, pending int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.leaders, len(b.pending)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer srv.Resume() // before wg.Wait: the 2s callers end sooner
	// Two leaders in flight, each alone with a 200ms deadline; then six
	// callers with the meter's 2s call timeout queue behind them.
	for range maxLeaders {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			m.AllowN(c, "leader", 1)
		})
	}
	waitUntil(t, "leaders never in flight", func() bool { l, _ := state(); return l == maxLeaders })
	for i := range 6 {
		wg.Go(func() { m.AllowN(ctx, "slow"+strconv.Itoa(i), 1) })
	}
	waitUntil(t, "callers never pending", func() bool { _, p := state(); return p == 6 })
	// When the leaders give up, one of the six leads a batch of the rest, in
	// which this caller is in flight before its 300ms are up.
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.AllowN(c, "short", 1)
	if el := time.Since(start); el > 800*time.Millisecond {
		t.Errorf("a caller with a 300ms deadline returned after %v (err %v)", el, err)
	}
	if err == nil {
		t.Error("a caller answered by a frozen Redis")
	}
}
