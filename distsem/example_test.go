package distsem_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/redis/go-redis/v9"
)

// At most 50 report queries at once across the fleet; a query that cannot start
// within 2s fails fast.
func ExampleSemaphore_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	reports := distsem.New(rdb, "replica-reports", 50, distsem.Config{
		Policy:     breaker.FailLocal,
		LocalShare: 4, // about 50 / 12 pods, while Redis is down
	})
	defer reports.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := reports.Do(ctx, 1, func(ctx context.Context) error {
		// ctx is cancelled if the lease is lost.
		return nil
	})
	var ra interface{ RetryAfter() time.Duration }
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		log.Print("no slot within 2s")
	case errors.As(err, &ra):
		log.Printf("rejected, retry after %v", ra.RetryAfter())
	case err != nil:
		log.Print(err)
	}
}

func ExampleSemaphore_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	sem := distsem.New(rdb, "exports", 10, distsem.Config{})
	defer sem.Close()

	ctx := context.Background()
	p, err := sem.Acquire(ctx, 3) // a heavy export takes 3 of 10
	if err != nil {
		log.Fatal(err)
	}
	defer p.Release(ctx)
	fmt.Println("fence for the audit log:", p.Fence())
	select {
	case <-p.Lost():
		log.Print("lease lost: stop the export")
	default:
	}
}
