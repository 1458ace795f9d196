package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/classq"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// Errors of the worker throttle ([Workers]).
var (
	// ErrQueueFull: a class's backlog already holds WorkerClass.MaxQueue
	// jobs. It comes in a *RejectError (Reason queue_full, Layer the class)
	// whose RetryAfter estimates when the class's next job will start: the
	// recent interval between its starts while it had a backlog (1s before
	// there is one).
	ErrQueueFull = reject.Sentinel(floodgate.ReasonQueueFull, "bulkhead: queue full")

	// ErrClosed: Submit or Do after Shutdown began; also the error a queued
	// job is handed back with when Shutdown does not run it.
	ErrClosed = reject.Sentinel(floodgate.ReasonClosed, "bulkhead: workers closed")

	// ErrUnknownClass: Submit or Do named a class that is not in
	// WorkersConfig.Classes. The returned error wraps it and names the class.
	ErrUnknownClass = errors.New("bulkhead: unknown class")

	// ErrAborted is the cause (context.Cause) of a running job's context when
	// Shutdown's context ended before the job returned. The cause wraps the
	// Shutdown context's own cause too.
	ErrAborted = errors.New("bulkhead: job aborted by shutdown")
)

// DefaultClass is the name of the one class of a Workers configured without
// Classes.
const DefaultClass = "default"

// A Pacer spaces out job starts: Wait blocks until a slot of weight n is
// released, and returns nil, or returns why no slot will come. shaper.Queue
// has this method, and so does the fleet-wide Redis queue (every process that
// uses one with the same name shares one schedule).
type Pacer interface {
	Wait(ctx context.Context, n int64) error
}

// A Job is what Submit queues: the function to run, and the value it is
// for, which the Workers hands back as is if the job never runs.
type Job struct {
	// Run is the job. Required.
	Run func(context.Context) error

	// Value, if set, tells the submitter which job this is: the broker
	// message to put back, a task id. The Workers never reads it; it is
	// handed back, in the Job, to WorkersConfig.OnUnstarted.
	Value any
}

// A WorkerClass is a priority class of jobs of a Workers.
type WorkerClass struct {
	// Name names the class in Submit, Do and Stats. Required, unique.
	Name string

	// Reserved is how many of the Workers' limit are kept for this class
	// alone, whatever the priority of the others: a job of any other class,
	// higher or lower, starts only while, after starting it, the unused
	// reservations of every other class are still free. So a flood of a
	// higher class cannot take a lower class's reservation, and a flood of a
	// lower class cannot take a higher class's. Beyond its reservation, a
	// class competes for the rest of the limit by priority. If zero, nothing
	// is reserved. The Reserved of all classes together may not exceed the
	// limit, and must leave room for one job of every class with no Reserved
	// of its own (a class that could never start a job is refused).
	Reserved int64

	// MaxQueue bounds the class's backlog: a job submitted while MaxQueue jobs
	// of the class wait is refused with a *RejectError matching ErrQueueFull.
	// If zero, the backlog is unbounded.
	MaxQueue int
}

// WorkersConfig configures a Workers. The zero value is valid: one class
// (DefaultClass) with an unbounded backlog, no start rate, no gate beyond the
// limit, and Shutdown drains the backlog.
type WorkersConfig struct {
	// Classes are the priority classes, highest first. If empty, one class
	// named DefaultClass.
	Classes []WorkerClass

	// Pace, if non-nil, spaces out starts: every job start takes one slot of
	// weight 1 (a local shaper.Queue for this process, or the fleet-wide Redis
	// queue for every process that shares it). If nil, jobs start as soon as
	// there is room.
	Pace Pacer

	// Gate, if non-nil, is a cap shared beyond this Workers (a distsem.Semaphore
	// for the fleet, or a semaphore.Weighted shared with other code): any
	// floodgate gate. Every job runs holding weight 1 of it, on top of the
	// Workers' own limit, taken with its Hold (waiting as long as it takes,
	// until Shutdown stops the dispatching). Its Held's context (for distsem,
	// cancelled when the lease is lost) is a parent of the job's.
	Gate floodgate.Gate

	// HandBack, if true, makes Shutdown hand every queued job back instead of
	// running it: Do returns ErrClosed and OnUnstarted receives each submitted
	// job. It requires OnUnstarted. If false, Shutdown runs the backlog on
	// schedule.
	HandBack bool

	// OnUnstarted, if non-nil, receives every Job given to Submit that will
	// never run, as it was submitted (its Value says which message to put
	// back), with the reason: ErrClosed when Shutdown hands it back, or the
	// Pace's or the Gate's error when its start failed. A job given to Do is
	// not passed here: Do returns the error. It is called without locks held,
	// on the goroutine of Shutdown or of the throttle's dispatcher, and may
	// call Stats (Submit after Shutdown returns ErrClosed). It must not call
	// Shutdown: Shutdown waits for it to return.
	OnUnstarted func(class string, job Job, err error)

	// Observer, if non-nil, is told what the Workers does, with Component
	// floodgate.ComponentWorkers, Part the class and N 1: KindAdmit when a
	// job starts (Duration the time it spent queued, from Submit or Do to its
	// start, the delay WorkerClassStats sums in QueueDelay), KindRelease when
	// it returns (Duration its run time), KindReject when Submit or Do
	// refuses it (queue_full, closed) or its start fails (the Pace's or the
	// Gate's error; Reason its word), and KindCancel when Do's context ends
	// while the job is queued. It is called without locks held.
	Observer floodgate.Observer
}

