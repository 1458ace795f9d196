package tour

import (
	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// A Backend makes the limiters of one pod: in-process ones, or ones shared
// through Redis. Limiters of the same name are one limit only when Shared.
type Backend struct {
	Name   string // the report's column header
	Shared bool   // limits hold for the whole fleet
	Gate   func(pod int, name string, limit int64) floodgate.Gate
	Keyed  func(pod int, name string, limit int64) floodgate.KeyedGate
	Rate   func(pod int, name string, lim shaper.Limit) bulkhead.Rate
	// Pacer returns the pacer and the function that closes it.
	Pacer func(pod int, name string, r shaper.Rate) (bulkhead.Pacer, func())
}

// LocalBackend makes a fresh in-process limiter for every pod.
func LocalBackend(name string) *Backend {
	return &Backend{
		Name: name,
		Gate: func(_ int, _ string, limit int64) floodgate.Gate {
			return semaphore.New(limit, semaphore.Config{})
		},
		Keyed: func(_ int, _ string, limit int64) floodgate.KeyedGate {
			return semaphore.NewKeyed(limit, semaphore.KeyedConfig{})
		},
		Rate: func(_ int, _ string, lim shaper.Limit) bulkhead.Rate {
			return shaper.NewMeter(lim)
		},
		Pacer: func(_ int, _ string, r shaper.Rate) (bulkhead.Pacer, func()) {
			q := shaper.NewQueue(r, shaper.QueueConfig{})
			return q, q.Close
		},
	}
}
