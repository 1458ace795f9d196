package shaperredis

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/redis/go-redis/v9"
)

// maxLeaders is the number of batches a batcher keeps in flight at once: while
// one is on the wire or in Redis, the next one fills.
const maxLeaders = 2

// A batcher sends the script calls that goroutines make at the same time in one
// round trip (group commit): on a *redis.Client (single Redis, or Sentinel
// failover), as one call of the script's batch form (batch.lua), which decides
// every key of the batch, so that Redis parses one command and reads TIME once;
// on a Cluster, a Ring or any other client, whose keys may live on different
// nodes, as one pipeline of single-key calls (go-redis splits it by node). It
// starts no goroutine: a caller that finds fewer than maxLeaders batches in
// flight becomes a leader and sends everything pending (its own call included);
// the others wait. A leader that finds calls pending after its batch returns
// hands the lead to the oldest of them and returns with its own answer, so no
// caller serves others for longer than one round trip.
type batcher struct {
	client redis.UniversalClient
	max    int
	single *redisscript.Script // the single-key script
	multi  *redisscript.Script // its batch form; nil to pipeline single-key calls
	// noMulti is set when the server refused a batch call with CROSSSLOT (a
	// Cluster-mode server or a cluster proxy behind a *redis.Client): batches
	// are pipelined from then on.
	noMulti atomic.Bool

	mu sync.Mutex
	// mu guards:
	pending []*bcall
	leaders int
}

type bcall struct {
	deadline time.Time // of the caller's context; zero if none
	args     []any     // the single-key command (evalBuf.fill)
	v        []int64
	err      error
	lead     bool          // woken to lead, not with an answer
	done     chan struct{} // closed when v/err are set or lead is set
}

var bcallPool = sync.Pool{New: func() any { return &bcall{done: make(chan struct{}, 1)} }}

func newBatcher(client redis.UniversalClient, max int, single, multi *redisscript.Script) *batcher {
	if max < 0 {
		panic("shaperredis: negative MaxBatch")
	}
	if max == 0 {
		max = 128
	}
	b := &batcher{client: client, max: max, single: single}
	if _, ok := client.(*redis.Client); ok {
		b.multi = multi
	}
	return b
}

// run runs the single-key command args (see evalBuf.fill) together with
// whatever other calls are pending, and returns its reply. If ctx ends first,
// run returns ctx.Err() at once: a call still waiting to be sent is withdrawn; a
// call already sent is abandoned to its batch, which may still record it, and
// run then reports abandoned: the batch may still read args, so the caller must
// not reuse their buffer. A caller handed the lead when ctx ends passes it on.
func (b *batcher) run(ctx context.Context, args []any) (v []int64, err error, abandoned bool) {
	c := bcallPool.Get().(*bcall)
	c.args = args
	c.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	if b.leaders < maxLeaders {
		b.leaders++
		b.lead(ctx, c) // unlocks
	} else {
		b.pending = append(b.pending, c)
		b.mu.Unlock()
	}
	for {
		select {
		case <-c.done:
		case <-ctx.Done():
			b.mu.Lock()
			for i, p := range b.pending {
				if p == c {
					copy(b.pending[i:], b.pending[i+1:])
					b.pending[len(b.pending)-1] = nil
					b.pending = b.pending[:len(b.pending)-1]
					b.mu.Unlock()
					b.put(c)
					return nil, ctx.Err(), false
				}
			}
			// In flight in another caller's batch, or answered, or handed the
			// lead (its wake-up on c.done may still be on its way). c is left
			// to the garbage collector: whoever signals it never touches it
			// again, and the signal is buffered.
			var next *bcall
			if c.lead {
				next = b.nextLeaderLocked()
			}
			b.mu.Unlock()
			if next != nil {
				next.done <- struct{}{}
			}
			return nil, ctx.Err(), true
		}
		if !c.lead {
			break
		}
		c.lead = false
		b.mu.Lock()
		b.lead(ctx, c) // unlocks
	}
	v, err = c.v, c.err
	b.put(c)
	return v, err, false
}

func (b *batcher) put(c *bcall) {
	*c = bcall{done: c.done}
	bcallPool.Put(c)
}

// lead sends one batch of own and pending calls, and wakes their callers; then,
// if calls are still pending, hands the lead to the oldest (which it removes from
// pending). b.mu must be held; lead unlocks it.
func (b *batcher) lead(ctx context.Context, own *bcall) {
	k := min(len(b.pending), b.max-1)
	batch := make([]*bcall, k+1)
	batch[0] = own
	copy(batch[1:], b.pending)
	rest := copy(b.pending, b.pending[k:])
	clear(b.pending[rest:])
	b.pending = b.pending[:rest]
	b.mu.Unlock()

	if len(batch) == 1 { // the leader's own call only: its own context
		b.exec(ctx, batch)
	} else {
		b.execShared(ctx, batch)
	}
	b.finish(batch)
}