// Workers is a worker throttle for job loops: "export jobs start at most 5/s
// fleet-wide, smoothly; at most 8 run at once; interactive exports are never
// starved by background ones; shutdown drains". Jobs are queued per priority
// class and run on goroutines the Workers owns, no more than its limit at once
// (and within Gate, if set), their starts spaced by Pace.
//
// # Use in a job loop
//
//	w := bulkhead.NewWorkers(8, bulkhead.WorkersConfig{
//		Classes: []bulkhead.WorkerClass{
//			{Name: "interactive", Reserved: 2, MaxQueue: 100},
//			{Name: "background", MaxQueue: 1000},
//		},
//		Pace: shaper.NewQueue(shaper.PerSecond(5), shaper.QueueConfig{}),
//		OnUnstarted: func(class string, job bulkhead.Job, err error) {
//			job.Value.(broker.Message).Nack(0) // never ran: put it back
//		},
//	})
//	for msg := range broker.Messages(ctx) {
//		err := w.Submit(ctx, "background", bulkhead.Job{
//			Run:   func(ctx context.Context) error { return export(ctx, msg) },
//			Value: msg,
//		})
//		if re, ok := errors.AsType[*bulkhead.RejectError](err); ok {
//			msg.Nack(re.RetryAfter()) // backlog full: let the broker keep it
//		} else if err != nil {
//			msg.Nack(0) // ErrClosed: shutting down
//		}
//	}
//	err := w.Shutdown(shutdownCtx) // runs the backlog, waits for running jobs
//
// Submit queues the job and returns at once; the job's own code acks, nacks
// or logs. Do queues the job and waits for it to finish, returning its error:
// for a request handler that runs an interactive export and answers with the
// result. A job loop gets backpressure from MaxQueue: Submit refuses with
// ErrQueueFull and a RetryAfter instead of blocking, so the loop can leave the
// message on the broker (or sleep) rather than hold it in memory.
//
// For a fleet, Pace is the fleet-wide Redis queue and Gate a distsem.Semaphore
// with the same name in every process; the limit then bounds each process and
// the Gate the fleet.
//
// # Scheduling
//
// One dispatcher goroutine starts jobs one at a time, while some class has a
// queued job and room: it takes a permit of the Gate (if set), then a slot of
// the Pace (if set), and only then picks the job: the first queued job of the
// highest class that has room. So a job of a higher class that arrives while
// the dispatcher waits for its slot gets that slot, and waits at most one
// start interval when its reserved capacity is free. The permit is taken
// before the slot so that starts stay smooth when the Gate is the bottleneck;
// the price is a permit held for up to one start interval before its job
// starts. Priority is strict: a higher class with queued jobs and room always
// goes first, so a steady flood of a higher class can starve lower ones of
// everything but their reservations (see [WorkerClass.Reserved]: a reservation is
// kept for its class alone, against higher and lower classes alike). Reservations and
// priorities are decided in this process: a Gate shared by the fleet knows
// nothing of classes, so one process's background jobs can fill a fleet-wide
// Gate that another process's interactive jobs then wait for.
//
// If the Pace or the Gate fails (a rejection such as shaper's ErrMaxWait, or
// a store outage that its policy refuses), the job the slot was for fails with
// that error: Do returns it, OnUnstarted receives a submitted job; the
// dispatcher goes on with the next one.
//
// # Job contexts
//
// A job's context is derived with context.WithCancelCause from the context
// given to Do (values and cancellation) or to Submit (values only: the job
// outlives Submit), and is also cancelled when the Gate's context ends (for
// distsem, a lost lease, with its cause) or when Shutdown's context ends first
// (cause ErrAborted). context.Cause(ctx) tells the job why. A panicking job
// crashes the program, as a panic on any goroutine does: nothing recovers it
// on one goroutine to re-raise it on another.
//
// # Shutdown
//
// [Workers.Shutdown] stops intake (ErrClosed), lets running jobs finish, and
// runs the backlog on schedule (or, with HandBack, hands it back at once). If
// its context ends first, it hands back what is still queued, cancels the
// running jobs (cause ErrAborted), waits for them to return, and reports the
// counts. No submitted job is dropped silently: each one runs, or Do returns
// its error, or OnUnstarted receives the Job (Stats counts it in any case;
// without OnUnstarted, counting is all that happens, so set it when a job
// stands for a message that must go back to its broker). When a Shutdown
// called from outside the jobs returns, no goroutine of the Workers is left;
// a job may call Shutdown too, with its own context (see [Workers.Shutdown]).
// OnUnstarted must not call Shutdown.
//
// Use NewWorkers; a zero Workers refuses every job with ErrClosed. A Workers
// is safe for simultaneous use by multiple goroutines. NewWorkers starts no
// goroutine: the dispatcher starts when a job is queued and exits when no
// class can start one.
type Workers struct {
	// Immutable after NewWorkers.
	limit       int64
	classes     []*class
	set         *classq.Set[*entry] // the classes' queues and what they run; guarded by mu
	byName      map[string]*class
	pace        Pacer
	gate        floodgate.KeyedGate // WorkersConfig.Gate, for gatewait
	handBack    bool
	onUnstarted func(string, Job, error)
	observer    floodgate.Observer

	// runCtx is the parent of every job's context; abort cancels it when
	// Shutdown's context ends. dispatchCtx, its child, bounds the waits of
	// the dispatcher; stopDispatch cancels it when dispatching stops. These
	// are the Workers' own lifetimes, not a caller's context.
	runCtx       context.Context
	abort        context.CancelCauseFunc
	dispatchCtx  context.Context
	stopDispatch context.CancelCauseFunc

	mu sync.Mutex
	// mu guards:
	goroutines  int           // dispatcher and job goroutines alive
	dispatching bool          // the dispatcher is alive
	closed      bool          // Shutdown began: no intake
	stopped     bool          // no more dispatching (HandBack, or Shutdown's ctx ended)
	handing     int           // batches of jobs taken from the queues, not yet all handed back
	inShutdown  int           // running jobs that are calling Shutdown themselves
	drained     bool          // closed, nothing queued, and every job left running called Shutdown
	changed     chan struct{} // closed (and cleared) when what Shutdown waits for changes; nil if no one waits
}

