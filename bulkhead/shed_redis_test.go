package bulkhead_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// shedFleet is n Bulkheads (processes), each with its own Redis client and
// its own distsem.Semaphore on one key of limit: one layer with classes
// over the fleet's cap.
func shedFleet(t *testing.T, name string, n int, limit int64, classes []bulkhead.Criticality) []*bulkhead.Bulkhead {
	t.Helper()
	db := redistest.Connect(t)
	addr := os.Getenv("REDIS_ADDR")
	key := db.Key(name)
	var bs []*bulkhead.Bulkhead
	for range n {
		rdb := redis.NewClient(redistest.Options(addr))
		t.Cleanup(func() { rdb.Close() })
		sem := distsem.New(rdb, key, limit, distsem.Config{})
		t.Cleanup(func() { sem.Close() })
		bs = append(bs, bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "fleet", Gate: sem, Classes: classes}}}))
	}
	return bs
}

// waitingIn waits until b's layer has want requests waiting in class c
// (the count is the process's own, set before a request blocks).
func waitingIn(t *testing.T, b *bulkhead.Bulkhead, c int, want int64) {
	t.Helper()
	floodgatetest.Eventually(t, 5*time.Second, "a request waiting in its class", func() bool {
		return b.Stats().Layers[0].Classes[c].Waiting == want
	})
}

// TestRedisShedFleetCap: three processes with criticality classes over one
// distsem cap of 6, each driven by critical, default and sheddable callers
// whose work takes 10ms: the fleet never runs more than 6 at once, every
// critical request is served, and sheddable ones are what is shed.
func TestRedisShedFleetCap(t *testing.T) {
	const limit = 6
	classes := []bulkhead.Criticality{
		{Name: "critical", Reserved: 1, MaxWait: 5 * time.Second},
		{Name: "default", MaxWait: 50 * time.Millisecond},
		{Name: "sheddable", MaxWait: -1},
	}
	bs := shedFleet(t, "shedcap", 3, limit, classes)
	var cur, peak atomic.Int64
	var mu sync.Mutex
	counts := map[string][2]int{} // class: ran, refused
	var wg sync.WaitGroup
	stop := time.Now().Add(1500 * time.Millisecond)
	for _, b := range bs {
		for _, class := range []string{"critical", "default", "default", "default", "sheddable", "sheddable", "sheddable"} {
			wg.Go(func() {
				for time.Now().Before(stop) {
					err := b.Do(as(class), bulkhead.Request{}, func(ctx context.Context) error {
						v := cur.Add(1)
						defer cur.Add(-1)
						for m := peak.Load(); v > m && !peak.CompareAndSwap(m, v); m = peak.Load() {
						}
						time.Sleep(10 * time.Millisecond) // the work
						return nil
					})
					mu.Lock()
					c := counts[class]
					if err == nil {
						c[0]++
					} else {
						c[1]++
					}
					counts[class] = c
					mu.Unlock()
					if err != nil && !errors.Is(err, bulkhead.ErrShed) {
						t.Errorf("%s: %v, want nil or ErrShed", class, err)
						return
					}
					if err != nil {
						time.Sleep(5 * time.Millisecond) // a shed caller's back-off, so that the drive is not a spin
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("fleet of 3, cap %d: peak %d at once; ran/refused by class %v", limit, peak.Load(), counts)
	if p := peak.Load(); p > limit {
		t.Errorf("the fleet ran %d at once, its cap is %d", p, limit)
	} else if p < limit-1 {
		t.Errorf("the fleet ran at most %d at once: the drive did not fill the cap %d", p, limit)
	}
	if c := counts["critical"]; c[1] != 0 || c[0] == 0 {
		t.Errorf("critical: %d ran, %d refused; want all served", c[0], c[1])
	}
	if c := counts["sheddable"]; c[1] == 0 {
		t.Errorf("sheddable: none shed at a full cap (%d ran)", c[0])
	}
	for i, b := range bs {
		if st := b.Stats().Layers[0]; st.InFlight != 0 {
			t.Errorf("process %d: %d in flight after the drive", i, st.InFlight)
		}
	}
}

// TestRedisShedFleetPriority: within one process, a critical request is
// served before a default one that queued first, though the slot that
// frees is another process's. And what the fleet does not guarantee: a
// class's reservation is counted by each process on its own, against what
// that process holds, so two other processes' sheddable requests can fill
// the whole fleet cap while a third process's critical reservation is
// "free": its critical request then waits for the fleet like any other.
func TestRedisShedFleetPriority(t *testing.T) {
	classes := []bulkhead.Criticality{
		{Name: "critical", Reserved: 1, MaxWait: 10 * time.Second},
		{Name: "default", MaxWait: 10 * time.Second},
		{Name: "sheddable", MaxWait: -1},
	}
	bs := shedFleet(t, "shedprio", 3, 2, classes)
	a, b, c := bs[0], bs[1], bs[2]

	// b and c each run one sheddable request: by their own counts each
	// has one slot of two free for sheddable (one reserved for critical),
	// and together they hold the fleet's two.
	releaseB, releaseC := make(chan struct{}), make(chan struct{})
	freeB, freeC := sync.OnceFunc(func() { close(releaseB) }), sync.OnceFunc(func() { close(releaseC) })
	defer freeC()
	defer freeB()
	if err := <-hold(b, "sheddable", releaseB); err != nil {
		t.Fatalf("b's sheddable: %v", err)
	}
	if err := <-hold(c, "sheddable", releaseC); err != nil {
		t.Fatalf("c's sheddable: %v", err)
	}
	// a queues a default request, then a critical one: a's reservation is
	// free by a's count, yet the fleet is full, so both wait.
	order := make(chan string, 2)
	run := func(class string) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- a.Do(as(class), bulkhead.Request{}, func(context.Context) error {
				order <- class
				return nil
			})
		}()
		return done
	}
	def := run("default")
	waitingIn(t, a, 1, 1)
	crit := run("critical")
	waitingIn(t, a, 0, 1)
	if st := a.Stats().Layers[0]; st.Classes[0].Admitted != 0 {
		t.Fatalf("a's critical request ran with the fleet full: %+v", st.Classes)
	}

	// One slot frees, in b: a's critical request gets it first.
	freeB()
	for _, done := range []<-chan error{crit, def} {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("a: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a's queued requests not served within 10s of a free slot")
		}
	}
	if first, second := <-order, <-order; first != "critical" || second != "default" {
		t.Errorf("a served %s then %s, want critical first", first, second)
	}
}
