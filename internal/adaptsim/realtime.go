package adaptsim

import (
	"math"
	"math/rand/v2"
	"time"
)

// Realtime is the simulator's downstream in real time, for tests that cannot
// run in a synctest bubble (the fleet gate's, against a real Redis): it
// serves Workers calls at once, FIFO beyond, each for a lognormal service
// time (median Median, σ Sigma), so its ideal concurrency is Workers. Its
// methods are safe for concurrent use. Use NewRealtime.
type Realtime struct {
	*Pool
	median time.Duration
	sigma  float64
}

// NewRealtime returns a downstream of workers workers whose service times
// have the given median and lognormal σ.
func NewRealtime(workers int, median time.Duration, sigma float64) *Realtime {
	return &Realtime{Pool: NewPool(workers), median: median, sigma: sigma}
}

// Serve queues for a worker, holds it for a service time drawn from rng and
// gives it back.
func (d *Realtime) Serve(rng *rand.Rand) {
	d.Pool.Serve(func() time.Duration {
		return time.Duration(float64(d.median) * math.Exp(d.sigma*rng.NormFloat64()))
	})
}
