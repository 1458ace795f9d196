package main

// TODO(merge): shaperredis.Meter has Admit; delete this file and pass the
// meter itself as the bulkhead.Rate (shaper.NewRedisMeter → shaperredis.NewMeter).

import (
	"context"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/shaper"
)

// redisRate adapts a Redis meter to bulkhead.Rate.
func redisRate(m *shaper.RedisMeter) bulkhead.Rate { return admitter{m} }

type admitter struct{ m *shaper.RedisMeter }

func (a admitter) Admit(ctx context.Context, key string, n int64) (shaper.Decision, error) {
	d, err := a.m.AllowN(ctx, key, n)
	if err == nil && !d.Allowed {
		err = d.Err()
	}
	return d, err
}
