package distsem

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Wake-ups. Each Semaphore has one notify channel, "{name}:n:<id>", and one
// pub/sub connection, opened by the first Acquire that has to queue. The script
// that grants a waiter by hand-off publishes "<token>:<fence>" on the channel of
// the waiter's process only (SPUBLISH on Cluster, so the message stays on the
// shard of the hash tag); the waiter then holds the permit without another call.
// A lost message (the connection dropped, the subscription was not confirmed
// yet) costs latency, not liveness: every waiter heartbeats every min(WaiterTTL, Lease)/3
// with an idempotent acquire call that finds it granted, and each
// (re)subscription wakes every local waiter to check at once.

// register adds a local waiter for tok and returns the channel it is woken on.
// A value received is the fence of a hand-off grant, or 0: check with a call.
func (s *Semaphore) register(tok string) chan int64 {
	ch := make(chan int64, 1)
	s.wmu.Lock()
	s.waiters[tok] = ch
	s.wmu.Unlock()
	return ch
}

func (s *Semaphore) unregister(tok string) {
	s.wmu.Lock()
	delete(s.waiters, tok)
	s.wmu.Unlock()
}

// wake delivers a hand-off message "<token>:<fence>" to its local waiter.
func (s *Semaphore) wake(payload string) {
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return
	}
	fence, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || fence <= 0 {
		fence = 0 // unreadable: the waiter checks with a call
	}
	s.wmu.Lock()
	ch := s.waiters[payload[:i]]
	s.wmu.Unlock()
	if ch != nil {
		select {
		case ch <- fence:
		default:
			// A wake-up is already pending: replace it, a grant wins.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- fence:
			default:
			}
		}
	}
}

func (s *Semaphore) wakeAll() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, ch := range s.waiters {
		select {
		case ch <- 0:
		default:
		}
	}
}

// listen starts the pub/sub connection and its reader goroutine once. The
// caller never waits for the subscription; its confirmation wakes all waiters.
func (s *Semaphore) listen() {
	s.mu.Lock()
	if s.listening || s.closed.Load() {
		s.mu.Unlock()
		return
	}
	s.listening = true
	s.bg.Add(1)
	s.mu.Unlock()
	go s.receive()
}

// receive subscribes to this Semaphore's notify channel and wakes local waiters
// until Close. The PubSub is created with its channel so that on Cluster the
// connection goes to the shard that owns the channel's slot (go-redis routes a
// sharded PubSub by its first channel, on every reconnect too); go-redis
// subscribes again after every reconnect.
func (s *Semaphore) receive() {
	defer s.bg.Done()
	channel := s.prefix + s.id
	ctx, cancel := context.WithTimeout(s.stopCtx, s.callTimeout())
	var ps *redis.PubSub
	if s.sharded {
		ps = s.client.SSubscribe(ctx, channel)
	} else {
		ps = s.client.Subscribe(ctx, channel)
	}
	cancel()
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		ps.Close()
		return
	}
	s.ps = ps
	s.mu.Unlock()
	for m := range ps.ChannelWithSubscriptions(redis.WithChannelSize(256)) {
		switch m := m.(type) {
		case *redis.Message:
			s.wake(m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.wakeAll()
			}
		}
	}
}
