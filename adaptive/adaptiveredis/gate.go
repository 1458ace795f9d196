package adaptiveredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/limitctl"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/internal/storecall"
)

// ErrTooLarge is the refusal of a weight above Config.Min, the one limit the
// gate always has (a *floodgate.RejectError matching it with errors.Is). The
// other refusals are the distsem semaphore's (distsem.ErrNoCapacity,
// distsem.ErrLocalBusy, breaker.ErrUnavailable, distsem.ErrClosed).
var ErrTooLarge = reject.Sentinel(floodgate.ReasonTooLarge, "adaptiveredis: weight above the minimum limit")

// DefaultFlushInterval is how often a process reports its samples when
// Config.FlushInterval is zero.
const DefaultFlushInterval = 100 * time.Millisecond

// Config configures a Gate. The zero Config is valid: the controller's
// defaults (those of adaptive.Config), distsem's defaults, FailClosed, a flush
// every DefaultFlushInterval.
type Config struct {
	// The controller's settings, as in adaptive.Config (which documents
	// them): Min and Max bound the fleet limit, Initial is where a fleet
	// without state starts; a weight above Min is refused (ErrTooLarge).
	// Every process of a fleet should use the same values: the state in
	// Redis was made by whichever process decided first, and each process
	// decides a round with its own.
	Min, Max, Initial  int64
	Tolerance          float64
	MinSamples         int
	MinRound, MaxRound time.Duration
	ProbeInterval      time.Duration
	DropRate           float64

	// Lease and WaiterTTL are the semaphore's (distsem.Config: 10s and 1s if
	// zero; each at least 3 × the breaker's CallTimeout).
	Lease, WaiterTTL time.Duration

	// Breaker guards every Redis call of the gate: the semaphore's and the
	// rounds'. Share one per Redis endpoint. If nil, the gate makes its own
	// with breaker.Config{}.
	Breaker *breaker.Breaker

	// Policy is what a hold does while Redis cannot answer (distsem's
	// policies): FailClosed refuses (breaker.ErrUnavailable), FailOpen
	// admits without a fleet bound, FailLocal admits up to a local share:
	// the last fleet limit this process learned divided by the processes
	// seen reporting in the last round (at least 1 each; see the package
	// documentation).
	Policy breaker.Policy

	// FlushInterval is how often the process reports its samples to Redis
	// and learns the fleet's state back (DefaultFlushInterval if zero). A
	// process with nothing held, waiting or measured since its last flush
	// skips it. Rounds are decided at flushes, so keep it at or below
	// MinRound: a longer interval makes every round longer.
	FlushInterval time.Duration

	// Observer is told of every admit, reject and cancel (the semaphore's,
	// with its Source: store, fail_open, fail_local, fail_closed) and release
	// (Duration: the hold) with Component floodgate.ComponentAdaptive, and of
	// every change of the fleet limit this process learns (KindLimit: N the
	// new limit, Duration the latency baseline). The semaphore's renewals and
	// lost leases pass through with Component floodgate.ComponentDistsem.
	Observer floodgate.Observer
}

// Gate is one process's part of a fleet-wide adaptive concurrency gate: see
// the package documentation. It implements floodgate.Gate. Use New; call
// Close when done (it stops the flusher goroutine).
type Gate struct {
	sem      *distsem.Semaphore
	store    storecall.Store
	p        limitctl.Params
	initial  float64
	min      int64
	policy   breaker.Policy
	obs      floodgate.Observer
	keys     []string // {name}:a, {name}:ap, the semaphore's {name}:s
	id       string   // this process's id in the rounds
	every    time.Duration
	keyTTL   int64 // ms
	born     time.Time
	release  func(floodgate.Held)
	stopCtx  context.Context
	stop     context.CancelFunc
	done     chan struct{}
	closeSem sync.Once

	mu         sync.Mutex
	holds      map[int64]hold // by the Held's tag
	seq        int64
	inFlight   int64
	waiting    int
	active     bool // a hold began, waited or ended since the last flush
	known      bool // the fleet's state is known (ver > 0)
	ver        int64
	state      limitctl.State
	round      int64         // the fleet round the pending samples are for (0: none known)
	roundStart time.Duration // its start on the local clock: holds begun earlier are not measured
	pend       pending
	procs      int64 // processes seen reporting in the last round, at least 1
	share      int64 // FailLocal's share now
	mismatch   int64 // the state version at which the semaphore's limit was seen to differ
	stats      Stats
}