type class struct {
	name     string
	idx      int // in Workers.classes and Workers.set
	maxQueue int

	// guarded by Workers.mu:
	lastStart time.Time
	interval  time.Duration // moving average of the time between starts with a backlog
	stats     WorkerClassStats
}

type entry struct {
	// ctx is the submitter's context, kept only to derive the job's context
	// from: for Submit without its cancellation.
	ctx    context.Context
	job    Job
	c      *class
	queued time.Time
	delay  time.Duration // from queued to the start; set when it starts
	res    chan error    // Do only; buffered
	// canceled is set, before its Do is sent ctx.Err(), when the dispatcher
	// drops a Do job whose context ended while it was queued.
	canceled bool
	state    int // guarded by Workers.mu
	// shutdowns counts the calls of Shutdown made with the job's context
	// that are under way; guarded by Workers.mu.
	shutdowns int
	// vctx is the parent of the job's context, e.ctx with e under jobKey
	// (a field, so that the job's start allocates no context for it).
	vctx jobValueCtx
}

// jobValueCtx is a context that holds its entry under jobKey.
type jobValueCtx struct {
	context.Context
	e *entry
}

func (c *jobValueCtx) Value(key any) any {
	if key == (jobKey{}) {
		return c.e
	}
	return c.Context.Value(key)
}

const (
	queuedState = iota
	startedState
	removedState
	finishedState
)

