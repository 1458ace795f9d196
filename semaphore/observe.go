package semaphore

import (
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// emit reports e, from a Weighted, to o, which is non-nil.
func emit(o floodgate.Observer, e floodgate.Event) {
	e.Component = floodgate.ComponentSemaphore
	o.Observe(e)
}

// emit reports e to Config.Observer, which is non-nil. No lock is held.
func (s *Weighted) emit(e floodgate.Event) { emit(s.cfg.Observer, e) }

// report reports an event of kind k and weight n, after d, to o, which is
// non-nil: the events of every grant, release and cancellation, so built for
// speed. The gc compiler (go1.26, amd64) builds an Event literal with at most
// four words set (Kind, Component's two, N) in the call's own arguments;
// with more it builds it aside and copies it, and the copy's 16-byte loads
// of the narrower stores just made cannot be forwarded from the store
// buffer: the processor stalls, about 7 ns an event on the bench machine
// (BenchmarkOtelSemaphore; emit pays the same for the copy of its
// argument). So Duration is set only when it is not 0, which a grant
// without a wait and a release never are. Nothing in the language promises
// this: a compiler change can bring the copy back, which the benchmark's
// metrics=otel row against metrics=inline-guarded would show.
func report(o floodgate.Observer, k floodgate.Kind, n int64, d time.Duration) {
	if d == 0 {
		o.Observe(floodgate.Event{Kind: k, Component: floodgate.ComponentSemaphore, N: n})
		return
	}
	o.Observe(floodgate.Event{Kind: k, Component: floodgate.ComponentSemaphore, N: n, Duration: d})
}

// admitted reports a grant of n after waiting waited. If the Observer
// panics, the weight is released before the panic goes on, so that an
// Observer cannot leak weight (the caller never got to defer its Release).
func (s *Weighted) admitted(n int64, waited time.Duration) {
	ok := false
	defer func() {
		if !ok {
			s.mu.Lock()
			s.releaseLocked(n)
			s.mu.Unlock()
		}
	}()
	report(s.cfg.Observer, floodgate.KindAdmit, n, waited)
	ok = true
}

// reportReject reports the rejection err of n after waiting waited.
func (s *Weighted) reportReject(n int64, err error, waited time.Duration) {
	s.emit(floodgate.Event{Kind: floodgate.KindReject, N: n, Reason: reject.ReasonOf(err), Duration: waited, Err: err})
}

// canceledAfter reports an Acquire of n queued at start that returned
// ctx.Err().
func (s *Weighted) canceledAfter(n int64, start time.Time) {
	if s.cfg.Observer != nil {
		report(s.cfg.Observer, floodgate.KindCancel, n, time.Since(start))
	}
}
