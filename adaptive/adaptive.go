package adaptive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	floodgate "github.com/floodgate-go/floodgate/internal/core" // the floodgate types; see package floodgate
	"github.com/floodgate-go/floodgate/internal/limitctl"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/semaphore"
)

// Sentinel errors. The error returned is a *floodgate.RejectError matching
// one of them with errors.Is, whose RetryAfter estimates when a retry could
// be admitted (from the release rate observed while callers waited).
var (
	// ErrNoCapacity: TryHold found no room now.
	ErrNoCapacity = reject.Sentinel(floodgate.ReasonNoCapacity, "adaptive: no capacity")
	// ErrQueueFull: the call would wait while Config.MaxWaiters callers wait.
	ErrQueueFull = reject.Sentinel(floodgate.ReasonQueueFull, "adaptive: queue full")
	// ErrDeadline: the estimated wait ends after the context's deadline.
	ErrDeadline = reject.Sentinel(floodgate.ReasonDeadline, "adaptive: wait would exceed context deadline")
	// ErrTooLarge: n is above Config.Min, the one limit the gate always has.
	ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "adaptive: weight above the minimum limit")
)

// Config configures a Gate. The zero Config is valid: a limit between 1 and
// 1000 starting at 1, the defaults below.
type Config struct {
	// Min and Max bound the limit; Initial is where it starts (Min if zero).
	// Defaults 1 and 1000. A weight n above Min is refused (ErrTooLarge):
	// the limit may fall to Min at any round.
	Min, Max, Initial int64

	// Tolerance is how far the latency may rise above the baseline before the
	// gate takes it as queueing and lowers the limit; it grows the limit only
	// while the latency is within Tolerance/2 of it. Default 0.1 (10%).
	Tolerance float64

	// MinSamples is how many holds a round counts before it is decided
	// (default 200; a quarter of that during startup); a round lasts at least
	// MinRound (default 100ms) and four times the last round's mean hold
	// time, and is decided once the holds it counted have ended. At MaxRound
	// (default 10s) it is decided on what it has, if that is a tenth of
	// MinSamples, and otherwise starts again.
	MinSamples         int
	MinRound, MaxRound time.Duration

	// ProbeInterval is how often the gate runs one round at 85% of its
	// concurrency while the latency is not above the baseline (and the
	// concurrency is 3 or more), to check that the baseline is still the
	// downstream's no-queue latency (default 10s; negative: never).
	ProbeInterval time.Duration

	// DropRate is the share of a round's holds released as dropped (Drop, or
	// released after their context's deadline) above which the round cuts the
	// limit by a quarter whatever the latency. Default 0.05.
	DropRate float64

	// MaxWaiters bounds the callers waiting in Hold (ErrQueueFull beyond); 0
	// is unbounded, negative never waits. As with every gate, a consumer's
	// MaxWait bounds the wait itself.
	MaxWaiters int

	// Observer is told of every admit, reject, cancel and release (Duration:
	// the hold) and of every change of the limit (KindLimit: N the limit,
	// Duration the latency baseline, 0 before the first round; none at New,
	// which does not call the Observer: it may refer to the Gate New returns).
	// Component is floodgate.ComponentAdaptive. With otelfloodgate these
	// become floodgate.limit, floodgate.in_use and floodgate.latency.baseline
	// (docs/metrics.md).
	Observer floodgate.Observer
}

// Gate is a concurrency gate whose limit follows the downstream's latency:
// see the package documentation. It implements floodgate.Gate. Use New.
type Gate struct {
	sem     *semaphore.Weighted
	p       limitctl.Params
	min     int64 // Config.Min: the largest weight
	obs     floodgate.Observer
	born    time.Time
	release func(floodgate.Held)

	mu       sync.Mutex
	st       limitctl.State
	round    limitctl.Round
	inFlight int64
	stats    Stats
}

// New returns a Gate configured by cfg. It panics, with a message starting
// "adaptive: ", on a programmer error: Min < 1, Max < Min or above 2^40,
// Initial outside [Min, Max], Tolerance or DropRate outside [0, 1], a
// negative MinSamples, MinRound or MaxRound, or MaxRound < MinRound.
func New(cfg Config) *Gate {
	p, initial := cfg.settings().Params("adaptive")
	g := &Gate{p: p, min: int64(p.Min), obs: cfg.Observer, born: time.Now()}
	g.st = limitctl.New(p, initial, 0)
	g.round = g.st.NewRound(p, 0, 0)
	var semObs floodgate.Observer
	if cfg.Observer != nil {
		semObs = floodgate.ObserverFunc(g.fromSemaphore)
	}
	g.sem = semaphore.New(g.st.Cap(), semaphore.Config{MaxWaiters: cfg.MaxWaiters, Observer: semObs})
	g.release = func(h floodgate.Held) { g.finish(h, false) }
	return g
}

