package distsem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// A Permit is weight held on a Semaphore, until Release or until its lease is
// lost. Its lease is renewed every Lease/3 by a timer the Permit owns (a
// goroutine exists only while a renewal call is in flight); Release stops the
// timer and waits for a renewal in flight before it sends the release. A Permit
// is safe for simultaneous use by multiple goroutines. The zero Permit is not
// usable: get one from Acquire or TryAcquire.
type Permit struct {
	s      *Semaphore
	token  string
	weight int64
	fence  int64
	kind   permitKind
	// counted: the weight is also held on the local fallback share.
	counted bool
	// tomb: the release writes a tombstone, because more than one acquire call
	// carried this token (a retry or a heartbeat), and an earlier one could
	// still run in Redis after the release and grant the token to no one.
	tomb bool

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}

	mu sync.Mutex
	// mu guards:
	released bool
	isLost   bool
	deadline time.Time   // local deadline: last successful renewal's send time + Lease
	renewT   *time.Timer // fires the next renewal
	expireT  *time.Timer // fires at the local deadline
	inflight chan struct{}
	stopCall context.CancelFunc // cancels the renewal in flight
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
	p.mu.Lock()
	p.deadline = sent.Add(s.cfg.Lease)
	p.renewT = time.AfterFunc(s.cfg.Lease/3, p.renew)
	p.expireT = time.AfterFunc(time.Until(p.deadline), p.expire)
	p.mu.Unlock()
	return p
}

func (s *Semaphore) basePermit(w int64, kind permitKind) *Permit {
	p := &Permit{s: s, weight: w, kind: kind, lost: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
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

// Release gives the permit back. Renewal is stopped, and a renewal in flight
// is cancelled and waited for, before the release is sent, so an intentional
// release is never reported as a lost lease. The release call is detached from
// ctx's cancellation (it has its own CallTimeout), so a cancelled request still
// frees its permit. If it fails, it is retried in the background until the lease
// would have expired, and the error is returned. Release is idempotent: later
// calls return nil.
func (p *Permit) Release(ctx context.Context) error {
	p.mu.Lock()
	if p.released {
		p.mu.Unlock()
		return nil
	}
	p.released = true
	var inflight chan struct{}
	if p.kind == permitRedis {
		p.renewT.Stop()
		p.expireT.Stop()
		inflight = p.inflight
		if p.stopCall != nil {
			p.stopCall()
		}
	}
	p.mu.Unlock()
	if inflight != nil {
		<-inflight
	}
	p.cancel(ErrReleased)
	s := p.s
	s.fail.release(p)
	if p.kind != permitRedis {
		return nil
	}
	// The grant was seen. If the token's only acquire call was the one that
	// granted it, no late acquire of it can be pending and no tombstone is
	// needed, unless a late renewal could re-adopt the token.
	_, _, _, err := s.call(context.WithoutCancel(ctx), breaker.FailClosed, releaseScript, s.args(p.token, s.cfg.TombstoneTTL.Milliseconds(), 0, b2i(s.cfg.Readopt || p.tomb)))
	if err != nil {
		s.cleanup(p.token)
		return fmt.Errorf("distsem: release %q: %w", s.name, err)
	}
	return nil
}

// renew runs on renewT: one renewal call, then re-arms the timer (Lease/3 after a
// success, sooner after a failure) unless the permit was released or lost.
func (p *Permit) renew() {
	s := p.s
	p.mu.Lock()
	if p.released || p.isLost {
		p.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.inflight, p.stopCall = done, cancel
	p.mu.Unlock()

	sent := time.Now()
	r, _, _, err := s.call(ctx, breaker.FailClosed, renewScript, s.args(p.token, p.weight, s.cfg.Lease.Milliseconds(), p.fence, b2i(s.cfg.Readopt)))
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight, p.stopCall = nil, nil
	close(done)
	if p.released || p.isLost {
		return
	}
	interval := s.cfg.Lease / 3
	switch {
	case err != nil:
		// Try again sooner; the local deadline decides when it is lost.
		p.renewT.Reset(interval / 3)
	case r[0] == stRenewed || r[0] == stReadopted:
		if r[0] == stReadopted {
			s.readopts.Add(1)
		}
		p.deadline = sent.Add(s.cfg.Lease)
		p.expireT.Reset(time.Until(p.deadline))
		p.renewT.Reset(interval)
	default:
		p.loseLocked()
	}
}

// expire runs on expireT at the local deadline.
func (p *Permit) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.isLost {
		return
	}
	if d := time.Until(p.deadline); d > 0 { // renewed while the timer fired
		p.expireT.Reset(d)
		return
	}
	p.loseLocked()
}

func (p *Permit) loseLocked() {
	p.isLost = true
	p.renewT.Stop()
	p.expireT.Stop()
	p.s.lost.Add(1)
	p.cancel(ErrLeaseLost) // before Lost closes: its readers see the cause
	close(p.lost)
}
