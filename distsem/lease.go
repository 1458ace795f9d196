package distsem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// A Permit is weight held on a Semaphore, until Release or until its lease is
// lost. Its lease is renewed in the background every Lease/3 by a goroutine the
// Permit owns, which exits before Release returns. A Permit is safe for
// simultaneous use by multiple goroutines. The zero Permit is not usable: get one
// from Acquire or TryAcquire.
type Permit struct {
	s      *Semaphore
	token  string
	weight int64
	fence  int64
	kind   permitKind
	// counted: the weight is also held on the local fallback share.
	counted bool

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	released bool // mu guards
}

type permitKind uint8

const (
	permitRedis permitKind = iota // held in Redis, renewed
	permitLocal                   // FailLocal: held on the local share only
	permitOpen                    // FailOpen: held nowhere
)

// newPermit returns a Redis permit and starts its renewal. sent is when the
// acquire call that granted or claimed it was sent: Redis set its expiry to
// TIME + Lease after that, so sent + Lease is a safe local deadline.
func (s *Semaphore) newPermit(tok string, w, fence int64, sent time.Time) *Permit {
	p := s.basePermit(w, permitRedis)
	p.token, p.fence = tok, fence
	p.counted = s.fail.countRedis(w)
	go p.renew(sent.Add(s.cfg.Lease))
	return p
}

func (s *Semaphore) basePermit(w int64, kind permitKind) *Permit {
	p := &Permit{s: s, weight: w, kind: kind, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	if kind != permitRedis {
		close(p.done)
	}
	return p
}

// Fence returns the permit's fencing number: unique per grant and increasing
// across grants of one semaphore (it is max(previous+1, Redis time in µs)), so it
// keeps increasing after the semaphore's state was lost unless the Redis clock
// steps back. 0 for a permit granted without Redis by the failure policy.
func (p *Permit) Fence() int64 { return p.fence }

// Weight returns the weight held.
func (p *Permit) Weight() int64 { return p.weight }

// Degraded reports whether the permit was granted without Redis by the failure
// policy (FailOpen or FailLocal).
func (p *Permit) Degraded() bool { return p.kind != permitRedis }

// Lost returns a channel closed when the lease is lost: Redis no longer held the
// token when renewing (and Config.Readopt could not re-adopt it), or no renewal
// succeeded before the local deadline (the send time of the last successful
// renewal plus Lease, on the monotonic clock). It is never closed by Release.
func (p *Permit) Lost() <-chan struct{} { return p.lost }

// Context returns a context cancelled when the lease is lost (cause
// ErrLeaseLost) or the permit is released (cause ErrReleased). Work that must
// stop when the permit is no longer held runs under it, or under a context
// derived from the caller's with context.AfterFunc; Semaphore.Do does that.
func (p *Permit) Context() context.Context { return p.ctx }

// Release gives the permit back. The renewal goroutine is stopped and has
// exited before the release is sent, so an intentional release never shows up
// as a lost lease. The release call is detached from ctx's cancellation (it has
// its own CallTimeout), so a cancelled request still frees its permit. If it
// fails, it is retried in the background until the lease would have expired,
// and the error is returned. Release is idempotent: later calls return nil.
func (p *Permit) Release(ctx context.Context) error {
	p.mu.Lock()
	if p.released {
		p.mu.Unlock()
		return nil
	}
	p.released = true
	p.mu.Unlock()
	s := p.s
	if p.kind == permitRedis {
		close(p.stop)
		<-p.done
	}
	p.cancel(ErrReleased)
	s.fail.release(p)
	if p.kind != permitRedis {
		return nil
	}
	_, _, _, err := s.call(context.WithoutCancel(ctx), breaker.FailClosed, releaseScript, s.args(p.token, s.cfg.TombstoneTTL.Milliseconds(), 0))
	if err != nil {
		s.cleanup(p.token)
		return fmt.Errorf("distsem: release %q: %w", s.name, err)
	}
	return nil
}

// renew keeps the lease alive until Release closes stop, or until it is lost.
func (p *Permit) renew(deadline time.Time) {
	defer close(p.done)
	s := p.s
	interval := s.cfg.Lease / 3
	tick := time.NewTimer(interval)
	defer tick.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // interrupt an in-flight renewal when Release starts
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-p.stop:
			return
		case <-expire.C:
			p.markLost()
			return
		case <-tick.C:
		}
		sent := time.Now()
		r, _, _, err := s.call(ctx, breaker.FailClosed, renewScript, s.args(p.token, p.weight, s.cfg.Lease.Milliseconds(), p.fence, b2i(s.cfg.Readopt)))
		if ctx.Err() != nil {
			return // released
		}
		if err != nil {
			// Try again sooner; the local deadline decides when it is lost.
			tick.Reset(interval / 3)
			continue
		}
		switch r[0] {
		case stRenewed, stReadopted:
			if r[0] == stReadopted {
				s.readopts.Add(1)
			}
			expire.Reset(time.Until(sent.Add(s.cfg.Lease)))
			tick.Reset(interval)
		default:
			p.markLost()
			return
		}
	}
}

func (p *Permit) markLost() {
	p.s.lost.Add(1)
	p.cancel(ErrLeaseLost) // before Lost closes: its readers see the cause
	close(p.lost)
}
