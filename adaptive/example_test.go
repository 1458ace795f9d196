package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead"
)

// A gate starts at its Initial limit (Min if zero) and moves it from the
// holds' latency, in rounds of at least MinSamples holds; until the first
// round is decided it is a plain gate of that limit. A hold given back with
// Release is a latency sample, one given back with Drop is a drop.
func ExampleNew() {
	g := adaptive.New(adaptive.Config{Min: 2, Max: 64, Initial: 3})
	ctx := context.Background()

	var held []floodgate.Held
	for i := range 4 {
		h, err := g.TryHold(ctx, 1)
		if err != nil {
			fmt.Printf("hold %d: %v (no capacity: %v)\n", i+1, err, errors.Is(err, adaptive.ErrNoCapacity))
			continue
		}
		held = append(held, h)
	}
	_, err := g.Hold(ctx, 3) // more than Min: the limit may fall to Min at any round
	fmt.Println("hold of 3:", err)

	st := g.Stats()
	fmt.Printf("limit %d, in flight %d\n", st.Limit, st.InFlight)
	held[0].Release()
	held[1].Release()
	g.Drop(held[2]) // say the downstream timed this one out
	st = g.Stats()
	fmt.Printf("in flight %d, samples %d, drops %d, rounds %d\n", st.InFlight, st.Samples, st.Drops, st.Rounds)
	// Output:
	// hold 4: adaptive: no capacity (no capacity: true)
	// hold of 3: adaptive: weight above the minimum limit
	// limit 3, in flight 3
	// in flight 0, samples 2, drops 1, rounds 0
}

// An adaptive gate is a gate like any other: here the Gate of a
// bulkhead.Workers, so that as many jobs run at once as the downstream takes,
// whatever the workers' own limit (here its Max). Each job's run time is the
// gate's latency sample.
func ExampleGate_workers() {
	replica := adaptive.New(adaptive.Config{Min: 2, Max: 100})
	w := bulkhead.NewWorkers(100, bulkhead.WorkersConfig{
		Classes: []bulkhead.WorkerClass{{Name: "exports", MaxQueue: 1000}},
		Gate:    replica,
	})
	var ran atomic.Int64
	for range 5 {
		err := w.Submit(context.Background(), "exports", bulkhead.Job{Run: func(ctx context.Context) error {
			ran.Add(1) // the export, against the downstream
			return nil
		}})
		if err != nil {
			fmt.Println("submit:", err)
		}
	}
	if err := w.Shutdown(context.Background()); err != nil { // runs the backlog, waits for the jobs
		fmt.Println("shutdown:", err)
	}
	st := replica.Stats()
	fmt.Printf("%d jobs ran; the gate measured %d holds, in flight %d\n", ran.Load(), st.Samples, st.InFlight)
	// Output:
	// 5 jobs ran; the gate measured 5 holds, in flight 0
}
