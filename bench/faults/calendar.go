package main

import (
	"sync"
	"time"
)

// calendar spaces the moments Redis comes back in scenarios that run at
// once. A Redis that returns has work queued (connections, commands left in
// its sockets) and every process of its fleet calls it again: on a 2-core
// machine two fleets recovering at the same instant compete for the cores,
// and their calls time out for seconds (measured: distsem after a 30 s
// freeze was exact again 0.6 s after Redis returned alone, and still not 8 s
// after when three such runs returned together). So a run's fault begins
// only at a whole second at which its Redis will return at least
// returnGap away from every other run's return.
type calendar struct {
	mu sync.Mutex
	// mu guards:
	returns []time.Time
}

// returnGap is the least time between two runs' returns of Redis.
const returnGap = 5 * time.Second

// faultStart returns the first time, earliest or whole seconds after it,
// at which a fault that lasts d may begin, and books its return. A nil
// calendar returns earliest.
func (c *calendar) faultStart(earliest time.Time, d time.Duration) time.Time {
	if c == nil {
		return earliest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := earliest; ; t = t.Add(time.Second) {
		ret := t.Add(d)
		free := true
		for _, r := range c.returns {
			if ret.Sub(r).Abs() < returnGap {
				free = false
				break
			}
		}
		if free {
			c.returns = append(c.returns, ret)
			return t
		}
	}
}

// faultLength is how long after its start the fault of f ends: when Redis
// returns, as far as it is known in advance.
func (p params) faultLength(f fault) time.Duration {
	switch f {
	case restarted:
		return p.down
	case failover:
		return p.lag
	case steady:
		return 0
	}
	return p.outage
}
