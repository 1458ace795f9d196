package main

import (
	"context"
	"sync"
	"time"
)

// load offers calls from a fleet's processes and keeps what each call
// recorded.
type load[R any] struct {
	wg sync.WaitGroup

	mu sync.Mutex
	// mu guards:
	recs []R
}

// offer calls call(i) rate times a second from each of procs processes
// during [from, until), each call in a goroutine of its own (open loop: a
// call that blocks does not hold back the next arrival, as requests to a
// server do not wait for each other), the processes' arrivals staggered
// evenly, and keeps what each returns. It returns when the last arrival
// has been started (or ctx is done); wait waits for the calls.
func (l *load[R]) offer(ctx context.Context, procs int, from, until time.Time, rate float64, call func(i int) R) {
	every := time.Duration(float64(time.Second) / rate)
	var starters sync.WaitGroup
	for i := range procs {
		first := from.Add(every * time.Duration(i) / time.Duration(procs))
		starters.Go(func() {
			for next := first; next.Before(until); next = next.Add(every) {
				if sleepUntil(ctx, next); ctx.Err() != nil {
					return
				}
				l.wg.Go(func() {
					r := call(i)
					l.mu.Lock()
					l.recs = append(l.recs, r)
					l.mu.Unlock()
				})
			}
		})
	}
	starters.Wait()
}

// wait waits for every call started by offer and returns what they
// recorded, clearing it.
func (l *load[R]) wait() []R {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs
	l.recs = nil
	return r
}
