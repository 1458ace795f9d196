package shaper_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/shaper"
)

// A GCRA meter: tenant acme may start 5 PDF exports a minute, all 5 at once after a
// quiet spell; the sixth is told exactly when to come back.
func ExampleMeter_AllowNAt() {
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5), Burst: 5})
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= 6; i++ {
		d, _ := m.AllowNAt("tenant:acme:export", at, 1)
		fmt.Printf("export %d: allowed=%v remaining=%d retry-after=%v\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	d, _ := m.AllowNAt("tenant:acme:export", at.Add(12*time.Second), 1)
	fmt.Println("12s later:", d.Allowed)
	// Output:
	// export 1: allowed=true remaining=4 retry-after=0s
	// export 2: allowed=true remaining=3 retry-after=0s
	// export 3: allowed=true remaining=2 retry-after=0s
	// export 4: allowed=true remaining=1 retry-after=0s
	// export 5: allowed=true remaining=0 retry-after=0s
	// export 6: allowed=false remaining=0 retry-after=12s
	// 12s later: true
}

// A weight larger than the burst can never be admitted: it is an error, not a
// retry-after.
func ExampleMeter_AllowNAt_tooLarge() {
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 5})
	_, err := m.AllowNAt("k", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 6)
	fmt.Println(errors.Is(err, shaper.ErrTooLarge), err)
	// Output: true shaper: weight exceeds burst
}

// The seed document's token bucket: capacity 10, one token a second.
func ExampleNewTokenBucket() {
	tb := shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerSecond(1), Burst: 10})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, _ := tb.AllowNAt("customer:42", at, 10)
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = tb.AllowNAt("customer:42", at, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	d, _ = tb.AllowNAt("customer:42", at.Add(10*time.Second), 0)
	fmt.Println(d.Remaining)
	// Output:
	// true 0
	// false 1s
	// 10
}

// The fixed window's boundary burst, exactly as the seed describes it.
func ExampleNewFixedWindow() {
	fw := shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerMinute(60)})
	end := time.Date(2026, 1, 1, 12, 0, 59, 0, time.UTC)
	a, _ := fw.AllowNAt("k", end, 60)
	b, _ := fw.AllowNAt("k", end.Add(time.Second), 60)
	fmt.Println(a.Allowed, b.Allowed, "within one second")
	// Output: true true within one second
}

// The sliding log never admits more than the limit in any rolling window.
func ExampleNewSlidingLog() {
	sl := shaper.NewSlidingLog(shaper.Limit{Rate: shaper.PerMinute(2)})
	at := time.Date(2026, 1, 1, 12, 0, 59, 0, time.UTC)
	sl.AllowNAt("k", at, 2)
	d, _ := sl.AllowNAt("k", at.Add(time.Second), 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	// Output: false 59s
}

// The sliding counter weights the previous window: half-way through the next
// minute, half of the previous minute's 10 still count.
func ExampleNewSlidingCounter() {
	sc := shaper.NewSlidingCounter(shaper.Limit{Rate: shaper.PerMinute(10)})
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sc.AllowNAt("k", at, 10)
	d, _ := sc.AllowNAt("k", at.Add(90*time.Second), 0)
	fmt.Println(d.Remaining)
	// Output: 5
}

// Export jobs start at most 5/s, smoothly, shared by every worker goroutine; the
// backlog is bounded. Each job is one call of Do. (Real time: compiled, not run.)
func ExampleQueue_Do() {
	q := shaper.NewQueue(shaper.PerSecond(5), shaper.QueueConfig{MaxQueue: 100})
	defer q.Close()
	export := func(ctx context.Context, job int) error { return nil } // the expensive part
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for job := range jobs {
				err := q.Do(context.Background(), 1, func(ctx context.Context) error {
					return export(ctx, job)
				})
				if err != nil {
					log.Printf("export %d: %v", job, err) // ErrQueueFull, or export's error
				}
			}
		})
	}
	for job := range 20 {
		jobs <- job
	}
	close(jobs)
	wg.Wait()
}

// Wait as a gate in front of a call, with a bounded delay.
func ExampleQueue_Wait() {
	q := shaper.NewQueue(shaper.PerSecond(1), shaper.QueueConfig{MaxWait: 500 * time.Millisecond})
	defer q.Close()
	ctx := context.Background()
	fmt.Println(q.Wait(ctx, 1)) // released at once
	err := q.Wait(ctx, 1)       // its slot is 1s away: more than MaxWait
	if re, ok := errors.AsType[*shaper.RejectError](err); ok {
		fmt.Println(errors.Is(err, shaper.ErrMaxWait), re.RetryAfter().Round(100*time.Millisecond))
	}
	// Output:
	// <nil>
	// true 500ms
}

// One limit for the whole process, as x/time/rate's Limiter: no keys, and the same
// decisions as a Meter's single key.
func ExampleLimiter_AllowNAt() {
	l := shaper.NewLimiter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 2})
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= 3; i++ {
		d, _ := l.AllowNAt(at, 1)
		fmt.Printf("call %d: allowed=%v remaining=%d retry-after=%v\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	_, err := l.AllowNAt(at, 3)
	fmt.Println(err)
	// Output:
	// call 1: allowed=true remaining=1 retry-after=0s
	// call 2: allowed=true remaining=0 retry-after=0s
	// call 3: allowed=false remaining=0 retry-after=100ms
	// shaper: weight exceeds burst
}