// hold is one Held given out: its semaphore Held, weight and start on the
// local clock.
type hold struct {
	dh    floodgate.Held
	n     int64
	start time.Duration
}

// pending are the samples of this process not yet flushed.
type pending struct {
	samples, drops int64
	lat            time.Duration
	sq             float64
	full           bool
}

// New returns the Gate of this process for the fleet-wide adaptive gate
// name on client. It does no I/O; it starts one goroutine, the flusher, which
// Close stops. The distsem semaphore of the same name (distsem.New(client,
// name, ...)) is the fleet's cap: its keys, and the gate's own ({name}:a and
// {name}:ap), share the hash tag {name}.
//
// New panics, with a message starting "adaptiveredis: " (or "distsem: " for
// the semaphore's settings), on a programmer error: the controller's settings
// out of range (as adaptive.New), a negative FlushInterval, and the
// semaphore's (a nil client, one without ContextTimeoutEnabled, an invalid
// name, a Lease shorter than 3 × the breaker's CallTimeout).
func New(client redis.UniversalClient, name string, cfg Config) *Gate {
	p, initial := limitctl.Settings{
		Min: cfg.Min, Max: cfg.Max, Initial: cfg.Initial,
		Tolerance: cfg.Tolerance, DropRate: cfg.DropRate, MinSamples: cfg.MinSamples,
		MinRound: cfg.MinRound, MaxRound: cfg.MaxRound, ProbeInterval: cfg.ProbeInterval,
	}.Params("adaptiveredis")
	if cfg.FlushInterval < 0 {
		panic("adaptiveredis: negative FlushInterval")
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	storecall.Check("adaptiveredis", client)
	brk := cfg.Breaker
	if brk == nil {
		brk = breaker.New("adaptiveredis:"+name, breaker.Config{})
	}
	g := &Gate{
		p: p, initial: initial, min: int64(p.Min), policy: cfg.Policy, obs: cfg.Observer,
		every: cfg.FlushInterval, born: time.Now(), holds: make(map[int64]hold),
		procs: 1, share: max(1, int64(initial)),
	}
	g.keyTTL = max(10*time.Minute, 10*p.MaxRound).Milliseconds()
	g.sem = distsem.New(client, name, int64(initial), distsem.Config{
		Lease: cfg.Lease, WaiterTTL: cfg.WaiterTTL, Breaker: brk, Policy: cfg.Policy, LocalShare: g.share,
		Observer: floodgate.ObserverFunc(g.fromSemaphore),
	})
	g.store = storecall.New("adaptiveredis", client, brk, "")
	tag := strings.TrimSuffix(g.sem.Keys()[0], ":s")
	g.keys = []string{tag + ":a", tag + ":ap", g.sem.Keys()[0]}
	var b [8]byte
	rand.Read(b[:])
	g.id = hex.EncodeToString(b[:])
	g.release = func(h floodgate.Held) { g.finish(h.Tag(), false) }
	g.stopCtx, g.stop = context.WithCancel(context.Background())
	g.done = make(chan struct{})
	go g.flusher()
	return g
}

// Hold takes weight n of the fleet limit, waiting in the fleet's FIFO queue
// (distsem's) until it fits or ctx is done, and returns it as a
// floodgate.Held whose hold time (grant to Release) is a latency sample of
// the fleet's round. The Held's context is the semaphore's: derived from ctx,
// cancelled if the lease is lost. Errors: ErrTooLarge, and the semaphore's.
// Release is idempotent. Hold panics if n < 1.
func (g *Gate) Hold(ctx context.Context, n int64) (floodgate.Held, error) {
	return g.hold(ctx, n, true)
}

// TryHold is Hold without waiting: it fails at once with the semaphore's
// distsem.ErrNoCapacity when n does not fit now (which tells the round that
// the fleet is full, so the limit may grow).
func (g *Gate) TryHold(ctx context.Context, n int64) (floodgate.Held, error) {
	return g.hold(ctx, n, false)
}

func (g *Gate) hold(ctx context.Context, n int64, wait bool) (floodgate.Held, error) {
	if n < 1 {
		panic("adaptiveredis: n < 1")
	}
	if n > g.min {
		return floodgate.Held{}, reject.New(ErrTooLarge, 0)
	}
	g.mu.Lock()
	g.waiting++
	g.active = true
	g.mu.Unlock()
	var dh floodgate.Held
	var err error
	if wait {
		dh, err = g.sem.Hold(ctx, n)
	} else {
		dh, err = g.sem.TryHold(ctx, n)
	}
	now := g.now()
	g.mu.Lock()
	g.waiting--
	if err != nil {
		if errors.Is(err, distsem.ErrNoCapacity) {
			g.pend.full = true
		}
		g.mu.Unlock()
		return floodgate.Held{}, err
	}
	g.seq++
	id := g.seq
	g.holds[id] = hold{dh: dh, n: n, start: now}
	g.inFlight += n
	g.mu.Unlock()
	return floodgate.NewTaggedHeld(dh.Context(), g.release, n, id), nil
}

// Drop releases h, which this gate gave out, as a drop: the call failed
// because the downstream is overloaded (it refused, or timed out), and its
// hold time is not a latency sample. As with adaptive.Gate, a Held released
// after its context's deadline counts as a drop by itself, and one released
// after its context was cancelled (or its lease lost) counts as neither a
// sample nor a drop.
func (g *Gate) Drop(h floodgate.Held) {
	if h.N() == 0 && h.Context() == nil {
		return
	}
	g.finish(h.Tag(), true)
}

// finish takes back the hold with tag id: its sample (or drop) goes to the
// pending samples if it began in the round this process knows, and its
// semaphore permit is released. A second release does nothing.
func (g *Gate) finish(id int64, dropped bool) {
	now := g.now()
	g.mu.Lock()
	h, ok := g.holds[id]
	if !ok {
		g.mu.Unlock()
		return
	}
	delete(g.holds, id)
	g.inFlight -= h.n
	g.active = true
	timedOut, canceled := limitctl.How(h.dh.Context())
	if g.round > 0 && h.start >= g.roundStart {
		switch {
		case dropped || timedOut:
			g.pend.drops++
			g.stats.Drops++
		case canceled: // cancelled by its caller or lease lost: no sample
		default:
			lat := now - h.start
			g.pend.samples++
			g.pend.lat += lat
			g.pend.sq += float64(lat) * float64(lat)
			g.stats.Samples++
		}
	}
	g.mu.Unlock()
	h.dh.Release()
	if g.obs != nil {
		g.obs.Observe(floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentAdaptive, N: h.n, Duration: now - h.start})
	}
}

