package main

import (
	"context"
	"sync"
	"time"
)

// stallWatch records when this program was not scheduled for a while: a
// goroutine sleeps stallTick in a loop, and a wake-up later than stallMin
// is a stall. On a shared machine a stall longer than CallTimeout makes
// calls time out that Redis answered in time; each row of the report says
// the longest stall during its run.
type stallWatch struct {
	done chan struct{}

	mu sync.Mutex
	// mu guards:
	stalls []stallAt
}

type stallAt struct {
	at   time.Time // when the late wake-up came
	late time.Duration
}

const (
	stallTick = 10 * time.Millisecond
	stallMin  = 20 * time.Millisecond
)

// watchStalls starts the watch; it stops when ctx is done, and wait waits
// for that.
func watchStalls(ctx context.Context) *stallWatch {
	w := &stallWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(stallTick)
		defer t.Stop()
		prev := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if late := now.Sub(prev) - stallTick; late > stallMin {
					w.mu.Lock()
					w.stalls = append(w.stalls, stallAt{now, late})
					w.mu.Unlock()
				}
				prev = now
			}
		}
	}()
	return w
}

func (w *stallWatch) wait() { <-w.done }

// worst returns the longest stall that ended in [from, to].
func (w *stallWatch) worst(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, s := range w.stalls {
		if !s.at.Before(from) && !s.at.After(to) {
			d = max(d, s.late)
		}
	}
	return d
}
