package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/semaphore"
)

func ExampleNew() {
	// At most 50 expensive report queries at once in this process; callers that
	// cannot get a slot within 2s fail instead of piling up.
	sem := semaphore.New(50, semaphore.Config{MaxWaiters: 200, MaxWait: 2 * time.Second})
	st := sem.Stats()
	fmt.Println(st.Limit, st.InUse, st.Waiting)
	// Output: 50 0 0
}

func ExampleWeighted_Do() {
	sem := semaphore.New(10, semaphore.Config{})
	// A heavy report counts as 4 of the 10 slots; the weight is released when the
	// function returns, even if it panics.
	err := sem.Do(context.Background(), 4, func(ctx context.Context) error {
		fmt.Println("in use while running:", sem.Stats().InUse)
		return nil
	})
	fmt.Println(err, sem.Stats().InUse)
	// Output:
	// in use while running: 4
	// <nil> 0
}

func ExampleNewWeighted() {
	// A drop-in for golang.org/x/sync/semaphore.NewWeighted: limit 8, the zero
	// Config (an unbounded queue, waits bounded only by the context).
	sem := semaphore.NewWeighted(8)
	ctx := context.Background()
	if err := sem.Acquire(ctx, 3); err != nil {
		panic(err)
	}
	fmt.Println(sem.TryAcquire(5), sem.TryAcquire(1))
	sem.Release(8)
	// Output: true false
}

func ExampleRejectError() {
	// MaxWaiters < 0: never queue, reject at once when full.
	sem := semaphore.New(1, semaphore.Config{MaxWaiters: -1})
	sem.TryAcquire(1)
	err := sem.Acquire(context.Background(), 1)

	fmt.Println(errors.Is(err, semaphore.ErrQueueFull))
	var ra interface{ RetryAfter() time.Duration } // what an HTTP layer reads
	if errors.As(err, &ra) {
		fmt.Println("retry after", ra.RetryAfter()) // 0: nothing observed yet
	}
	fmt.Println(sem.Acquire(context.Background(), 2))
	// Output:
	// true
	// retry after 0s
	// semaphore: weight exceeds limit
}

func ExampleWeighted_SetLimit() {
	sem := semaphore.New(4, semaphore.Config{})
	sem.TryAcquire(3)
	sem.SetLimit(2) // held weight is never revoked
	st := sem.Stats()
	fmt.Println(st.Limit, st.InUse, sem.TryAcquire(1))
	sem.Release(2)
	fmt.Println(sem.TryAcquire(1))
	// Output:
	// 2 3 false
	// true
}