// execShared sends a batch of calls of several callers with a context that none
// of them can cancel, bounded by the latest of their deadlines.
func (b *batcher) execShared(ctx context.Context, batch []*bcall) {
	// The calls of other callers must not fail because the leader's context
	// is cancelled or its deadline passed (a leader may be a caller that gave
	// up): the batch gets the latest of its calls' deadlines (each is the
	// per-call timeout of its call), or none if one has none.
	var dl time.Time
	for _, c := range batch {
		if c.deadline.IsZero() {
			dl = time.Time{}
			break
		}
		if c.deadline.After(dl) {
			dl = c.deadline
		}
	}
	sctx := context.WithoutCancel(ctx)
	if !dl.IsZero() {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(sctx, dl)
		defer cancel()
	}
	b.exec(sctx, batch)
}

// finish hands the lead on if calls are pending and wakes the callers of batch.
func (b *batcher) finish(batch []*bcall) {
	b.mu.Lock()
	next := b.nextLeaderLocked()
	b.mu.Unlock()
	for _, c := range batch {
		c.done <- struct{}{}
	}
	if next != nil {
		next.done <- struct{}{}
	}
}

// nextLeaderLocked hands this leader's place to the oldest pending call, which
// it removes from pending, marks to lead and returns (the caller signals it
// after unlocking); with nothing pending, the place is given up and it returns
// nil. b.mu must be held.
func (b *batcher) nextLeaderLocked() *bcall {
	if len(b.pending) == 0 {
		b.leaders--
		return nil
	}
	next := b.pending[0]
	rest := copy(b.pending, b.pending[1:])
	b.pending[rest] = nil
	b.pending = b.pending[:rest]
	next.lead = true
	return next
}

// exec sends batch in one round trip and stores each answer. A lone call is
// sent as it is; a batch, as one call of the batch script (multi), or else as a
// pipeline of single-key calls. Calls answered NOSCRIPT (Redis lost its script
// cache) are sent again with EVAL (redisscript.Script.Ints), as redis.Script.Run
// does.
func (b *batcher) exec(ctx context.Context, batch []*bcall) {
	if len(batch) == 1 {
		c := batch[0]
		c.v, c.err = b.single.EvalInts(ctx, b.client, c.args)
		return
	}
	if b.multi != nil && !b.noMulti.Load() && b.execMulti(ctx, batch) {
		return
	}
	pipe := b.client.Pipeline()
	cmds := make([]redis.Cmder, len(batch))
	for i, c := range batch {
		cmds[i] = b.single.Cmd(ctx, c.args)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // per-command errors are read below
	for i, c := range batch {
		c.v, c.err = b.single.Ints(ctx, b.client, cmds[i])
	}
}

// execMulti decides batch with one call of the batch script (see batch.lua):
// KEYS are the calls' keys, ARGV the calls' heads (each the limit, the call's
// cost and its deadline, see meterhead.lua) [and the first call's test time],
// and the reply the calls' replies (4 integers each) one after the other. A
// batch whose calls were made under different limits (SetLimit in between)
// is sent as a pipeline instead.
func (b *batcher) execMulti(ctx context.Context, batch []*bcall) bool {
	first := batch[0].args // ("evalsha", sha,) 1, key, head [, now]
	lim := headLimit(first)
	for _, c := range batch[1:] {
		if !bytes.Equal(headLimit(c.args), lim) {
			return false
		}
	}
	k := len(batch)
	args := make([]any, 3+2*k+len(first)-5)
	args[2] = k // args[0:2] are written by EvalInts
	keys, argv := args[3:3+k], args[3+k:]
	for i, c := range batch {
		keys[i] = c.args[3]
		argv[i] = c.args[4]
	}
	if len(first) > 5 {
		argv[k] = first[5]
	}
	v, err := b.multi.EvalInts(ctx, b.client, args)
	if err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") {
		// Refused before anything ran: this server wants one slot per call.
		b.noMulti.Store(true)
		return false
	}
	if err == nil && len(v) != 4*k {
		err = fmt.Errorf("shaperredis: unexpected reply of %d elements", len(v))
	}
	for i, c := range batch {
		switch {
		case err != nil:
			c.err = err
		case v[4*i] == -1:
			// This decision failed in Redis (WRONGTYPE on a key shared with
			// something else, say) and wrote nothing; the others stand. Send
			// it alone for its own answer or error.
			c.v, c.err = b.single.EvalInts(ctx, b.client, c.args)
		default:
			c.v = v[4*i : 4*i+4 : 4*i+4]
		}
	}
	return true
}
