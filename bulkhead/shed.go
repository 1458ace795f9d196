package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/classq"
	"github.com/floodgate-go/floodgate/internal/gatewait"
	"github.com/floodgate-go/floodgate/internal/reject"
)

// ErrShed: a layer with criticality classes refused a request of a class
// below the first, to keep the gate for more critical ones: it found no
// room it may use (the room left is reserved for other classes, or more
// critical requests wait) and its class does not wait (Criticality.MaxWait
// < 0), or it waited its class's MaxWait, or its class's queue was full.
// The RejectError (Reason shed, Status 503) wraps the cause too (ErrMaxWait,
// the gate's refusal), and its RetryAfter estimates when the class would be
// served: the recent interval between the gate's releases times the
// requests queued ahead of it, plus one.
var ErrShed = reject.Sentinel(floodgate.ReasonShed, "bulkhead: shed")

// A Criticality is a class of requests at a layer's gate (Layer.Classes):
// who waits and who is shed when the gate is saturated. Classes are ordered,
// most critical first: a request of a class waits only behind the queued
// requests of its own and more critical classes (priority is strict, FIFO
// within a class), so when the gate is full the least critical are the ones
// left waiting, and shed. The gate itself stays the one exact cap: a class
// never holds more than the gate grants.
type Criticality struct {
	// Name names the class: the value Config.Criticality (or
	// Identity.Criticality) gives a request, and Stats' and the Observer's
	// Class. Required, unique within the layer.
	Name string

	// Reserved is the gate weight kept for this class alone, against more and
	// less critical classes alike, exactly as WorkerClass.Reserved (the same
	// rules): a request of any other class starts only while, after it, the
	// unused reservations of every other class are still free. A request
	// takes Layer.N of it. The Reserved of all classes together may not
	// exceed the gate's limit (for a gate whose limit moves, such as an
	// adaptive.Gate, its MaxLimit), and must leave every class room for one
	// request. Where the limit falls to the reservations or below (an
	// adaptive gate's after a cut, a lowered SetLimit), they still keep the
	// other classes out except while nothing runs, so reservations alone
	// never leave the gate idle. If zero, nothing is reserved.
	Reserved int64

	// MaxWait is how long a request of this class waits for the gate, as
	// Layer.MaxWait means (negative: refused at once when there is no room
	// for it). If zero, Layer.MaxWait. Give the least critical classes the
	// shortest waits: they are the ones that wait when the gate is full.
	MaxWait time.Duration

	// MaxQueue bounds how many requests of this class wait at once; one more
	// is refused at once. If zero, unbounded.
	MaxQueue int
}

// limiter is the shape of a gate whose limit can be read: every floodgate
// gate (semaphore.Weighted, distsem.Semaphore, adaptive.Gate) has it.
type limiter interface{ Limit() int64 }

// shedder runs the criticality classes of one layer in front of its gate.
type shedder struct {
	gate    floodgate.Gate
	limit   limiter
	n       int64
	classes []Criticality
	byName  map[string]int
	stats   []classCounters
	retry   time.Duration   // the layer's default retry delay
	waits   *gatewait.Waits // the layer's

	mu          sync.Mutex
	set         *classq.Set[*waiter] // guarded by mu
	dispatching bool                 // guarded by mu
	stopHold    context.CancelFunc   // guarded by mu: ends the dispatcher's wait, nil if none
	lastDone    time.Time            // guarded by mu: the last release while requests waited
	interval    time.Duration        // guarded by mu: moving average between such releases
}

type classCounters struct {
	admitted, shed, canceled, shadowShed atomic.Uint64
	inFlight, waiting                    atomic.Int64
}

// A waiter is a request queued in its class.
type waiter struct {
	ch chan grant // buffered: the dispatcher never blocks on it
}

type grant struct {
	h      floodgate.Held
	cancel context.CancelFunc // of the context the gate was held under
	err    error
}

