package shaperredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// TestTimedOutCallSpendsNothing: a decision that timed out while Redis was
// frozen (SIGSTOP) was answered with breaker.ErrUnavailable, so it must not
// spend quota when Redis wakes and runs the command still sitting in its
// socket. For every algorithm, batched or not, the key's remaining quota after
// SIGCONT (once Redis has run and dropped every stale connection) is what the
// one answered call left.
func TestTimedOutCallSpendsNothing(t *testing.T) {
	srv := redistest.Start(t)
	check := srv.Client()
	news := []struct {
		name string
		new  func(redis.UniversalClient, shaper.Limit, shaperredis.Config) *shaperredis.Meter
	}{
		{"gcra", shaperredis.NewMeter},
		{"tokenbucket", shaperredis.NewTokenBucket},
		{"fixedwindow", shaperredis.NewFixedWindow},
		{"slidinglog", shaperredis.NewSlidingLog},
		{"slidingcounter", shaperredis.NewSlidingCounter},
	}
	lim := shaper.Limit{Rate: shaper.Rate{Count: 10, Period: time.Hour}, Burst: 10}
	for _, nw := range news {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", nw.name, batch), func(t *testing.T) {
				ctx := context.Background()
				rdb := redis.NewClient(redistest.Options(srv.Addr))
				defer rdb.Close()
				brk := breaker.New("stale", breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 1000})
				m := nw.new(rdb, lim, shaperredis.Config{Batch: batch, Breaker: brk})
				key := t.Name()
				if d, err := m.AllowN(ctx, key, 1); err != nil || !d.Allowed {
					t.Fatalf("first AllowN: %+v, %v", d, err)
				}
				srv.Pause()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						if _, err := m.AllowN(ctx, key, 2); !errors.Is(err, breaker.ErrUnavailable) {
							t.Errorf("AllowN with Redis frozen: %v, want ErrUnavailable", err)
						}
					})
				}
				wg.Wait()
				rdb.Close()
				// Redis stays frozen a while after the callers gave up: a
				// call that reaches Redis within storecall.Slack of its
				// deadline still runs (the documented bound).
				time.Sleep(100 * time.Millisecond)
				srv.Resume()
				waitAlone(t, check)
				peek := nw.new(check, lim, shaperredis.Config{})
				d, err := peek.AllowN(ctx, key, 0)
				if err != nil {
					t.Fatal(err)
				}
				if d.Remaining != 9 {
					t.Errorf("remaining after the frozen calls: %d, want 9 (only the first call was answered)", d.Remaining)
				}
			})
		}
	}
}

// waitAlone waits until c's connection is the only client of its server: every
// other connection (those of calls that timed out) has been read, its commands
// run, and closed.
func waitAlone(t *testing.T, c *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "clients").Result()
		if err == nil && connectedClients(info) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis clients did not drain: %v %q", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func connectedClients(info string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestTimedOutReservationTakesNoSlot: a Queue reservation that timed out
// while Redis was frozen takes no slot when Redis runs it late: after SIGCONT
// the one slot of the hour is still free for a call that will not wait.
func TestTimedOutReservationTakesNoSlot(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(redistest.Options(srv.Addr))
	defer rdb.Close()
	brk := breaker.New("stale", breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 1000})
	r := shaper.Rate{Count: 1, Period: time.Hour}
	q := shaperredis.NewQueue(rdb, "q", r, shaperredis.QueueConfig{}, shaperredis.Config{Breaker: brk})
	defer q.Close()
	warm := shaperredis.NewQueue(rdb, "warm", r, shaperredis.QueueConfig{}, shaperredis.Config{Breaker: brk})
	defer warm.Close()
	if err := warm.Wait(ctx, 1); err != nil { // the script cached, a connection open
		t.Fatal(err)
	}
	srv.Pause()
	if err := q.Wait(ctx, 1); !errors.Is(err, breaker.ErrUnavailable) {
		srv.Resume()
		t.Fatalf("Wait with Redis frozen: %v, want ErrUnavailable", err)
	}
	rdb.Close()
	time.Sleep(100 * time.Millisecond) // frozen past storecall.Slack
	srv.Resume()
	check := srv.Client()
	waitAlone(t, check)
	fresh := shaperredis.NewQueue(check, "q", r, shaperredis.QueueConfig{MaxWait: -1}, shaperredis.Config{})
	defer fresh.Close()
	if err := fresh.Wait(ctx, 1); err != nil {
		t.Errorf("Wait after the frozen reservation: %v, want the free slot", err)
	}
}