// settings returns the controller's share of cfg.
func (cfg Config) settings() limitctl.Settings {
	return limitctl.Settings{
		Min: cfg.Min, Max: cfg.Max, Initial: cfg.Initial,
		Tolerance: cfg.Tolerance, DropRate: cfg.DropRate, MinSamples: cfg.MinSamples,
		MinRound: cfg.MinRound, MaxRound: cfg.MaxRound, ProbeInterval: cfg.ProbeInterval,
	}
}

// Hold takes weight n, waiting in FIFO order until it fits under the limit or
// ctx is done, and returns it as a floodgate.Held whose hold time (grant to
// Release) is the gate's latency sample. The Held's context is ctx. Errors:
// ctx's error, ErrQueueFull, ErrDeadline, ErrTooLarge; on error nothing is
// held. It does not allocate when n is granted at once.
func (g *Gate) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	if n > g.min {
		return floodgate.Held{}, reject.New(ErrTooLarge, 0)
	}
	if _, err := g.sem.Hold(ctx, n); err != nil {
		g.markFull()
		return floodgate.Held{}, translate(err)
	}
	return g.admitted(ctx, n), nil
}

// TryHold is Hold without waiting: it fails at once with ErrNoCapacity (and
// a RetryAfter estimate) when n does not fit now. A refusal is not reported
// to the Observer (the consumer reports the outcome), but it tells the gate
// that it is full, which lets the limit grow.
func (g *Gate) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	if n > g.min {
		return floodgate.Held{}, reject.New(ErrTooLarge, 0)
	}
	if _, err := g.sem.TryHold(ctx, n); err != nil {
		g.markFull()
		return floodgate.Held{}, translate(err)
	}
	return g.admitted(ctx, n), nil
}

// Drop releases h, which this gate gave out, as a drop: the call failed
// because the downstream is overloaded (it refused, or timed out), and its
// hold time is not a latency sample. A Held released after its context's
// deadline passed counts as a drop by itself; one released after its context
// was cancelled counts as neither a sample nor a drop.
//
// A Held that is not this gate's own (one a consumer wrapped, as
// bulkhead's MaxWait does) is released as its Release would, without the
// drop.
func (g *Gate) Drop(h floodgate.Held) {
	if h.Tag() == 0 {
		h.Release()
		return
	}
	g.finish(h, true)
}

// MaxLimit returns the highest the limit may go: Config.Max, or its
// default. bulkhead checks a layer's criticality reservations against it.
func (g *Gate) MaxLimit() int64 { return int64(g.p.Max) }

// Limit returns the limit now.
func (g *Gate) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st.Cap()
}

// RoundCounts counts the rounds a gate decided (Rounds), and how many of
// them raised the limit (Increases), cut it (Decreases), moved the baseline
// (Rebases) or started a probe (Probes). adaptiveredis.Stats has the same.
type RoundCounts = limitctl.Counts

// Stats counts what the gate did. Limit, InFlight, Waiting, Baseline and
// Latency are the present; the rest count since New.
type Stats struct {
	Limit    int64         // the limit now
	InFlight int64         // weight held
	Waiting  int           // callers queued in Hold
	Baseline time.Duration // the downstream's no-queue latency, as the gate knows it
	Latency  time.Duration // the last decided round's mean hold time

	RoundCounts           // rounds decided, by outcome
	Samples, Drops uint64 // holds measured, holds dropped

	Queue semaphore.Stats // the queue's own counts: grants, cancels, refusals
}

// Stats returns a snapshot of the gate's counts.
func (g *Gate) Stats() Stats {
	q := g.sem.Stats()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Limit, s.InFlight, s.Waiting = g.st.Cap(), g.inFlight, q.Waiting
	s.Baseline, s.Latency = time.Duration(g.st.Baseline), time.Duration(g.st.Latency)
	s.Queue = q
	return s
}

