package adaptsim

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Realtime is the simulator's downstream in real time, for tests that cannot
// run in a synctest bubble (the fleet gate's, against a real Redis): it
// serves Workers calls at once, FIFO beyond, each for a lognormal service
// time (median Median, σ Sigma), so its ideal concurrency is Workers. Its
// methods are safe for concurrent use. Use NewRealtime.
type Realtime struct {
	median time.Duration
	sigma  float64

	mu      sync.Mutex
	workers int
	busy    int
	queue   []chan struct{}
	served  int64
}

// NewRealtime returns a downstream of workers workers whose service times
// have the given median and lognormal σ.
func NewRealtime(workers int, median time.Duration, sigma float64) *Realtime {
	return &Realtime{median: median, sigma: sigma, workers: workers}
}

// Serve queues for a worker, holds it for a service time drawn from rng and
// gives it back.
func (d *Realtime) Serve(rng *rand.Rand) {
	d.mu.Lock()
	if d.busy < d.workers && len(d.queue) == 0 {
		d.busy++
		d.mu.Unlock()
	} else {
		ch := make(chan struct{})
		d.queue = append(d.queue, ch)
		d.mu.Unlock()
		<-ch
	}
	time.Sleep(time.Duration(float64(d.median) * math.Exp(d.sigma*rng.NormFloat64())))
	d.mu.Lock()
	d.busy--
	d.served++
	for d.busy < d.workers && len(d.queue) > 0 {
		ch := d.queue[0]
		d.queue = d.queue[1:]
		d.busy++
		close(ch)
	}
	d.mu.Unlock()
}

// Inside returns the calls in the downstream now: being served or queued.
func (d *Realtime) Inside() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busy + len(d.queue)
}

// Served returns the calls served so far.
func (d *Realtime) Served() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served
}

// Workers returns the number of workers.
func (d *Realtime) Workers() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workers
}
