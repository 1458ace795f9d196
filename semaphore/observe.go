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
	s.emit(floodgate.Event{Kind: floodgate.KindAdmit, N: n, Duration: waited})
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
		s.emit(floodgate.Event{Kind: floodgate.KindCancel, N: n, Duration: time.Since(start)})
	}
}
