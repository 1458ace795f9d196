package adaptiveredis

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/limitctl"
	"github.com/floodgate-go/floodgate/internal/redisscript"
	"github.com/floodgate-go/floodgate/internal/storecall"
)

// flusher flushes every FlushInterval until Close.
func (g *Gate) flusher() {
	defer close(g.done)
	// Start at a random phase of the interval, so that processes started
	// together do not all flush (and find the round due) at the same moment.
	phase := time.NewTimer(rand.N(g.every))
	select {
	case <-g.stopCtx.Done():
		phase.Stop()
		return
	case <-phase.C:
	}
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-g.stopCtx.Done():
			return
		case <-t.C:
			g.flush()
		}
	}
}

// flushReply is flush.lua's reply.
type flushReply struct {
	now, ver, round, start   int64 // µs on Redis's clock for now and start
	samples, lat             int64
	sq                       float64
	drops                    int64
	full                     bool
	maxIn, np, lp            int64
	semLimit, semUsed, added int64
	state                    string
}

// flush sends the pending samples (one call), learns the fleet's round and
// state, and closes the round if it is due.
func (g *Gate) flush() {
	g.mu.Lock()
	if !g.active && g.inFlight == 0 && g.waiting == 0 && g.pend == (pending{}) {
		g.mu.Unlock()
		return
	}
	g.active = false
	pd, round, ver := g.pend, g.round, g.ver
	g.pend = pending{}
	g.mu.Unlock()

	vals, err := g.run(flushScript, g.id, round, pd.samples, int64(pd.lat),
		strconv.FormatFloat(pd.sq, 'g', -1, 64), pd.drops, b2i(pd.full), ver, g.keyTTL)
	recv := g.now()
	var r flushReply
	if err == nil {
		r, err = parseFlush(vals)
	}
	if err != nil {
		g.mu.Lock()
		g.stats.FlushErrors++
		g.stats.Lost += uint64(pd.samples + pd.drops)
		g.mu.Unlock()
		return
	}
	g.learn(r, recv, pd)
}

// learn takes in a flush reply received at recv (local clock) for the
// pending samples pd: the state, the round and the processes; it heals the
// semaphore's limit if it differs from the state's twice in a row, and
// closes the round if it is due.
func (g *Gate) learn(r flushReply, recv time.Duration, pd pending) {
	g.mu.Lock()
	g.stats.Flushes++
	if r.added == 0 {
		g.stats.Stale += uint64(pd.samples + pd.drops)
	}
	if r.ver == 0 {
		g.mu.Unlock()
		g.initialise(r.now)
		return
	}
	var ev []floodgate.Event
	if r.state != "" {
		var st limitctl.State
		if err := json.Unmarshal([]byte(r.state), &st); err != nil {
			g.stats.FlushErrors++
			g.mu.Unlock()
			return
		}
		ev = g.setStateLocked(r.ver, st)
	}
	if r.round != g.round {
		g.newRoundLocked(r.round, r.start, r.now, recv)
	}
	procs := max(r.np, r.lp, 1)
	if procs != g.procs {
		g.procs = procs
		g.setShareLocked()
	}
	heal := false
	if cp := g.state.Cap(); r.semLimit != cp {
		heal = g.mismatch == r.ver
		g.mismatch = r.ver
		if heal {
			g.mismatch = 0
		}
	} else {
		g.mismatch = 0
	}
	// A fleet round is cut by time: it is decided on the holds that ended by
	// the flush that finds it long enough and with enough samples (counting
	// each hold's end across the fleet, as adaptive.Gate does locally, would
	// take a round of flushes more; see the package doc).
	n := r.samples + r.drops
	round := limitctl.Round{
		Start: redisTime(r.start), End: redisTime(r.now), Started: n, Done: n,
		Samples: r.samples, Latency: time.Duration(r.lat), SumSq: r.sq, Drops: r.drops,
		Full: r.full, MaxInFlight: r.maxIn,
	}
	st, ver, limit := g.state, g.ver, g.state.Cap()
	due := st.CutNow(g.p, round, round.End)
	round.Cut = round.End
	g.mu.Unlock()
	g.emit(ev)
	if heal {
		g.setLimit(limit, true)
	}
	if due {
		g.decide(ver, st, round)
	}
}

// decide runs the controller on the due round (ended at round.End, Redis's
// clock) with the state of version ver, and writes the decision if no other
// process decided first; the winner then sets the semaphore's limit.
func (g *Gate) decide(ver int64, st limitctl.State, round limitctl.Round) {
	before := st.Cap()
	o := st.Step(g.p, round)
	var settle time.Duration
	if st.Cap() != before {
		settle = st.Settle()
	}
	if g.write(ver, st, !st.Pooled(), settle) {
		g.mu.Lock()
		g.stats.Add(o)
		g.mu.Unlock()
		if st.Cap() != before {
			g.setLimit(st.Cap(), false)
		}
	}
}

// initialise writes a new state (limitctl.New at Redis time now, µs) for a
// fleet that has none, if no other process does first, and sets the
// semaphore's limit to it.
func (g *Gate) initialise(now int64) {
	st := limitctl.New(g.p, g.initial, redisTime(now))
	if g.write(0, st, true, 0) {
		g.setLimit(st.Cap(), false)
	}
}

