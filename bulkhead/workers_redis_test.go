package bulkhead_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

var _ floodgate.Gate = (*distsem.Semaphore)(nil)

// TestWorkersFleet: three worker groups ("processes", each with its own Redis
// client) share one fleet rate (a Redis queue, 10/s) and one fleet cap
// (distsem, 3), with 4 local workers each. Combined, never more than 3 jobs
// run at once, no window of starts exceeds 1 + 10/s × window (plus timer
// slack), and every job runs. With 100ms jobs the rate binds (the cap would
// allow 30/s), and the run takes as long as the rate says; with 600ms jobs the
// cap binds (the rate would let 6 run at once), and it is reached.
func TestWorkersFleet(t *testing.T) {
	t.Run("rate", func(t *testing.T) { testWorkersFleet(t, 100*time.Millisecond) })
	t.Run("cap", func(t *testing.T) { testWorkersFleet(t, 600*time.Millisecond) })
}

func testWorkersFleet(t *testing.T, job time.Duration) {
	db := redistest.Connect(t)
	const (
		rate   = 10
		limit  = 3
		perGrp = 12
	)
	var (
		mu      sync.Mutex
		starts  []time.Time
		running atomic.Int64
		most    atomic.Int64
		ran     atomic.Int64
	)
	work := func(ctx context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		ran.Add(1)
		select {
		case <-time.After(job):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	var groups []*bulkhead.Workers
	for g := range 3 {
		c := redis.NewClient(redistest.Options(db.Client.Options().Addr))
		q := shaperredis.NewQueue(c, "exports", shaper.PerSecond(rate), shaper.QueueConfig{}, shaperredis.Config{Prefix: db.Prefix})
		sem := distsem.New(c, db.Prefix+"exports", limit, distsem.Config{})
		t.Cleanup(func() {
			q.Close()
			sem.Close()
			c.Close()
		})
		w := bulkhead.NewWorkers(4, bulkhead.WorkersConfig{Pace: q, Gate: sem})
		groups = append(groups, w)
		for i := range perGrp {
			if err := w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{Run: work}); err != nil {
				t.Fatalf("group %d: Submit %d = %v", g, i, err)
			}
		}
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for g, w := range groups {
		if err := w.Shutdown(ctx); err != nil {
			t.Fatalf("group %d: Shutdown = %v", g, err)
		}
	}
	elapsed := time.Since(t0)

	if got := ran.Load(); got != 3*perGrp {
		t.Errorf("%d jobs ran, want %d", got, 3*perGrp)
	}
	if m := most.Load(); m > limit {
		t.Errorf("%d jobs ran at once across the fleet, cap %d", m, limit)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// Starts are seen after the gate's Redis call, whose latency varies by
	// far more than timer slack on a loaded machine (2 starts 40ms apart
	// were seen at 10/s). 250ms still fails a fleet that starts 20/s: 12
	// starts need 850ms, not 550ms; the elapsed check below is exact.
	const slack = 250 * time.Millisecond
	for i := range starts {
		for j := i; j < len(starts); j++ {
			win := starts[j].Sub(starts[i])
			if n := j - i + 1; float64(n) > 1+rate*(win+slack).Seconds() {
				t.Fatalf("%d starts within %v, bound %.1f", n, win, 1+rate*(win+slack).Seconds())
			}
		}
	}
	// The slower of rate and cap sets the pace; the upper bound is generous
	// for a loaded machine.
	per := max(time.Second/rate, job/limit)
	if min := time.Duration(3*perGrp-1) * per; elapsed < min || elapsed > 3*min {
		t.Errorf("fleet ran %d jobs in %v, want between %v and %v", 3*perGrp, elapsed, min, 3*min)
	}
	if job/limit > time.Second/rate && most.Load() != limit {
		t.Errorf("at most %d jobs ran at once, want the cap %d reached", most.Load(), limit)
	}
	t.Logf("%d jobs in %v, at most %d at once", ran.Load(), elapsed, most.Load())
	for g, w := range groups {
		st := w.Stats().Classes[0]
		if st.Started != perGrp || st.Finished != perGrp || st.PaceErrors+st.GateErrors != 0 {
			t.Errorf("group %d: %+v", g, fmt.Sprint(st))
		}
	}
}
