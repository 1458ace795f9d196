package distsem

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Wake-ups. Each Semaphore has one notify channel, "{name}:n:<id>", and one
// pub/sub connection, opened by the first Acquire that has to queue. The script
// that grants a waiter by hand-off publishes the waiter's token on the channel
// of the waiter's process only (SPUBLISH on Cluster, so the message stays on the
// shard of the hash tag). A lost message (the connection dropped, the
// subscription was not confirmed yet) costs latency, not liveness: every waiter
// heartbeats every WaiterTTL/3 with an acquire call that also claims a grant, and
// each (re)subscription wakes every local waiter to check at once.

// register adds a local waiter for tok and returns the channel it is woken on.
func (s *Semaphore) register(tok string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[tok] = ch
	s.mu.Unlock()
	return ch
}

func (s *Semaphore) unregister(tok string) {
	s.mu.Lock()
	delete(s.waiters, tok)
	s.mu.Unlock()
}

func (s *Semaphore) wake(tok string) {
	s.mu.Lock()
	ch := s.waiters[tok]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Semaphore) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// listen starts the pub/sub connection and its reader goroutine once. It does
// not wait for the subscription: the confirmation wakes all waiters.
func (s *Semaphore) listen() {
	s.mu.Lock()
	if s.ps != nil || s.closed {
		s.mu.Unlock()
		return
	}
	channel := s.prefix + s.id
	// No channels yet, so creating the PubSub does no I/O; the subscription
	// is made below, outside the lock.
	var ps *redis.PubSub
	if s.sharded {
		ps = s.client.SSubscribe(s.stopCtx)
	} else {
		ps = s.client.Subscribe(s.stopCtx)
	}
	s.ps = ps
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	s.bg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.bg.Done()
		// The channel is remembered even if this call fails, and go-redis
		// subscribes again on every reconnect. Done here so that the caller
		// never waits for it.
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.CallTimeout)
		if s.sharded {
			ps.SSubscribe(ctx, channel)
		} else {
			ps.Subscribe(ctx, channel)
		}
		cancel()
		for m := range msgs {
			switch m := m.(type) {
			case *redis.Message:
				s.wake(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
					s.wakeAll()
				}
			}
		}
	}()
}
