package shapertest

import (
	"sync"

	"github.com/floodgate-go/floodgate"
)

// A Recorder is a floodgate.Observer that keeps the events it is told, for
// the observer tests of shaper and shaperredis.
type Recorder struct {
	mu     sync.Mutex
	events []floodgate.Event
}

// Observe keeps e.
func (r *Recorder) Observe(e floodgate.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Take returns the events told since the last Take.
func (r *Recorder) Take() []floodgate.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}
