package main

// TODO(merge): semaphore.Weighted has Hold; delete this file and pass the
// *semaphore.Weighted itself as the class's Gate.

import (
	"context"

	"github.com/floodgate-go/floodgate/semaphore"
)

// localGate adapts a semaphore.Weighted to bulkheadpgx.Gate until the leaf
// has Hold. Its embedded TryAcquire, Acquire and Release make bulkheadpgx use
// the fast shape, so Hold is never called.
type localGate struct{ *semaphore.Weighted }

func (g localGate) Hold(ctx context.Context, n int64) (context.Context, func(), error) {
	if err := g.Acquire(ctx, n); err != nil {
		return nil, nil, err
	}
	return ctx, func() { g.Release(n) }, nil
}
