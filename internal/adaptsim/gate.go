package adaptsim

import (
	"context"

	"github.com/floodgate-go/floodgate/adaptive"
)

// Gate is an adaptive.Gate as a Limiter: TryHold, released with Drop when the
// call was dropped.
func Gate(g *adaptive.Gate) Limiter { return gateLimiter{g} }

type gateLimiter struct{ g *adaptive.Gate }

func (s gateLimiter) Acquire(ctx context.Context) (func(bool), bool) {
	h, err := s.g.TryHold(ctx, 1)
	if err != nil {
		return nil, false
	}
	return func(dropped bool) {
		if dropped {
			s.g.Drop(h)
		} else {
			h.Release()
		}
	}, true
}

func (s gateLimiter) Limit() int { return int(s.g.Limit()) }
