package breaker

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/sony/gobreaker/v2"
)

type transition struct {
	from, to State
	openFor  time.Duration
	trips    int
	delta    counters // counters accumulated in the previous state
}

type counters struct{ failures, failClosed, failOpen, failLocal uint64 }

// openRemaining reports whether the breaker is in an open period and how much
// of it remains. While it is, no call goes to gobreaker: gobreaker's own open
// timer (the base OpenDuration) may have run out, and touching it would move
// it to half-open before a grown or jittered open period ends. The period is
// judged by openUntil, not by the mirrored state: a call admitted before the
// trip that finishes after OpenDuration moves gobreaker to half-open early (its
// afterRequest reads the state before checking the generation), and that must
// not let callers through before openUntil.
func (b *Breaker) openRemaining() (time.Duration, bool) {
	if State(b.state.Load()) == StateClosed { // inlined fast path
		return 0, false
	}
	return b.openRemainingSlow()
}

func (b *Breaker) openRemainingSlow() (time.Duration, bool) {
	// Open through the end instant inclusive, as gobreaker is.
	rem := time.Duration(b.openUntil.Load()) - time.Since(b.epoch)
	return rem, rem >= 0
}

// onTransition is gobreaker's OnStateChange. gobreaker calls it with its
// mutex held, so it only records the transition (taking b.mu, which is never
// held while calling gobreaker); dispatch reports it later without locks.
func (b *Breaker) onTransition(_ string, from, to gobreaker.State) {
	now := time.Since(b.epoch)
	cur := counters{b.failures.Load(), b.failClosed.Load(), b.failOpen.Load(), b.failLocal.Load()}
	b.mu.Lock()
	t := transition{from: State(from), to: State(to), delta: cur.sub(b.last)}
	b.last = cur
	switch State(to) {
	case StateOpen:
		b.openTrips++
		t.openFor, t.trips = b.openDurationLocked(b.openTrips), b.openTrips
		until := now + t.openFor
		if until < now { // overflow with absurd durations
			until = math.MaxInt64
		}
		b.openUntil.Store(int64(until)) // before the state, which publishes it
		b.trips.Add(1)
	case StateClosed:
		b.openTrips = 0
	}
	b.state.Store(uint32(to))
	b.transitions.Add(1)
	b.pending = append(b.pending, t)
	b.hasPending.Store(true)
	b.mu.Unlock()
}

// openDurationLocked returns the length of the open period after the k-th
// trip in a row: OpenDuration doubled k-1 times, capped at MaxOpenDuration,
// then lengthened by up to Jitter of itself. b.mu must be held.
func (b *Breaker) openDurationLocked(k int) time.Duration {
	d := b.openBase
	for i := 1; i < k && d < b.openMax; i++ {
		if d > b.openMax/2 { // also keeps d*2 from overflowing
			d = b.openMax
			break
		}
		d *= 2
	}
	d = min(d, b.openMax)
	if b.jitter > 0 {
		j := rand.Float64() * b.jitter * float64(d)
		if j >= float64(math.MaxInt64-d) {
			return math.MaxInt64
		}
		d += time.Duration(j)
	}
	return d
}

// dispatch reports pending transitions, in order, without locks held. If
// another goroutine is already reporting, that one reports them, so an Observer
// that calls back into the Breaker neither deadlocks nor recurses.
func (b *Breaker) dispatch() {
	if b.hasPending.Load() { // inlined fast path: nothing to report
		b.dispatchSlow()
	}
}

func (b *Breaker) dispatchSlow() {
	b.mu.Lock()
	if b.dispatching {
		b.mu.Unlock()
		return
	}
	b.dispatching = true
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = nil
		b.hasPending.Store(false)
		b.mu.Unlock()
		b.reportBatch(batch)
		b.mu.Lock()
	}
	// Cleared in the same critical section that found nothing pending, so a
	// transition recorded meanwhile is never left with no one to report it.
	b.dispatching = false
	b.mu.Unlock()
}

// reportBatch reports batch in order. If the Observer panics, the transitions after
// the one that panicked go back to the front of pending, and dispatching is
// cleared, before the panic propagates.
func (b *Breaker) reportBatch(batch []transition) {
	i := 0
	defer func() {
		if i == len(batch) {
			return
		}
		rest := append([]transition(nil), batch[i+1:]...)
		b.mu.Lock()
		b.pending = append(rest, b.pending...)
		b.hasPending.Store(len(b.pending) > 0)
		b.dispatching = false
		b.mu.Unlock()
	}()
	for ; i < len(batch); i++ {
		b.report(batch[i])
	}
}

// report logs one line for t and tells the Observer. No lock is held.
func (b *Breaker) report(t transition) {
	logger := b.logger
	if logger == nil {
		logger = slog.Default()
	}
	level := slog.LevelInfo
	if t.to == StateOpen {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("limiter", b.name),
		slog.String("component", "breaker"),
		slog.String("from", t.from.String()),
		slog.String("to", t.to.String()),
	}
	if t.to == StateOpen {
		attrs = append(attrs, slog.Duration("open_for", t.openFor), slog.Int("trips", t.trips))
	}
	attrs = append(attrs,
		slog.Uint64("store_failures", t.delta.failures),
		slog.Uint64("fail_closed", t.delta.failClosed),
		slog.Uint64("fail_open", t.delta.failOpen),
		slog.Uint64("fail_local", t.delta.failLocal),
	)
	logger.LogAttrs(context.Background(), level, "breaker: "+t.to.String(), attrs...)
	if b.obs != nil {
		b.obs.Observe(floodgate.Event{Kind: floodgate.KindStateChange, Component: floodgate.ComponentBreaker, From: t.from.String(), To: t.to.String()})
	}
}

func (c counters) sub(d counters) counters {
	return counters{c.failures - d.failures, c.failClosed - d.failClosed, c.failOpen - d.failOpen, c.failLocal - d.failLocal}
}
