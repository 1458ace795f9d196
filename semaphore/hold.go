package semaphore

import (
	"context"
	"sync/atomic"
)

// Hold acquires weight n as Acquire does and returns what a caller that keeps
// the weight past a function's return needs: the context the work runs under
// (ctx itself: a local semaphore never takes weight back) and release, which
// releases n. release may be called more than once, from any goroutine: only
// the first call releases, so a deferred release beside an explicit one cannot
// release weight that another caller holds. On error nothing is held, the
// semaphore is unchanged, and release is nil; the errors are Acquire's.
//
// Hold allocates the release function; Acquire and Release do not, and suit
// hot paths. Hold is the shape that consumers such as bulkheadpgx.Gate take.
func (s *Weighted) Hold(ctx context.Context, n int64) (context.Context, func(), error) {
	if err := s.Acquire(ctx, n); err != nil {
		return nil, nil, err
	}
	var done atomic.Bool
	return ctx, func() {
		if !done.Swap(true) {
			s.Release(n)
		}
	}, nil
}

// Limit returns the current limit (see SetLimit). A weight above it is
// refused at once with ErrTooLarge.
func (s *Weighted) Limit() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}
