package main

import (
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// A backend makes the limiters of one pod: in-process ones, or ones shared
// through Redis. Limiters of the same name are one limit only when shared.
type backend struct {
	name   string
	shared bool // limits hold for the whole fleet
	gate   func(pod int, name string, limit int64) bulkhead.Gate
	keyed  func(pod int, name string, limit int64) bulkhead.KeyedGate
	rate   func(pod int, name string, lim shaper.Limit) bulkhead.Rate
	pacer  func(pod int, name string, r shaper.Rate) (bulkhead.Pacer, func())
	close  func()
}

// localBackend makes a fresh in-process limiter for every pod.
func localBackend(name string) *backend {
	return &backend{
		name: name,
		gate: func(_ int, _ string, limit int64) bulkhead.Gate {
			return semaphore.New(limit, semaphore.Config{})
		},
		keyed: func(_ int, _ string, limit int64) bulkhead.KeyedGate {
			return semaphore.NewKeyed(limit, semaphore.KeyedConfig{})
		},
		rate: func(_ int, _ string, lim shaper.Limit) bulkhead.Rate {
			return shaper.NewMeter(lim)
		},
		pacer: func(_ int, _ string, r shaper.Rate) (bulkhead.Pacer, func()) {
			q := shaper.NewQueue(r, shaper.QueueConfig{})
			return q, q.Close
		},
		close: func() {},
	}
}
