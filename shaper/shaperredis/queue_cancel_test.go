package shaperredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestQueueCancelReturnsWhileRedisFrozen: a sleeping Wait
// whose context ends while Redis is frozen returns at once, not after the
// give-back's round trip; the give-back happens after SIGCONT (Close waits for
// it).
func TestQueueCancelReturnsWhileRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	brk := breaker.New("frozen", breaker.Config{CallTimeout: 3 * time.Second, ConsecutiveFailures: 1000})
	q := shaperredis.NewQueue(c, "q", shaper.PerSecond(2), shaper.QueueConfig{}, shaperredis.Config{Breaker: brk})
	if err := q.Wait(ctx, 1); err != nil { // the burst slot; the next is 500ms away
		t.Fatal(err)
	}
	before, err := c.Get(ctx, q.Key()).Result()
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Wait(cctx, 1) }()
	// Wait until the second call has reserved its slot (the schedule moved).
	for deadline := time.Now().Add(5 * time.Second); ; {
		v, _ := c.Get(ctx, q.Key()).Result()
		if v != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second Wait never reserved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Pause()
	start := time.Now()
	cancel()
	err = <-done
	el := time.Since(start)
	if err != context.Canceled {
		t.Errorf("cancelled Wait: %v, want context.Canceled", err)
	}
	if el > 300*time.Millisecond {
		t.Errorf("cancelled Wait returned %v after its cancellation with Redis frozen; want at once", el)
	}
	srv.Resume()
	q.Close() // waits for the give-back
	if v, err := c.Get(ctx, q.Key()).Result(); err != nil || v != before {
		t.Errorf("after Close, schedule = %q, %v; want %q (the slot given back)", v, err, before)
	}
}