// jobKey is the context key under which a job's context holds its entry, so
// that Shutdown can tell that it is called from that job.
type jobKey struct{}

// NewWorkers returns a Workers that runs at most limit jobs at once. It panics
// on a programmer error: limit < 1, a class without a Name or with a duplicate
// one, a negative Reserved or MaxQueue, Reserved adding up to more than limit,
// a class without Reserved that the others' Reserved leave no room (it could
// never start a job), or HandBack without OnUnstarted. It starts no
// goroutine.
func NewWorkers(limit int64, cfg WorkersConfig) *Workers {
	if limit < 1 {
		panic("bulkhead: NewWorkers: limit < 1")
	}
	if cfg.HandBack && cfg.OnUnstarted == nil {
		panic("bulkhead: NewWorkers: HandBack without OnUnstarted")
	}
	classes := cfg.Classes
	if len(classes) == 0 {
		classes = []WorkerClass{{Name: DefaultClass}}
	}
	w := &Workers{
		limit:       limit,
		byName:      make(map[string]*class, len(classes)),
		pace:        cfg.Pace,
		gate:        gatewait.Keyed(cfg.Gate, nil),
		handBack:    cfg.HandBack,
		onUnstarted: cfg.OnUnstarted,
		observer:    cfg.Observer,
	}
	reserved := make([]int64, 0, len(classes))
	for _, c := range classes {
		switch {
		case c.Name == "":
			panic("bulkhead: NewWorkers: class without a Name")
		case w.byName[c.Name] != nil:
			panic("bulkhead: NewWorkers: duplicate class " + c.Name)
		case c.Reserved < 0:
			panic("bulkhead: NewWorkers: class " + c.Name + ": negative Reserved")
		case c.MaxQueue < 0:
			panic("bulkhead: NewWorkers: class " + c.Name + ": negative MaxQueue")
		}
		reserved = append(reserved, c.Reserved)
		cl := &class{name: c.Name, idx: len(w.classes), maxQueue: c.MaxQueue}
		w.classes = append(w.classes, cl)
		w.byName[c.Name] = cl
	}
	// A class with a reservation can always start a job in it; one without
	// starts its first job only if the others' reservations leave room.
	switch i, problem := classq.Check(reserved, 1, limit); {
	case problem == "":
	case i < 0:
		panic("bulkhead: NewWorkers: " + problem)
	default:
		panic(fmt.Sprintf("bulkhead: NewWorkers: class %s: %s (%d)", w.classes[i].name, problem, limit))
	}
	w.set = classq.New[*entry](reserved)
	w.runCtx, w.abort = context.WithCancelCause(context.Background())
	w.dispatchCtx, w.stopDispatch = context.WithCancelCause(w.runCtx)
	return w
}

// Submit queues job in class and returns nil; job.Run runs later on a
// goroutine of the Workers (see the type's doc for its context), or, if it
// never runs, OnUnstarted receives job. Submit never waits. It returns
// without queueing anything:
//   - ctx.Err() if ctx is already done;
//   - ErrClosed after Shutdown began (and from a zero Workers);
//   - an error matching ErrUnknownClass if class is not configured;
//   - a *RejectError matching ErrQueueFull, with a RetryAfter estimate, if
//     the class's backlog is full.
//
// A Job without Run panics.
func (w *Workers) Submit(ctx context.Context, class string, job Job) error {
	if job.Run == nil {
		panic("bulkhead: Workers: Job without Run")
	}
	_, err := w.enqueue(ctx, class, job, false)
	return err
}

// Do queues job in class as Submit does, waits for it to run and returns its
// error. It returns Submit's errors without queueing. If ctx ends while the
// job is queued, Do removes it and returns ctx.Err(); once the job has
// started, ctx's end cancels the job's context (its cause is ctx's) and Do
// waits for the job to return. If the job's start fails, Do returns the
// Pace's or the Gate's error; if Shutdown hands it back, ErrClosed. The job
// runs on a goroutine of the Workers, not Do's. A nil job panics.
func (w *Workers) Do(ctx context.Context, class string, job func(context.Context) error) error {
	if job == nil {
		panic("bulkhead: Workers: nil job")
	}
	e, err := w.enqueue(ctx, class, Job{Run: job}, true)
	if err != nil {
		return err
	}
	select {
	case err := <-e.res:
		if e.canceled {
			w.canceled(e)
		}
		return err
	case <-ctx.Done():
	}
	w.mu.Lock()
	if e.state == queuedState {
		w.removeLocked(e)
		e.c.stats.Canceled++
		w.changedLocked()
		w.mu.Unlock()
		w.canceled(e)
		return ctx.Err()
	}
	w.mu.Unlock()
	err = <-e.res
	if e.canceled {
		w.canceled(e)
	}
	return err
}

