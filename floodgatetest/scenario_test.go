package floodgatetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/redis/go-redis/v9"
)

// TestScenarioReportQueries is the question the kit was written for, as a
// user would ask it: "with our layers, 12 pods and Redis failing, do we ever
// let more than 5 report queries through?" Each pod has its own Redis client
// (through a proxy of its own) and bulkhead, whose report layer holds a
// distsem.Semaphore of 5 and waits at most 100ms. Midway one pod is
// partitioned from Redis (its proxy freezes, then heals) and then Redis
// restarts empty, losing every lease. The bound stated is the one floodgate
// documents for Redis losing its data (README, "When Redis fails"): up to
// twice the limit until the old holders are done, hence Tolerance 1.
func TestScenarioReportQueries(t *testing.T) {
	srv := floodgatetest.StartRedis(t)
	prefix := floodgatetest.KeyPrefix(t)
	const pods, limit = 12, 5
	proxies := make([]*floodgatetest.Proxy, pods)
	fleet := floodgatetest.Fleet{Pods: pods, Callers: 1, New: func(pod int) floodgatetest.Runner {
		proxies[pod] = floodgatetest.StartProxy(t, srv.Addr)
		rdb := redis.NewClient(floodgatetest.RedisOptions(proxies[pod].Addr()))
		t.Cleanup(func() { rdb.Close() })
		sem := distsem.New(rdb, prefix+"reports", limit, distsem.Config{
			Lease:   time.Second,
			Breaker: breaker.New("redis", breaker.Config{CallTimeout: 100 * time.Millisecond}),
		})
		t.Cleanup(func() { sem.Close() })
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "reports", Route: "/reports/", Gate: sem, MaxWait: 100 * time.Millisecond},
		}})
		id := bulkhead.Identity{Tenant: "acme"}
		return func(ctx context.Context, fn func(context.Context) error) error {
			// The identity is the pod's middleware's; the request is a
			// report query.
			return b.Do(bulkhead.WithIdentity(ctx, id), bulkhead.Request{Method: "GET", Path: "/reports/monthly"}, fn)
		}
	}}

	var faults sync.WaitGroup
	faults.Go(func() {
		time.Sleep(700 * time.Millisecond) // the fault schedule: real time, not synchronisation
		proxies[0].Freeze()
		time.Sleep(500 * time.Millisecond)
		proxies[0].Heal()
		srv.Restart()
	})
	rep := floodgatetest.CheckNoOverAdmission(t, fleet,
		floodgatetest.Load{Duration: 2500 * time.Millisecond, Hold: 150 * time.Millisecond, Pause: 5 * time.Millisecond},
		floodgatetest.Bound{Concurrent: limit, Tolerance: 1})
	faults.Wait()
	if rep.MaxConcurrent < limit-1 {
		t.Errorf("at most %d at once: the fleet did not load the gate", rep.MaxConcurrent)
	}
	if rep.Refused == 0 {
		t.Errorf("no refusal: 12 pods did not contend for 5 permits")
	}
}
