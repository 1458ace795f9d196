package bulkhead_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/shaper"
)

// Export jobs start at most 20 a second, one at a time here so that the
// output is in order; Shutdown runs the backlog before it returns.
func ExampleNewWorkers() {
	w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
		Classes: []bulkhead.Class{{Name: "background", MaxQueue: 10}},
		Pace:    shaper.NewQueue(shaper.PerSecond(20), shaper.QueueConfig{}),
	})
	var mu sync.Mutex
	var done []string
	for _, report := range []string{"january", "february", "march"} {
		err := w.Submit(context.Background(), "background", func(ctx context.Context) error {
			mu.Lock()
			done = append(done, report)
			mu.Unlock()
			return nil
		})
		if err != nil {
			fmt.Println("submit:", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		fmt.Println("shutdown:", err)
	}
	fmt.Println(done)
	st := w.Stats()
	fmt.Println("started", st.Classes[0].Started, "running", st.Running)
	// Output:
	// [january february march]
	// started 3 running 0
}
