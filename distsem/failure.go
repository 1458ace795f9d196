package distsem

import (
	"context"
	"sync/atomic"
)

// failure is the failure policy (temporary: no breaker yet).
type failure struct {
	degraded atomic.Int64
}

func (f *failure) init(s *Semaphore, cfg Config) {}

func (f *failure) do(ctx context.Context, fn func(context.Context) ([]int64, error)) ([]int64, error) {
	return fn(ctx)
}

func (f *failure) open() bool                { return false }
func (f *failure) fallbackOn(err error) bool { return false }
func (f *failure) countRedis(w int64) bool   { return false }
func (f *failure) release(p *Permit)         {}
func isStoreFailure(err error) bool          { return err != nil }
func (s *Semaphore) fallback(ctx context.Context, w int64, wait bool, cause error) (*Permit, error) {
	return nil, cause
}
