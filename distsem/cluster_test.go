package distsem_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestCluster runs semaphores with names in different slots on a 3-node Redis
// Cluster: no CROSSSLOT errors, the limit holds, and hand-off notifications
// (SPUBLISH on the shard of the hash tag) arrive: with 10s heartbeats, the
// workload could not finish in time on heartbeats alone. A SCRIPT FLUSH on every
// node mid-run is healed by EVAL.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ContextTimeoutEnabled: true, DisableIdentity: true})
	t.Cleanup(func() { other.Close() })
	cfg := distsem.Config{WaiterTTL: 30 * time.Second}
	for _, name := range []string{"alpha", "bravo", "charlie", "delta"} {
		t.Run(name, func(t *testing.T) {
			sems := []*distsem.Semaphore{newSem(t, c.Client, name, 2, cfg), newSem(t, other, name, 2, cfg)}
			var o overlap
			start := time.Now()
			flushed := make(chan struct{})
			go func() {
				defer close(flushed)
				time.Sleep(100 * time.Millisecond)
				c.Client.ForEachShard(context.Background(), func(ctx context.Context, shard *redis.Client) error {
					return shard.ScriptFlush(ctx).Err()
				})
			}()
			errs := workload{sems: sems, per: 6, total: 300, hold: 2 * time.Millisecond, timeout: 5 * time.Second}.run(t, &o)
			<-flushed
			el := time.Since(start)
			for _, err := range errs[:min(len(errs), 5)] {
				t.Errorf("caller error: %v", err)
			}
			if m := o.max.Load(); m > 2 {
				t.Errorf("max overlap %d, want ≤ 2", m)
			}
			if el > 15*time.Second {
				t.Errorf("300 contended acquisitions took %v: notifications not delivered?", el)
			}
			st := stats(t, sems[0])
			if st.Holders != 0 || st.Waiting != 0 || st.Limit != 2 {
				t.Errorf("Stats at the end = %+v", st)
			}
			t.Logf("slot of {%s}: 300 acquisitions in %v", name, el)
		})
	}
}