// newShedder returns the shedder of layer l (named what) for classes, or
// panics on a programmer error.
func newShedder(what string, l Layer, n int64, retry time.Duration, waits *gatewait.Waits) *shedder {
	switch {
	case l.Gate == nil:
		panic(what + "Classes without a Gate (a KeyedGate's keys have no one limit to shed for)")
	}
	lim, ok := l.Gate.(limiter)
	if !ok {
		panic(what + "Classes need a Gate with a Limit() int64 method")
	}
	s := &shedder{gate: l.Gate, limit: lim, n: n, retry: retry, waits: waits,
		classes: append([]Criticality(nil), l.Classes...),
		byName:  make(map[string]int, len(l.Classes)),
		stats:   make([]classCounters, len(l.Classes)),
	}
	reserved := make([]int64, len(l.Classes))
	for i, c := range l.Classes {
		switch {
		case c.Name == "":
			panic(what + "a class without a Name")
		case s.has(c.Name):
			panic(what + "duplicate class " + c.Name)
		case c.Reserved < 0:
			panic(what + "class " + c.Name + ": negative Reserved")
		case c.MaxQueue < 0:
			panic(what + "class " + c.Name + ": negative MaxQueue")
		}
		s.byName[c.Name] = i
		reserved[i] = c.Reserved
	}
	bound := lim.Limit()
	if m, ok := l.Gate.(interface{ MaxLimit() int64 }); ok {
		bound = m.MaxLimit() // a limit that moves (an adaptive gate's): its highest
	}
	switch i, problem := classq.Check(reserved, n, bound); {
	case problem == "":
	case i < 0:
		panic(what + problem + fmt.Sprintf(" (%d)", bound))
	default:
		panic(what + "class " + l.Classes[i].Name + ": " + problem + fmt.Sprintf(" (%d)", bound))
	}
	s.set = classq.New[*waiter](reserved)
	return s
}

func (s *shedder) has(name string) bool { _, ok := s.byName[name]; return ok }

// class returns the index of the class named name, the last (least
// critical) for a name the layer does not have.
func (s *shedder) class(name string) int {
	if i, ok := s.byName[name]; ok {
		return i
	}
	return len(s.classes) - 1
}

// take takes the gate for a request of class c, waiting at most maxWait
// (the class's, resolved) on ctx. It returns what it holds, how long it
// waited (0 when it did not), and on failure ctx.Err(), the gate's refusal
// (for the first class: the usual words), or a *RejectError matching ErrShed.
func (s *shedder) take(ctx context.Context, c int, maxWait time.Duration) (floodgate.Held, time.Duration, error) {
	s.mu.Lock()
	if !s.set.Ahead(c) && s.set.Room(c, s.n, s.limit.Limit()) {
		s.set.Start(c, s.n)
		s.mu.Unlock()
		h, err := s.gate.TryHold(ctx, s.n)
		if err == nil {
			s.admitted(c)
			return h, 0, nil
		}
		s.mu.Lock()
		s.set.Done(c, s.n)
		s.kickLocked()
		if reject.ReasonOf(err) != floodgate.ReasonNoCapacity {
			s.mu.Unlock()
			return floodgate.Held{}, 0, err // waiting cannot change it
		}
	}
	if full := s.classes[c].MaxQueue > 0 && len(s.set.Classes[c].Queue) >= s.classes[c].MaxQueue; full || maxWait < 0 {
		d := s.estimateLocked(c)
		s.mu.Unlock()
		cause := errNoRoom
		if full {
			cause = errQueueFull
		}
		return floodgate.Held{}, 0, s.refusal(c, d, 0, cause)
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return floodgate.Held{}, 0, err
	}
	w := &waiter{ch: make(chan grant, 1)}
	s.set.Push(c, w)
	s.stats[c].waiting.Add(1)
	s.kickLocked()
	s.mu.Unlock()

	s.waits.Waiting.Add(1)
	start := time.Now()
	defer func() {
		s.waits.Waiting.Add(-1)
		s.waits.Count.Add(1)
		s.waits.Nanos.Add(uint64(time.Since(start)))
	}()
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case g := <-w.ch:
		s.stats[c].waiting.Add(-1)
		return s.granted(ctx, c, g, time.Since(start))
	case <-ctx.Done():
	case <-expired:
	}
	waited := time.Since(start)
	s.mu.Lock()
	if s.set.Remove(c, w) {
		if s.set.Queued() == 0 && s.stopHold != nil {
			s.stopHold() // no one left to wait for
		}
		d := s.estimateLocked(c)
		s.mu.Unlock()
		s.stats[c].waiting.Add(-1)
		if ctx.Err() != nil {
			s.stats[c].canceled.Add(1)
			return floodgate.Held{}, waited, ctx.Err()
		}
		return floodgate.Held{}, waited, s.refusal(c, d, waited, ErrMaxWait)
	}
	s.mu.Unlock()
	// Granted as the wait ended: give it back.
	g := <-w.ch
	s.stats[c].waiting.Add(-1)
	if g.err == nil {
		g.h.Release()
		g.cancel()
		s.release(c)
	}
	if ctx.Err() != nil {
		s.stats[c].canceled.Add(1)
		return floodgate.Held{}, waited, ctx.Err()
	}
	return floodgate.Held{}, waited, s.refusal(c, s.estimate(c), waited, ErrMaxWait)
}

