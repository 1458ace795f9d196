package breaker

import (
	"context"
	"time"

	"github.com/floodgate-go/floodgate/internal/storeprobe"
)

func init() {
	storeprobe.Install = func(b *Breaker, probe func(context.Context) error) {
		b.init()
		b.probe.CompareAndSwap(nil, &probe)
	}
}

// probeAnswer answers a call that found the open period over on a breaker
// with a probe: it starts the probe goroutine unless one is running, and
// reports true, the call then being answered by policy as while half-open
// with its probes in flight. It reports false if the breaker has no probe.
func (b *Breaker) probeAnswer() bool {
	pr := b.probe.Load()
	if pr == nil {
		return false
	}
	if b.probing.CompareAndSwap(false, true) {
		go b.runProbes(*pr)
	}
	return true
}

// runProbes probes the store through gobreaker until the breaker is no
// longer half-open (HalfOpenProbes successes closed it, or a failure opened
// it again), or a probe's outcome told gobreaker nothing.
func (b *Breaker) runProbes(probe func(context.Context) error) {
	defer b.probing.Store(false)
	for {
		counted := b.probeOnce(probe, b.probeTimeout())
		b.dispatch()
		if !counted || State(b.cb.State()) != StateHalfOpen {
			return
		}
	}
}

// probeTimeout bounds one of the breaker's own probes: CallTimeout, or
// DefaultCallTimeout when that is off. It is also the Delay of a refusal
// while a probe runs: the longest the probe can take.
func (b *Breaker) probeTimeout() time.Duration {
	if b.callTimeout > 0 {
		return b.callTimeout
	}
	return DefaultCallTimeout
}

// probeOnce makes one probe through gobreaker and reports whether gobreaker
// counted its outcome (a success or a failure).
func (b *Breaker) probeOnce(probe func(context.Context) error, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var v error
	ran := false
	_, _ = b.cb.Execute(func() (struct{}, error) {
		ran = true
		b.probes.Add(1)
		v = b.verdict(context.Background(), deadline, probe(ctx))
		if isFailure(v) {
			b.failures.Add(1)
			b.probeFailures.Add(1)
		}
		return struct{}{}, v
	})
	return ran && v != errExcluded && v != errCaller
}