func (w *Workers) enqueue(ctx context.Context, name string, job Job, wait bool) (*entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if w.limit == 0 {
		return nil, ErrClosed
	}
	c := w.byName[name]
	if c == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownClass, name)
	}
	e := &entry{ctx: ctx, job: job, c: c}
	if wait {
		e.res = make(chan error, 1)
	} else {
		e.ctx = context.WithoutCancel(ctx)
	}
	w.mu.Lock()
	err := w.queueLocked(e)
	w.mu.Unlock()
	if err != nil {
		w.refused(c, err)
		return nil, err
	}
	return e, nil
}

// queueLocked queues e in its class, or returns why not: ErrClosed, or a
// *RejectError matching ErrQueueFull.
func (w *Workers) queueLocked(e *entry) error {
	c := e.c
	if w.closed {
		c.stats.Closed++
		return ErrClosed
	}
	if c.maxQueue > 0 && len(w.set.Classes[c.idx].Queue) >= c.maxQueue {
		c.stats.QueueFull++
		d := c.interval
		if d <= 0 {
			d = time.Second
		}
		return &RejectError{Reason: floodgate.ReasonQueueFull, Layer: c.name, Status: http.StatusServiceUnavailable, Delay: d, Err: ErrQueueFull}
	}
	e.queued = time.Now()
	w.set.Push(c.idx, e)
	c.stats.Submitted++
	w.kickLocked()
	return nil
}

// kickLocked starts the dispatcher if it is not running and a job can start.
func (w *Workers) kickLocked() {
	if w.dispatching || w.stopped || w.pickableLocked() == nil {
		return
	}
	w.dispatching = true
	w.goroutines++
	go w.dispatch()
}

// pickableLocked returns the highest class that has a queued job and room to
// start it, or nil. A class has room while it runs fewer jobs than it
// reserves, or while starting one leaves the unused reservations of every
// other class free (see WorkerClass.Reserved; the rules are classq's, shared
// with bulkhead's criticality classes). Every start keeps running plus the
// unused reservations of all classes at most the limit.
func (w *Workers) pickableLocked() *class {
	if c := w.set.Next(1, w.limit); c >= 0 {
		return w.classes[c]
	}
	return nil
}

// removeLocked removes e from its class's queue and marks it removed.
func (w *Workers) removeLocked(e *entry) {
	w.set.Remove(e.c.idx, e)
	e.state = removedState
}

// popLocked removes and returns the first job of the highest class with room,
// or nil. Do jobs whose context ended are dropped from the queue on the way
// (their Do returns ctx.Err()).
func (w *Workers) popLocked() *entry {
	for {
		c := w.pickableLocked()
		if c == nil {
			return nil
		}
		e := w.set.Pop(c.idx)
		if e.res != nil && e.ctx.Err() != nil {
			e.state = removedState
			e.canceled = true
			c.stats.Canceled++
			e.res <- e.ctx.Err()
			continue
		}
		return e
	}
}

// dispatch starts jobs one at a time while some class can start one.
func (w *Workers) dispatch() {
	for {
		w.mu.Lock()
		if w.stopped || w.pickableLocked() == nil {
			w.dispatching = false
			w.exitLocked()
			w.mu.Unlock()
			return
		}
		if w.gate == nil && w.pace == nil {
			// Nothing to wait for: start every job there is room for.
			for e := w.popLocked(); e != nil; e = w.popLocked() {
				w.startLocked(e)
				w.spawnLocked(e, floodgate.Held{})
			}
			w.mu.Unlock()
			continue
		}
		w.mu.Unlock()
		w.startNext()
	}
}