// The causes of a refusal that did not wait: no room the class may use, and
// the class's queue full.
var (
	errNoRoom    = errors.New("no room for its class")
	errQueueFull = reject.Sentinel(floodgate.ReasonQueueFull, "bulkhead: class queue full")
)

// granted turns the dispatcher's grant g to a request of class c into what
// the request holds: the gate's Held, under a context derived from the
// request's (its values, deadline and cancellation) that also ends when the
// gate's Held context does (for distsem, a lost lease).
func (s *shedder) granted(ctx context.Context, c int, g grant, waited time.Duration) (floodgate.Held, time.Duration, error) {
	if g.err != nil {
		return floodgate.Held{}, waited, g.err
	}
	if err := ctx.Err(); err != nil {
		// The grant and the end of ctx came together: the end wins.
		g.h.Release()
		g.cancel()
		s.release(c)
		s.stats[c].canceled.Add(1)
		return floodgate.Held{}, waited, err
	}
	s.admitted(c)
	hctx := g.h.Context()
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(hctx, func() { cancel(context.Cause(hctx)) })
	inner := g.h
	return floodgate.NewHeld(rctx, func(string, int64) {
		stop()
		cancel(nil)
		inner.Release()
		g.cancel()
	}, "", s.n), waited, nil
}

func (s *shedder) admitted(c int) {
	s.stats[c].admitted.Add(1)
	s.stats[c].inFlight.Add(1)
}

// refusal returns the refusal of a request of class c after waiting waited,
// whose cause is err: the first class's is err itself (the usual words),
// the others' match ErrShed. d is the retry estimate.
func (s *shedder) refusal(c int, d, waited time.Duration, err error) error {
	if d <= 0 {
		d = s.retry
	}
	if c == 0 {
		switch err {
		case errNoRoom:
			return &RejectError{Reason: floodgate.ReasonNoCapacity, Delay: d, Err: fmt.Errorf("%w: %w", errNoCapacity, err)}
		case errQueueFull:
			return &RejectError{Reason: floodgate.ReasonQueueFull, Delay: d, Err: err}
		}
		return &RejectError{Reason: floodgate.ReasonMaxWait, Delay: d, Err: err}
	}
	s.stats[c].shed.Add(1)
	return &RejectError{Reason: floodgate.ReasonShed, Status: 503, Delay: d,
		Err: fmt.Errorf("%w: class %s: %w", ErrShed, s.classes[c].Name, err)}
}

// errNoCapacity is the first class's refusal when it may not wait.
var errNoCapacity = reject.Sentinel(floodgate.ReasonNoCapacity, "bulkhead: no capacity")

// done records that an admitted request of class c gave the gate back.
func (s *shedder) done(c int) {
	s.stats[c].inFlight.Add(-1)
	s.release(c)
}

// release gives back class c's share of a grant: that of an admitted
// request (done), or one that came as its wait ended and was never used.
func (s *shedder) release(c int) {
	s.mu.Lock()
	s.set.Done(c, s.n)
	if s.set.Queued() > 0 {
		now := time.Now()
		if !s.lastDone.IsZero() {
			iv := now.Sub(s.lastDone)
			if s.interval == 0 {
				s.interval = iv
			} else {
				s.interval = (7*s.interval + iv) / 8
			}
		}
		s.lastDone = now
	} else {
		s.lastDone = time.Time{}
	}
	s.kickLocked()
	s.mu.Unlock()
}

// estimateLocked estimates when a request of class c would be served: the
// recent interval between releases times the requests queued at or above
// its class, plus one; 0 when nothing is known.
func (s *shedder) estimateLocked(c int) time.Duration {
	return s.interval * time.Duration(s.set.Waiting(c)+1)
}

func (s *shedder) estimate(c int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.estimateLocked(c)
}

// kickLocked starts the dispatcher if some queued request has room.
func (s *shedder) kickLocked() {
	if s.dispatching || s.set.Next(s.n, s.limit.Limit()) < 0 {
		return
	}
	s.dispatching = true
	go s.dispatch()
}

