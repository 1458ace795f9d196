package bulkheadpgx_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
)

// TestInUseNeverAboveCap reads ClassStats.InUse while calls come and go
// through a class of cap 1, on a local and on a fleet gate: no read may show
// more than the gate allows.
func TestInUseNeverAboveCap(t *testing.T) {
	const limit = 1
	rdb := redistest.Connect(t)
	fleet := distsem.New(rdb.Client, rdb.Key("inuse"), limit, distsem.Config{})
	t.Cleanup(func() { fleet.Close() })
	for _, g := range []struct {
		name string
		gate floodgate.Gate
	}{
		{"local", semaphore.New(limit, semaphore.Config{})},
		{"fleet", fleet},
	} {
		t.Run(g.name, func(t *testing.T) {
			db := bulkheadpgx.New(pgtest.Pool(t, 8), bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
				{Name: "c", Gate: g.gate},
			}})
			c := db.Class("c")
			// No deadline (a semaphore refuses early a wait that would pass one).
			ctx, stop := context.WithCancel(context.Background())
			defer time.AfterFunc(1500*time.Millisecond, stop).Stop()
			defer stop()
			var wg sync.WaitGroup
			var errs atomic.Int64
			var firstErr atomic.Value
			for i := range 6 {
				wg.Go(func() {
					for ctx.Err() == nil {
						if i%2 == 0 {
							if conn, err := c.Acquire(ctx); err == nil {
								conn.Release()
							}
							continue
						}
						var v int
						if err := c.QueryRow(ctx, "SELECT 1").Scan(&v); err != nil && ctx.Err() == nil {
							errs.Add(1)
							firstErr.CompareAndSwap(nil, err)
						}
					}
				})
			}
			var reads, above, worst atomic.Int64
			for range 2 {
				wg.Go(func() {
					for ctx.Err() == nil {
						n := c.Stats().InUse
						reads.Add(1)
						if n > limit {
							above.Add(1)
							worst.Store(n)
						}
					}
				})
			}
			wg.Wait()
			if errs.Load() > 0 {
				t.Errorf("%d calls failed, the first with %v", errs.Load(), firstErr.Load())
			}
			if above.Load() > 0 {
				t.Errorf("ClassStats.InUse read %d with a cap of %d in %d of %d reads, want never above the cap",
					worst.Load(), limit, above.Load(), reads.Load())
			}
			if reads.Load() < 1000 {
				t.Errorf("only %d reads of InUse, want many", reads.Load())
			}
			waitIdle(t, c)
		})
	}
}
