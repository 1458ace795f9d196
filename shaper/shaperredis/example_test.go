package shaperredis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// A quota shared by every API pod: tenant acme may start 5 PDF exports a
// minute. Redis decides, with Redis's clock, in one round trip; if Redis is
// down, the meter fails open (the breaker counts the degraded admissions).
func ExampleNewMeter() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	exports := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5},
		shaperredis.Config{Prefix: "exports:", Policy: breaker.FailOpen})

	d, err := exports.AllowN(context.Background(), "tenant:acme", 1)
	if err != nil {
		log.Print(err) // a Redis error the policy did not absorb
		return
	}
	if !d.Allowed {
		fmt.Printf("429, Retry-After: %.0f\n", math.Ceil(d.RetryAfter.Seconds()))
	}
}

// Export jobs start at most 5/s across every worker process, smoothly; a job
// whose slot is more than 10s away is refused rather than queued.
func ExampleNewQueue() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	q := shaperredis.NewQueue(rdb, "exports", shaper.PerSecond(5), shaper.QueueConfig{MaxWait: 10 * time.Second}, shaperredis.Config{})
	defer q.Close()
	err := q.Do(context.Background(), 1, func(ctx context.Context) error {
		return nil // run one export job
	})
	if errors.Is(err, shaper.ErrMaxWait) {
		log.Print("backlog too long")
	}
}

// A gateway serves a hot key from leased tokens: one Redis call per 100
// requests, with the rest decided in memory.
func ExampleMeter_Lease() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	search := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(5000), Burst: 500}, shaperredis.Config{})
	l := search.Lease("tenant:acme", shaperredis.LeaseConfig{Batch: 100, Exhaustion: shaperredis.ExhaustWait, MaxWait: 20 * time.Millisecond})
	defer l.Close() // gives unused tokens back
	if err := l.Wait(context.Background(), 1); err != nil {
		log.Print(err) // a *shaper.RejectError (ErrLimited) with RetryAfter
	}
}