// fromSemaphore learns from the semaphore's events (a grant that queued
// means the fleet was full) and passes them on: admits, refusals and
// cancels as the gate's own, renewals and lost leases as they are; releases
// are not passed (finish reports them, with the hold time).
func (g *Gate) fromSemaphore(e floodgate.Event) {
	switch e.Kind {
	case floodgate.KindRelease:
		return
	case floodgate.KindAdmit:
		if e.Duration > 0 && e.Source == floodgate.SourceStore {
			g.mu.Lock()
			g.pend.full = true
			g.mu.Unlock()
		}
		e.Component = floodgate.ComponentAdaptive
	case floodgate.KindReject, floodgate.KindCancel:
		e.Component = floodgate.ComponentAdaptive
	}
	if g.obs != nil {
		g.obs.Observe(e)
	}
}

// MaxLimit returns the highest the fleet limit may go: Config.Max, or its
// default. bulkhead checks a layer's criticality reservations against it.
func (g *Gate) MaxLimit() int64 { return int64(g.p.Max) }

// Limit returns the fleet limit as this process last learned it (the
// configured Initial before it learned any): at most a FlushInterval old
// while the process is busy; an idle process, which does not flush, keeps
// the last limit it learned.
func (g *Gate) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limitLocked()
}

func (g *Gate) limitLocked() int64 {
	if !g.known {
		return max(1, int64(g.initial))
	}
	return g.state.Cap()
}