// startNext takes a permit of the Gate, then a slot of the Pace (those that
// are set), and then starts the first job that can start, under the permit;
// if the Gate or the Pace fails, it fails that job instead.
func (w *Workers) startNext() {
	var h floodgate.Held // the zero Held, without a Gate
	if w.gate != nil {
		var err error
		if h, err = w.hold(); err != nil {
			w.failNext(err, false)
			return
		}
	}
	if w.pace != nil {
		if err := w.pace.Wait(w.dispatchCtx, 1); err != nil {
			h.Release()
			w.failNext(err, true)
			return
		}
	}
	w.mu.Lock()
	var e *entry
	if !w.stopped {
		e = w.popLocked()
	}
	if e != nil {
		w.startLocked(e)
		w.spawnLocked(e, h)
	}
	w.mu.Unlock()
	if e == nil {
		h.Release() // nothing to start after all: the permit goes back
	}
}

// hold takes weight 1 of the Gate, waiting until dispatching stops. What it
// holds outlives the wait: its context, the parent of the job's, ends only
// with runCtx or when the Held is released.
func (w *Workers) hold() (floodgate.Held, error) {
	ctx, cancel := context.WithCancelCause(w.runCtx)
	stop := context.AfterFunc(w.dispatchCtx, func() { cancel(context.Cause(w.dispatchCtx)) })
	h, _, err := gatewait.Take(ctx, w.gate, "", 1, 0, nil, nil)
	if !stop() { // dispatching stopped while we waited: give back a late grant
		h.Release()
		cancel(nil)
		return floodgate.Held{}, context.Cause(w.dispatchCtx)
	}
	if err != nil {
		cancel(nil)
		return floodgate.Held{}, err
	}
	return floodgate.NewHeld(h.Context(), func(string, int64) {
		h.Release()
		cancel(nil)
	}, "", 1), nil
}

// spawnLocked runs e on a new goroutine, holding h (the zero Held without a
// Gate).
func (w *Workers) spawnLocked(e *entry, h floodgate.Held) {
	w.goroutines++
	go func() {
		w.run(e, h)
		w.mu.Lock()
		w.exitLocked()
		w.mu.Unlock()
	}()
}

// startLocked records that e starts now.
func (w *Workers) startLocked(e *entry) {
	c := e.c
	now := time.Now()
	e.state = startedState
	w.set.Start(c.idx, 1)
	c.stats.Started++
	d := now.Sub(e.queued)
	e.delay = d
	c.stats.QueueDelay += d
	c.stats.MaxQueueDelay = max(c.stats.MaxQueueDelay, d)
	// Only intervals with a backlog say how fast the class drains: a job
	// queued after the previous start measures an idle gap.
	if !c.lastStart.IsZero() && !e.queued.After(c.lastStart) {
		iv := now.Sub(c.lastStart)
		if c.interval == 0 {
			c.interval = iv
		} else {
			c.interval = (7*c.interval + iv) / 8
		}
	}
	c.lastStart = now
}

// failNext fails the job that a slot (rate) or permit (!rate) was being taken
// for with err, unless dispatching stopped (Shutdown hands the jobs back).
func (w *Workers) failNext(err error, rate bool) {
	w.mu.Lock()
	var e *entry
	if !w.stopped && w.dispatchCtx.Err() == nil {
		e = w.popLocked()
	}
	if e != nil {
		e.state = removedState
		if rate {
			e.c.stats.PaceErrors++
		} else {
			e.c.stats.GateErrors++
		}
	}
	w.mu.Unlock()
	if e != nil {
		w.refused(e.c, err)
		w.giveBack(e, err)
	}
}

// giveBack reports that e will not run. It must be called without w.mu held.
func (w *Workers) giveBack(e *entry, err error) {
	if e.res != nil {
		e.res <- err
	} else if w.onUnstarted != nil {
		w.onUnstarted(e.c.name, e.job, err)
	}
}

// run runs e's job, holding h, with a context derived from e.ctx and from
// h's (runCtx without a Gate), and records its end, after giving h back.
func (w *Workers) run(e *entry, h floodgate.Held) {
	parent := w.runCtx
	if h.N() != 0 {
		parent = h.Context()
	}
	e.vctx = jobValueCtx{e.ctx, e}
	ctx, cancel := context.WithCancelCause(&e.vctx)
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	var start time.Time
	var err error
	defer func() {
		stop()
		cancel(nil)
		h.Release()
		w.finished(e, err)
		if w.observer != nil {
			w.observe(floodgate.Event{Kind: floodgate.KindRelease, Part: e.c.name, N: 1, Duration: time.Since(start)})
		}
		if e.res != nil {
			e.res <- err
		}
	}()
	if w.observer != nil {
		w.observe(floodgate.Event{Kind: floodgate.KindAdmit, Part: e.c.name, N: 1, Duration: e.delay})
		start = time.Now()
	}
	err = e.job.Run(ctx)
}