// dispatch takes the gate, one grant at a time, for the first queued
// request of the most critical class with room, while there is one. It
// waits for the gate (Hold) before it picks the request, so a more critical
// request that arrives during the wait gets the grant. It exits when no
// queued request has room; a release or an arrival starts it again.
func (s *shedder) dispatch() {
	for {
		s.mu.Lock()
		if s.set.Next(s.n, s.limit.Limit()) < 0 {
			s.dispatching = false
			s.mu.Unlock()
			return
		}
		hctx, cancel := context.WithCancel(context.Background())
		s.stopHold = cancel
		s.mu.Unlock()

		h, err := s.gate.Hold(hctx, s.n)

		s.mu.Lock()
		s.stopHold = nil
		c := s.set.Next(s.n, s.limit.Limit())
		switch {
		case err != nil && hctx.Err() != nil:
			// Every waiter left.
			s.mu.Unlock()
			cancel()
		case err != nil:
			// The gate failed (a store unavailable, too large): the request
			// the grant was for fails with its error.
			cancel()
			if c < 0 {
				c = s.firstQueuedLocked()
			}
			if c >= 0 {
				s.set.Pop(c).ch <- grant{err: err}
			}
			s.mu.Unlock()
		case c < 0 || hctx.Err() != nil:
			// No one may use it after all, or every waiter had left
			// (stopHold) by the time the gate granted it: its context is
			// done, so a request that queued since must not run under it.
			s.mu.Unlock()
			h.Release()
			cancel()
		default:
			w := s.set.Pop(c)
			s.set.Start(c, s.n)
			s.mu.Unlock()
			w.ch <- grant{h: h, cancel: cancel}
		}
	}
}

// firstQueuedLocked returns the most critical class with a queued request,
// or -1.
func (s *shedder) firstQueuedLocked() int {
	for c := range s.set.Classes {
		if len(s.set.Classes[c].Queue) > 0 {
			return c
		}
	}
	return -1
}

// shadow checks a request of class c against the gate without ever waiting
// or refusing: it holds the gate if a real layer would have granted at once,
// and otherwise returns the refusal a real layer would have made.
func (s *shedder) shadow(ctx context.Context, c int) (floodgate.Held, error) {
	s.mu.Lock()
	if s.set.Ahead(c) || !s.set.Room(c, s.n, s.limit.Limit()) {
		d := s.estimateLocked(c)
		s.mu.Unlock()
		return floodgate.Held{}, s.shadowRefusal(c, d)
	}
	s.set.Start(c, s.n)
	s.mu.Unlock()
	h, err := s.gate.TryHold(ctx, s.n)
	if err != nil {
		s.mu.Lock()
		s.set.Done(c, s.n)
		s.kickLocked()
		s.mu.Unlock()
		if reject.ReasonOf(err) == floodgate.ReasonNoCapacity {
			return floodgate.Held{}, s.shadowRefusal(c, reject.RetryAfter(err))
		}
		return floodgate.Held{}, err
	}
	s.admitted(c)
	return h, nil
}

func (s *shedder) shadowRefusal(c int, d time.Duration) error {
	err := s.refusal(c, d, 0, errNoRoom)
	if c > 0 {
		// refusal counted it as shed; in shadow it is a would-be shed.
		s.stats[c].shed.Add(^uint64(0))
		s.stats[c].shadowShed.Add(1)
	}
	return err
}

// ClassStats counts what one criticality class of a layer did. Counters are
// totals since New.
type ClassStats struct {
	Name     string
	Admitted uint64 // requests of the class granted the gate
	Shed     uint64 // refused with ErrShed (classes after the first)
	Canceled uint64 // their context ended while they waited
	// ShadowShed counts, in shadow mode, the requests a real layer would
	// have shed.
	ShadowShed uint64
	InFlight   int64 // holding the gate now
	Waiting    int64 // waiting for it now
}

func (s *shedder) snapshot() []ClassStats {
	out := make([]ClassStats, len(s.classes))
	for i := range s.classes {
		c := &s.stats[i]
		out[i] = ClassStats{Name: s.classes[i].Name, Admitted: c.admitted.Load(), Shed: c.shed.Load(),
			Canceled: c.canceled.Load(), ShadowShed: c.shadowShed.Load(), InFlight: c.inFlight.Load(), Waiting: c.waiting.Load()}
	}
	return out
}