// Stats counts what this process's gate did. Limit, InFlight, Waiting,
// Processes, LocalShare, Round, Baseline and Latency are the present as this
// process knows it; the rest count since New.
type Stats struct {
	Limit      int64         // the fleet limit
	InFlight   int64         // weight held through this process
	Waiting    int           // callers of this process waiting in Hold
	Processes  int64         // processes seen reporting in the last round (at least 1)
	LocalShare int64         // FailLocal's share: Limit / Processes, at least 1
	Round      int64         // the fleet's round number
	Baseline   time.Duration // the downstream's no-queue latency, as the fleet knows it
	Latency    time.Duration // the last decided round's mean hold time

	Samples, Drops uint64 // holds of this process measured, and dropped
	// Flushes counts flush calls answered, FlushErrors those that failed; Lost
	// the samples and drops whose flush failed, Stale those that reached
	// Redis after their round closed (discarded).
	Flushes, FlushErrors, Lost, Stale uint64
	// RoundCounts counts the rounds this process decided (it won the close),
	// by outcome; CloseLost the closes another process won first;
	// CloseErrors and SetLimitErrors the calls that failed; Healed the times
	// this process set the semaphore's limit because it differed from the
	// fleet state's (a decider that died before its SetLimit, or the
	// semaphore's keys expired).
	adaptive.RoundCounts
	CloseLost, CloseErrors, SetLimitErrors, Healed uint64

	Semaphore distsem.LocalStats // the semaphore's own counts
}

// Stats returns a snapshot of the gate's counts. It does no I/O.
func (g *Gate) Stats() Stats {
	ls := g.sem.LocalStats()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Limit, s.InFlight, s.Waiting = g.limitLocked(), g.inFlight, g.waiting
	s.Processes, s.LocalShare, s.Round = g.procs, g.share, g.round
	if g.known {
		s.Baseline, s.Latency = time.Duration(g.state.Baseline), time.Duration(g.state.Latency)
	}
	s.Semaphore = ls
	return s
}

// Semaphore returns the distsem semaphore that is the fleet's cap (for its
// Stats; its limit is the controller's to set).
func (g *Gate) Semaphore() *distsem.Semaphore { return g.sem }

// Close stops the flusher and waits for it (a call in flight is cancelled),
// then closes the semaphore (see distsem.Semaphore.Close: callers still
// waiting fail with distsem.ErrClosed; permits held keep renewing until
// released). Holds and TryHolds fail with distsem.ErrClosed after Close.
// Close is idempotent.
func (g *Gate) Close() error {
	g.closeSem.Do(func() {
		g.stop()
		<-g.done
		g.sem.Close()
	})
	return nil
}

// now is the gate's local clock: monotonic time since New.
func (g *Gate) now() time.Duration { return time.Since(g.born) }

var _ floodgate.Gate = (*Gate)(nil)

// String describes the gate, for logs.
func (g *Gate) String() string {
	s := g.Stats()
	return fmt.Sprintf("adaptiveredis.Gate{limit %d, in flight %d, processes %d}", s.Limit, s.InFlight, s.Processes)
}
