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
		Classes: []bulkhead.WorkerClass{{Name: "background", MaxQueue: 10}},
		Pace:    shaper.NewQueue(shaper.PerSecond(20), shaper.QueueConfig{}),
	})
	var mu sync.Mutex
	var done []string
	for _, report := range []string{"january", "february", "march"} {
		err := w.Submit(context.Background(), "background", bulkhead.Job{Run: func(ctx context.Context) error {
			mu.Lock()
			done = append(done, report)
			mu.Unlock()
			return nil
		}})
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

// With HandBack, Shutdown runs none of the backlog: OnUnstarted receives each
// queued Job as it was submitted, and its Value says which message to put
// back on the broker.
func ExampleWorkersConfig_handBack() {
	running := make(chan struct{})
	release := make(chan struct{})
	var back []string
	w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
		HandBack: true,
		OnUnstarted: func(class string, job bulkhead.Job, err error) {
			msg := job.Value.(string)
			fmt.Println("put back", msg+":", err)
			if back = append(back, msg); len(back) == 2 {
				close(release)
			}
		},
	})
	for _, msg := range []string{"msg-1", "msg-2", "msg-3"} {
		err := w.Submit(context.Background(), bulkhead.DefaultClass, bulkhead.Job{
			Run: func(ctx context.Context) error {
				fmt.Println("export", msg)
				close(running)
				<-release
				return nil
			},
			Value: msg,
		})
		if err != nil {
			fmt.Println("submit:", err)
		}
	}
	<-running // msg-1 runs, msg-2 and msg-3 are queued
	if err := w.Shutdown(context.Background()); err != nil {
		fmt.Println("shutdown:", err)
	}
	// Output:
	// export msg-1
	// put back msg-2: bulkhead: workers closed
	// put back msg-3: bulkhead: workers closed
}
