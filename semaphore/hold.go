package semaphore

import (
	"context"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Hold acquires weight n as Acquire does and returns it as a floodgate.Held:
// the gate contract that every floodgate consumer takes (bulkhead layers,
// bulkhead.Workers, bulkheadpgx classes). The Held's context is ctx itself (a
// local semaphore never takes weight back) and its Release releases n, once.
// On error nothing is held; the errors are Acquire's. Hold does not allocate.
func (s *Weighted) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	if err := s.Acquire(ctx, n); err != nil {
		return floodgate.Held{}, err
	}
	return floodgate.NewHeld(ctx, s.releaser(), "", n), nil
}

// TryHold is Hold without waiting: it takes n as TryAcquire does and
// otherwise fails at once with a *RejectError matching ErrNoCapacity, whose
// delay estimates when n could be free (0 without a basis yet), or ErrTooLarge
// when n exceeds the limit. As a failed TryAcquire, a refusal is not counted
// in Stats nor reported to Config.Observer: a consumer's TryHold is the probe
// before a bounded wait (see floodgate.Gate), and the consumer reports the
// outcome. It allocates only on refusal. It panics if n < 0.
func (s *Weighted) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	checkWeight(n)
	s.mu.Lock()
	if s.tryAcquireLocked(n) {
		s.mu.Unlock()
		s.acquiredObserved(n)
		return floodgate.NewHeld(ctx, s.releaser(), "", n), nil
	}
	// The refusal is decided under the same lock as the attempt.
	sentinel, d := ErrNoCapacity, s.estimateLocked(satAdd(s.waitingWeight.int64(), n))
	if n > s.limit {
		sentinel, d = ErrTooLarge, 0
	}
	s.mu.Unlock()
	return floodgate.Held{}, reject.New(sentinel, d)
}

// releaser returns the function a Held calls to release: one per Weighted,
// made in New; a zero Weighted (which New did not make) gets a new one.
func (s *Weighted) releaser() func(string, int64) {
	if s.release != nil {
		return s.release
	}
	return func(_ string, n int64) { s.Release(n) }
}

// Limit returns the current limit (see SetLimit). A weight above it is
// refused at once with ErrTooLarge.
func (s *Weighted) Limit() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}