// write runs close.lua: st replaces the state of version ver if it is still
// current, and a new round opens (open) settle after now. It reports whether
// it won, and if so takes st and the new round in.
func (g *Gate) write(ver int64, st limitctl.State, open bool, settle time.Duration) bool {
	js, err := json.Marshal(finite(st))
	if err != nil {
		g.mu.Lock()
		g.stats.CloseErrors++
		g.mu.Unlock()
		return false
	}
	vals, err := g.run(closeScript, ver, js, b2i(open), int64(settle/time.Microsecond), g.keyTTL)
	recv := g.now()
	ints, perr := intsOf(vals, 3)
	g.mu.Lock()
	if err != nil || perr != nil {
		g.stats.CloseErrors++
		g.mu.Unlock()
		return false
	}
	if ints[0] != 1 || len(ints) < 5 {
		g.stats.CloseLost++
		g.mu.Unlock()
		return false
	}
	ev := g.setStateLocked(ints[2], st)
	if open {
		g.newRoundLocked(ints[3], ints[4], ints[1], recv)
	}
	g.mu.Unlock()
	g.emit(ev)
	return true
}

// setStateLocked takes in st, the state of version ver, and returns the
// KindLimit event to emit if the limit changed.
func (g *Gate) setStateLocked(ver int64, st limitctl.State) []floodgate.Event {
	if ver == g.ver && g.known {
		return nil
	}
	// A version below the one known is not an old answer (the calls are made
	// one at a time, by the flusher): the gate's keys expired and the fleet
	// started again from a new state.
	old := g.limitLocked()
	wasKnown := g.known
	g.ver, g.state, g.known = ver, st, true
	g.setShareLocked()
	if cp := st.Cap(); cp != old || !wasKnown {
		if g.obs == nil {
			return nil
		}
		return []floodgate.Event{{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: cp, Duration: time.Duration(st.Baseline)}}
	}
	return nil
}

// newRoundLocked starts measuring round number round, which started (or
// starts) at start µs on Redis's clock, learned from a reply that Redis made
// at now µs and that arrived at recv on the local clock. The local start is
// taken at the reply's arrival, so a hold counted began at or after the
// round's start. Samples pending for the old round are discarded.
func (g *Gate) newRoundLocked(round, start, now int64, recv time.Duration) {
	g.stats.Stale += uint64(g.pend.samples + g.pend.drops)
	full := g.pend.full && start <= now
	g.pend = pending{full: full}
	g.round = round
	g.roundStart = recv + time.Duration(start-now)*time.Microsecond
}

// setShareLocked sets FailLocal's share to the fleet limit over the
// processes, at least 1.
func (g *Gate) setShareLocked() {
	share := max(1, g.limitLocked()/g.procs)
	if share != g.share {
		g.share = share
		if g.policy == breaker.FailLocal {
			g.sem.SetLocalShare(share)
		}
	}
}

// setLimit stores limit as the semaphore's (heal: because it differed from
// the state's).
func (g *Gate) setLimit(limit int64, heal bool) {
	err := g.sem.SetLimit(g.stopCtx, limit)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil:
		g.stats.SetLimitErrors++
	case heal:
		g.stats.Healed++
	}
}

func (g *Gate) emit(ev []floodgate.Event) {
	for _, e := range ev {
		g.obs.Observe(e)
	}
}

// run runs sc on the gate's keys with args through the breaker (FailClosed:
// a flush or close that cannot reach Redis is simply not made), bounded by
// its CallTimeout and by Close.
func (g *Gate) run(sc *redisscript.Script, args ...any) ([]any, error) {
	v, _, err := storecall.Do(g.stopCtx, &g.store, breaker.FailClosed,
		func(ctx context.Context, client redis.UniversalClient) ([]any, error) {
			return sc.Run(ctx, client, g.keys, args...).Slice()
		}, nil)
	return v, err
}

// redisTime turns µs of Redis time into the controller's clock.
func redisTime(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseFlush reads flush.lua's reply.
func parseFlush(v []any) (flushReply, error) {
	var r flushReply
	if len(v) != 16 {
		return r, fmt.Errorf("adaptiveredis: flush reply of %d values", len(v))
	}
	ints, err := intsOf(v[:6], 6)
	if err != nil {
		return r, err
	}
	rest, err := intsOf(v[7:15], 8)
	if err != nil {
		return r, err
	}
	sqs, ok1 := v[6].(string)
	st, ok2 := v[15].(string)
	sq, err := strconv.ParseFloat(sqs, 64)
	if !ok1 || !ok2 || err != nil {
		return r, fmt.Errorf("adaptiveredis: malformed flush reply")
	}
	r.now, r.ver, r.round, r.start, r.samples, r.lat = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
	r.sq = sq
	r.drops, r.full, r.maxIn, r.np, r.lp = rest[0], rest[1] == 1, rest[2], rest[3], rest[4]
	r.semLimit, r.semUsed, r.added = rest[5], rest[6], rest[7]
	r.state = st
	return r, nil
}

// intsOf reads v as integers; it needs at least n of them.
func intsOf(v []any, n int) ([]int64, error) {
	if len(v) < n {
		return nil, fmt.Errorf("adaptiveredis: reply of %d values, want %d", len(v), n)
	}
	out := make([]int64, len(v))
	for i, x := range v {
		k, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("adaptiveredis: reply value %d is %T, want an integer", i, x)
		}
		out[i] = k
	}
	return out, nil
}

// finite returns st with any NaN or infinite number set to 0, so that it
// encodes as JSON (a round of zero-length holds would make one).
func finite(st limitctl.State) limitctl.State {
	f := func(x *float64) {
		if math.IsNaN(*x) || math.IsInf(*x, 0) {
			*x = 0
		}
	}
	f(&st.Limit)
	f(&st.Baseline)
	f(&st.BaseSE)
	f(&st.Latency)
	for i := range st.Hist {
		f(&st.Hist[i].Base)
		f(&st.Hist[i].Limit)
		f(&st.Hist[i].Latency)
	}
	return st
}
