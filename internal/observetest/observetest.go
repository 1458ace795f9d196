// Package observetest is a floodgate.Observer for tests: it keeps the events
// it is told.
package observetest

import (
	"slices"
	"sync"

	"github.com/floodgate-go/floodgate"
)

// A Recorder is a floodgate.Observer that keeps every event, in order. The
// zero Recorder is ready; it is safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	ev []floodgate.Event
}

// Observe keeps e.
func (r *Recorder) Observe(e floodgate.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

// Take returns the events kept since the last Take and forgets them.
func (r *Recorder) Take() []floodgate.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.ev
	r.ev = nil
	return ev
}

// Has reports whether an event of kind was kept since the last Take.
func (r *Recorder) Has(kind floodgate.Kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.ev, func(e floodgate.Event) bool { return e.Kind == kind })
}
