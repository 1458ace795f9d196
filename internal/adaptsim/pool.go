package adaptsim

import (
	"sync"
	"time"
)

// Pool is a downstream's workers: it serves so many calls at once, FIFO
// beyond. The simulator's downstream, Realtime and the tour's backend are
// each one. Its methods are safe for concurrent use; the zero Pool has no
// workers (Serve waits until SetWorkers gives some).
type Pool struct {
	mu      sync.Mutex
	workers int
	count   func() int // if set, the number of workers now (a scenario's phase)
	busy    int
	queue   []chan struct{}
	served  int64
}

// NewPool returns a pool of n workers.
func NewPool(n int) *Pool { return &Pool{workers: n} }

// SetWorkers sets the number of workers. Fewer than are busy wakes nobody
// until enough calls end.
func (p *Pool) SetWorkers(n int) {
	p.mu.Lock()
	p.workers = n
	p.wakeLocked()
	p.mu.Unlock()
}

// Workers returns the number of workers.
func (p *Pool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workersLocked()
}

func (p *Pool) workersLocked() int {
	if p.count != nil {
		return p.count()
	}
	return p.workers
}

// Serve queues for a worker and holds it for service(), which it calls
// once it has one (the service time may depend on when it starts).
func (p *Pool) Serve(service func() time.Duration) {
	p.mu.Lock()
	if p.busy < p.workersLocked() && len(p.queue) == 0 {
		p.busy++
		p.mu.Unlock()
	} else {
		ch := make(chan struct{})
		p.queue = append(p.queue, ch)
		p.mu.Unlock()
		<-ch // a worker was handed to us
	}
	time.Sleep(service())
	p.mu.Lock()
	p.busy--
	p.served++
	p.wakeLocked()
	p.mu.Unlock()
}

// wakeLocked hands free workers to the queue, FIFO.
func (p *Pool) wakeLocked() {
	for w := p.workersLocked(); p.busy < w && len(p.queue) > 0; {
		close(p.queue[0])
		p.queue = p.queue[1:]
		p.busy++
	}
}

// Inside returns the calls in the pool now: being served or queued.
func (p *Pool) Inside() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy + len(p.queue)
}

// Served returns the calls served so far.
func (p *Pool) Served() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}
