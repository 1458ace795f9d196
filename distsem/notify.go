package distsem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wake-ups. Each hub (see below) has one notify channel, "<chanPrefix><id>", and
// one pub/sub connection, opened by the first Acquire that has to queue. For
// a Semaphore made by New the prefix is "{name}:n:"; the Semaphores of a Keyed
// share one hub, and so one channel, connection and receiver goroutine for
// all their keys. The script that grants a waiter by hand-off publishes
// "<token>:<fence>" on the channel of the waiter's process only (SPUBLISH on
// Cluster for a Semaphore, so the message stays on the shard of the hash tag;
// PUBLISH for a Keyed, whose one channel cannot be on every key's shard); the
// waiter then holds the permit without another call.
// A lost message (the connection dropped, the subscription was not confirmed
// yet) costs latency, not liveness: every waiter heartbeats every min(WaiterTTL, Lease)/3
// with an idempotent acquire call that finds it granted, and each
// (re)subscription wakes every local waiter to check at once.

// A hub is what runs behind Semaphores, shared by every Semaphore of a Keyed
// and owned by a Semaphore made by New: the notify id, channel and pub/sub
// connection with its receiver goroutine, the token sequence (tokens are
// unique per hub, so one waiter map serves every key, and a key dropped and
// made again never reuses a token its tombstones refuse), the renewal
// schedule, the mean hold time (so TryAcquire's RetryAfter on a key made
// afresh is estimated from the Keyed's earlier permits), the per-call
// timeout, the background work and Close. A Semaphore of a
// Keyed therefore owns no goroutine, timer or subscription of its own: once
// it has no holders and no waiters, dropping it frees everything it had.
type hub struct {
	client     redis.UniversalClient
	chanPrefix string // the notify channel is chanPrefix + id
	sharded    bool   // subscribe with SSUBSCRIBE (a Semaphore on Cluster)
	id         string // notify id: tokens are "<id>.<seq>"
	seq        atomic.Uint64

	renewals   renewals      // the renewal schedule of the permits of every Semaphore on the hub
	hold       atomic.Int64  // mean hold time of the permits released on the hub (ns, EWMA); 0 if none yet
	subTimeout time.Duration // bounds the subscription call

	stopCtx context.Context // cancelled by Close: background cleanups give up
	stopFn  context.CancelFunc
	bg      sync.WaitGroup // background cleanups, the listener, and renewal calls of permits released during them

	// closed is set by close under mu, and read under mu where what follows
	// must not race with close (track, listen), without it elsewhere (every
	// acquire checks it).
	closed atomic.Bool

	// wmu guards waiters (apart from mu: every Acquire registers and
	// unregisters).
	wmu     sync.Mutex
	waiters map[string]chan int64

	mu sync.Mutex
	// mu guards:
	ps        *redis.PubSub
	listening bool
}

// idLen is the length of a notify id: 16 hex digits, always (newHub). The
// scripts read it at a fixed place in their numbers argument (see nums and
// head.lua's ID_AT).
const idLen = 16

// newHub returns a hub with a new random id whose notify channel is
// prefix + id; callTimeout bounds every call (and the subscription).
func newHub(client redis.UniversalClient, prefix string, sharded bool, callTimeout time.Duration) *hub {
	var id [idLen / 2]byte
	rand.Read(id[:])
	h := &hub{
		client:  client,
		sharded: sharded,
		id:      hex.EncodeToString(id[:]),
		waiters: make(map[string]chan int64),
	}
	h.chanPrefix = prefix
	h.subTimeout = callTimeout
	h.stopCtx, h.stopFn = context.WithCancel(context.Background())
	return h
}

// register adds a local waiter for tok and returns the channel it is woken on.
// A value received is the fence of a hand-off grant, or 0: check with a call.
func (h *hub) register(tok string) chan int64 {
	ch := make(chan int64, 1)
	h.wmu.Lock()
	h.waiters[tok] = ch
	h.wmu.Unlock()
	return ch
}

func (h *hub) unregister(tok string) {
	h.wmu.Lock()
	delete(h.waiters, tok)
	h.wmu.Unlock()
}

// wake delivers a hand-off message "<token>:<fence>" to its local waiter.
func (h *hub) wake(payload string) {
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return
	}
	fence, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || fence <= 0 {
		fence = 0 // unreadable: the waiter checks with a call
	}
	h.wmu.Lock()
	ch := h.waiters[payload[:i]]
	h.wmu.Unlock()
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

func (h *hub) wakeAll() {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	for _, ch := range h.waiters {
		select {
		case ch <- 0:
		default:
		}
	}
}

// listen starts the pub/sub connection and its reader goroutine once. The
// caller never waits for the subscription; its confirmation wakes all waiters.
func (h *hub) listen() {
	h.mu.Lock()
	if h.listening || h.closed.Load() {
		h.mu.Unlock()
		return
	}
	h.listening = true
	h.bg.Add(1)
	h.mu.Unlock()
	go h.receive()
}

// receive subscribes to the hub's notify channel and wakes local waiters
// until Close. The PubSub is created with its channel so that on Cluster the
// connection goes to the shard that owns the channel's slot (go-redis routes a
// sharded PubSub by its first channel, on every reconnect too); go-redis
// subscribes again after every reconnect.
func (h *hub) receive() {
	defer h.bg.Done()
	channel := h.chanPrefix + h.id
	ctx, cancel := context.WithTimeout(h.stopCtx, h.subTimeout)
	var ps *redis.PubSub
	if h.sharded {
		ps = h.client.SSubscribe(ctx, channel)
	} else {
		ps = h.client.Subscribe(ctx, channel)
	}
	cancel()
	h.mu.Lock()
	if h.closed.Load() {
		h.mu.Unlock()
		ps.Close()
		return
	}
	h.ps = ps
	h.mu.Unlock()
	for m := range ps.ChannelWithSubscriptions(redis.WithChannelSize(256)) {
		switch m := m.(type) {
		case *redis.Message:
			h.wake(m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				h.wakeAll()
			}
		}
	}
}