// finished records that e's job returned err.
func (w *Workers) finished(e *entry, err error) {
	c := e.c
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set.Done(c.idx, 1)
	c.stats.Finished++
	if err != nil {
		c.stats.Failed++
	}
	e.state = finishedState
	if e.shutdowns > 0 {
		// Left behind by the job (say, on a goroutine of its own), those
		// calls now wait as any other caller does.
		e.shutdowns = 0
		w.inShutdown--
		w.changedLocked()
	}
	w.kickLocked()
}

// observe sends e, from the Workers, to the Observer (which is set).
func (w *Workers) observe(e floodgate.Event) {
	e.Component = floodgate.ComponentWorkers
	w.observer.Observe(e)
}

// canceled tells the Observer that Do's context ended while e was queued.
func (w *Workers) canceled(e *entry) {
	if w.observer != nil {
		w.observe(floodgate.Event{Kind: floodgate.KindCancel, Part: e.c.name, N: 1, Duration: time.Since(e.queued)})
	}
}

// refused tells the Observer that a job of class c was refused with err.
func (w *Workers) refused(c *class, err error) {
	if w.observer != nil {
		w.observe(floodgate.Event{Kind: floodgate.KindReject, Part: c.name, N: 1, Reason: reject.ReasonOf(err), Err: err})
	}
}

// exitLocked records that a goroutine of w ends.
func (w *Workers) exitLocked() {
	w.goroutines--
	if w.goroutines <= w.inShutdown { // else no Shutdown can be done yet
		w.changedLocked()
	}
}

// changedLocked wakes every Shutdown waiting for w to be done.
func (w *Workers) changedLocked() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// doneLocked reports whether Shutdown, called from the job self (nil: from
// outside every job), has nothing left to wait for: no job queued, none being
// handed back, and no goroutine of w alive but those of the jobs that are
// themselves calling Shutdown (for a call from outside, none at all).
func (w *Workers) doneLocked(self *entry) bool {
	if w.handing > 0 {
		return false
	}
	if self == nil || self.shutdowns == 0 { // from outside, or its job has returned
		return w.goroutines == 0 && w.queuedLocked() == 0
	}
	// Once every job still running is one calling Shutdown, nothing else
	// can start (intake is closed, the queues are empty): each of those
	// calls returns, even after another of them returned and its job runs
	// on.
	if !w.drained && w.goroutines == w.inShutdown && w.queuedLocked() == 0 {
		w.drained = true
	}
	return w.drained
}

// queuedLocked returns how many jobs are queued, all classes.
func (w *Workers) queuedLocked() int {
	return w.set.Queued()
}

