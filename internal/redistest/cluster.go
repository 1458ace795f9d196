package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of private redis-server children on loopback, all
// primaries (no replicas). It is stopped when the test ends.
type Cluster struct {
	// Nodes are the servers, in slot order: node i serves the i-th range.
	Nodes []*Server
	// Addrs are the nodes' host:port addresses.
	Addrs []string
	// Client is a cluster client with ContextTimeoutEnabled, closed when the test
	// ends.
	Client *redis.ClusterClient
}

// StartCluster starts n redis-server children with cluster mode enabled, gives
// each an equal range of the 16384 slots (CLUSTER ADDSLOTSRANGE), joins them
// (CLUSTER MEET), and waits until every node reports cluster_state:ok and knows
// all n nodes. It fails the test if that takes longer than 30s.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: StartCluster(%d)", n)
	}
	c := &Cluster{}
	for range n {
		s := Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "yes")
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admins := make([]*redis.Client, n)
	for i, s := range c.Nodes {
		admins[i] = redis.NewClient(Options(s.Addr))
		defer admins[i].Close()
	}
	const slots = 16384
	for i, a := range admins {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if err := a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, c.Addrs[i], err)
		}
	}
	for i, a := range admins[1:] {
		host, port := c.Nodes[0].Addr[:strings.LastIndexByte(c.Nodes[0].Addr, ':')], c.Nodes[0].Port
		if err := a.ClusterMeet(ctx, host, strconv.Itoa(port)).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET from %s: %v", c.Addrs[i+1], err)
		}
	}
	want := "cluster_known_nodes:" + strconv.Itoa(n)
	for i, a := range admins {
		for {
			info, err := a.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: cluster node %s not ready after 30s: %v\n%s", c.Addrs[i], err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling a child process's readiness
		}
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		DialTimeout:           2 * time.Second,
	})
	t.Cleanup(func() { c.Client.Close() })
	// Every node must agree on the slot map before the client loads it.
	for {
		err := c.Client.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return shard.Ping(ctx).Err()
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: cluster client not ready: %v", err)
		}
		c.Client.ReloadState(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	return c
}
