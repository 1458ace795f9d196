package redistest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestStartClusterServesEverySlot(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	if len(c.Addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3", c.Addrs)
	}
	ctx := t.Context()
	direct := make([]*redis.Client, len(c.Addrs))
	for i, addr := range c.Addrs {
		direct[i] = redis.NewClient(redistest.Options(addr))
		defer direct[i].Close()
	}
	// 60 keys hash to slots of all three nodes; each is written through the
	// cluster client and found on exactly one node.
	perNode := make([]int, len(c.Addrs))
	for i := range 60 {
		k := fmt.Sprintf("k%d", i)
		if err := c.Client.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		found := 0
		for j, d := range direct {
			if n, err := d.Exists(ctx, k).Result(); err == nil && n == 1 {
				perNode[j]++
				found++
			}
		}
		if found != 1 {
			t.Errorf("key %s found on %d nodes, want 1", k, found)
		}
		if v, err := c.Client.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, v, err, i)
		}
	}
	for j, n := range perNode {
		if n == 0 {
			t.Errorf("node %s got none of 60 keys", c.Addrs[j])
		}
	}
}