// wait waits until Shutdown, called from the job self or from outside (nil),
// has nothing left to wait for, and returns nil, or until ctx ends, and
// returns ctx.Err().
func (w *Workers) wait(ctx context.Context, self *entry) error {
	for {
		w.mu.Lock()
		if w.doneLocked(self) {
			w.mu.Unlock()
			return nil
		}
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// handBackAll gives back the jobs that takeAllLocked took, then records that
// this batch is handed back.
func (w *Workers) handBackAll(back []*entry) {
	for _, e := range back {
		w.giveBack(e, ErrClosed)
	}
	w.mu.Lock()
	w.handing--
	w.changedLocked()
	w.mu.Unlock()
}

// takeAllLocked stops dispatching and empties every queue, returning the jobs
// in priority order. The caller must pass them to handBackAll.
func (w *Workers) takeAllLocked(cause error) []*entry {
	w.handing++
	w.stopped = true
	w.stopDispatch(cause)
	var all []*entry
	for _, c := range w.classes {
		for _, e := range w.set.Classes[c.idx].Queue {
			e.state = removedState
			c.stats.HandedBack++
			all = append(all, e)
		}
		w.set.Classes[c.idx].Queue = nil
	}
	return all
}

// Shutdown stops intake: Submit and Do return ErrClosed from now on. It then
// waits for the backlog to run on schedule (with HandBack: hands every queued
// job back at once with ErrClosed) and for the running jobs to return, and
// returns nil.
//
// If ctx ends first, Shutdown hands back every job still queued (ErrClosed),
// cancels the contexts of the running jobs with a cause matching ErrAborted,
// waits for them to return, and returns an error that counts them and
// matches ctx.Err(). A job that ignores its context therefore delays
// Shutdown: it returns only when every goroutine of the Workers has ended
// and every job taken from the queues has been handed back.
//
// Shutdown may be called more than once and concurrently; every call waits as
// the first does. A job may call Shutdown itself, with its own context or
// one derived from it (Shutdown recognises the job by it): it cannot wait
// for itself, so it waits for everything else (the backlog, the other jobs,
// other jobs calling Shutdown excepted) and returns while the calling job
// still runs; a Shutdown from outside the jobs still waits for that job to
// return. A job that calls Shutdown with some other context is not
// recognised, and Shutdown then waits for it as for any job, that is for
// ever, since it is the job: give it the job's context.
func (w *Workers) Shutdown(ctx context.Context) error {
	if w.limit == 0 {
		return nil
	}
	self, _ := ctx.Value(jobKey{}).(*entry)
	w.mu.Lock()
	if self != nil && (self.state != startedState || !slices.Contains(w.classes, self.c)) {
		self = nil // a job of another Workers, or one that has returned
	}
	if self != nil {
		self.shutdowns++
		if self.shutdowns == 1 {
			w.inShutdown++
			w.changedLocked()
		}
		defer func() {
			w.mu.Lock()
			if self.shutdowns > 0 {
				self.shutdowns--
				if self.shutdowns == 0 {
					w.inShutdown--
				}
			}
			w.mu.Unlock()
		}()
	}
	w.closed = true
	took := w.handBack && !w.stopped
	var back []*entry
	if took {
		back = w.takeAllLocked(ErrClosed)
	}
	w.mu.Unlock()
	if took {
		w.handBackAll(back)
	}
	if w.wait(ctx, self) == nil {
		return nil
	}
	cause := fmt.Errorf("%w (%w)", ErrAborted, context.Cause(ctx))
	w.mu.Lock()
	back = w.takeAllLocked(ErrClosed)
	aborted := w.set.Running
	w.abort(cause)
	w.mu.Unlock()
	w.handBackAll(back)
	w.wait(context.Background(), self)
	return fmt.Errorf("bulkhead: shutdown: %d queued jobs handed back, %d running jobs cancelled: %w", len(back), aborted, ctx.Err())
}

// WorkerClassStats counts what one class did. Counters are totals since NewWorkers.
type WorkerClassStats struct {
	Name string

	Queued  int   // jobs waiting now
	Running int64 // jobs running now

	Submitted uint64 // jobs queued (by Submit or Do)
	Started   uint64 // jobs started
	Finished  uint64 // jobs that returned
	Failed    uint64 // of those, with a non-nil error

	// Jobs refused or not run, by reason.
	QueueFull  uint64 // refused: the backlog was full (ErrQueueFull)
	Closed     uint64 // refused: Shutdown had begun (ErrClosed)
	Canceled   uint64 // Do's context ended while the job was queued
	HandedBack uint64 // queued, then handed back by Shutdown (ErrClosed)
	PaceErrors uint64 // the Pace failed the job's start
	GateErrors uint64 // the Gate failed the job's start

	QueueDelay    time.Duration // total time started jobs spent queued
	MaxQueueDelay time.Duration // the longest of those
}

// WorkersStats is a snapshot of a Workers' state and counters.
type WorkersStats struct {
	Limit   int64              // the most jobs run at once
	Running int64              // jobs running now
	Classes []WorkerClassStats // in WorkersConfig.Classes order
}

// Stats returns a snapshot, taken at one instant.
func (w *Workers) Stats() WorkersStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil { // a zero Workers
		return WorkersStats{Classes: []WorkerClassStats{}}
	}
	st := WorkersStats{Limit: w.limit, Running: w.set.Running, Classes: make([]WorkerClassStats, len(w.classes))}
	for i, c := range w.classes {
		cs := c.stats
		cs.Name = c.name
		cs.Queued = len(w.set.Classes[c.idx].Queue)
		cs.Running = w.set.Classes[c.idx].Running
		st.Classes[i] = cs
	}
	return st
}

// Class returns the stats of the class named name, and whether there is one.
func (st WorkersStats) Class(name string) (WorkerClassStats, bool) {
	for _, c := range st.Classes {
		if c.Name == name {
			return c, true
		}
	}
	return WorkerClassStats{}, false
}