// now is the gate's clock: monotonic time since New.
func (g *Gate) now() time.Duration { return time.Since(g.born) }

func (g *Gate) markFull() {
	g.mu.Lock()
	g.round.Full = true
	g.mu.Unlock()
}

// admitted accounts for n granted by the queue and hands out the Held.
func (g *Gate) admitted(ctx context.Context, n int64) floodgate.Held {
	now := g.now()
	g.mu.Lock()
	g.inFlight += n
	g.round.MaxInFlight = max(g.round.MaxInFlight, g.inFlight)
	if g.inFlight >= g.st.Cap() {
		g.round.Full = true
	}
	if g.st.CutNow(g.p, g.round, now) {
		g.round.Cut = now
	}
	if g.counts(now) {
		g.round.Started++
	}
	g.mu.Unlock()
	return floodgate.NewTaggedHeld(ctx, g.release, n, int64(now)+1) // 0 is no tag of ours
}

// counts reports whether the round counts a hold begun at t.
func (g *Gate) counts(t time.Duration) bool {
	return t >= g.round.Start && (g.round.Cut == 0 || t < g.round.Cut)
}

// finish takes h back: its sample (or drop) goes to the round if the round
// counts it, a due round is decided, and the weight goes back to the queue.
func (g *Gate) finish(h floodgate.Held, dropped bool) {
	now := g.now()
	start, n := time.Duration(h.Tag()-1), h.N()
	timedOut, canceled := limitctl.How(h.Context())
	g.mu.Lock()
	g.inFlight -= n
	if g.counts(start) {
		g.round.Done++
		switch {
		case dropped || timedOut:
			g.round.Drops++
			g.stats.Drops++
		case canceled: // cut short by its caller: no sample
		default:
			g.round.Sample(start, now-start)
			g.stats.Samples++
		}
	}
	if g.st.CutNow(g.p, g.round, now) {
		g.round.Cut = now
	}
	changed, limit, baseline := false, int64(0), time.Duration(0)
	if g.st.Due(g.p, g.round, now) {
		before := g.st.Cap()
		g.round.End = now
		g.stats.Add(g.st.Step(g.p, g.round))
		if g.st.Pooled() {
			g.round = g.st.Continue(g.p, g.round, now)
		} else {
			start := now
			if g.st.Cap() != before {
				start += g.st.Settle()
			}
			g.round = g.st.NewRound(g.p, start, g.inFlight)
		}
		if limit = g.st.Cap(); limit != before {
			changed, baseline = true, time.Duration(g.st.Baseline)
			g.sem.SetLimit(limit) // under g.mu, so limits apply in order; it emits nothing
		}
	}
	g.mu.Unlock()
	g.sem.Release(n)
	if g.obs != nil {
		g.obs.Observe(floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentAdaptive, N: n, Duration: now - start})
		if changed {
			g.obs.Observe(floodgate.Event{Kind: floodgate.KindLimit, Component: floodgate.ComponentAdaptive, N: limit, Duration: baseline})
		}
	}
}

// fromSemaphore passes the queue's events on as the gate's own; its releases
// are not passed (finish reports them, with the hold time).
func (g *Gate) fromSemaphore(e floodgate.Event) {
	if e.Kind == floodgate.KindRelease {
		return
	}
	e.Component = floodgate.ComponentAdaptive
	if e.Err != nil {
		e.Err = translate(e.Err)
	}
	g.obs.Observe(e)
}

// translate turns the queue's refusals into the gate's own sentinels,
// keeping their delay; other errors (the context's) pass unchanged.
func translate(err error) error {
	var s error
	switch {
	case errors.Is(err, semaphore.ErrNoCapacity):
		s = ErrNoCapacity
	case errors.Is(err, semaphore.ErrQueueFull):
		s = ErrQueueFull
	case errors.Is(err, semaphore.ErrDeadline):
		s = ErrDeadline
	case errors.Is(err, semaphore.ErrTooLarge):
		s = ErrTooLarge
	default:
		return err
	}
	return reject.New(s, reject.RetryAfter(err))
}

var _ floodgate.Gate = (*Gate)(nil)

// String describes the gate, for logs.
func (g *Gate) String() string {
	s := g.Stats()
	return fmt.Sprintf("adaptive.Gate{limit %d, in flight %d, baseline %v}", s.Limit, s.InFlight, s.Baseline)
}
