package bench

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	xsem "golang.org/x/sync/semaphore"
)

// The local semaphore beside x/sync/semaphore, failsafe-go's bulkhead (which
// is unweighted, so every call takes one permit) and a buffered channel (the
// runtime's own FIFO hand-off without weights), with two floors: mutexFloor
// (one mutex round, nothing else) and handoffFloor (a bare FIFO hand-off to a
// waiting goroutine). The in-package benchmarks in
// semaphore/ add more cases.

type permits interface {
	acquire(ctx context.Context) error
	tryAcquire() bool
	release()
}

type fgSem struct{ s *semaphore.Weighted }

func (p fgSem) acquire(ctx context.Context) error { return p.s.Acquire(ctx, 1) }
func (p fgSem) tryAcquire() bool                  { return p.s.TryAcquire(1) }
func (p fgSem) release()                          { p.s.Release(1) }

type xSem struct{ s *xsem.Weighted }

func (p xSem) acquire(ctx context.Context) error { return p.s.Acquire(ctx, 1) }
func (p xSem) tryAcquire() bool                  { return p.s.TryAcquire(1) }
func (p xSem) release()                          { p.s.Release(1) }

type fsBulkhead struct{ b bulkhead.Bulkhead[any] }

func (p fsBulkhead) acquire(ctx context.Context) error { return p.b.AcquirePermit(ctx) }
func (p fsBulkhead) tryAcquire() bool                  { return p.b.TryAcquirePermit() }
func (p fsBulkhead) release()                          { p.b.ReleasePermit() }

// chanSem is a buffered channel used as a semaphore of unit weights.
type chanSem chan struct{}

func (c chanSem) acquire(ctx context.Context) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c chanSem) tryAcquire() bool {
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

func (c chanSem) release() { <-c }

// A semImpl is one implementation the semaphore benchmarks run.
type semImpl struct {
	name string
	new  func(n int64) permits
}

var semImpls = []semImpl{
	{"floodgate", func(n int64) permits { return fgSem{semaphore.New(n, semaphore.Config{})} }},
	{"xsync", func(n int64) permits { return xSem{xsem.NewWeighted(n)} }},
	{"failsafe", func(n int64) permits { return fsBulkhead{bulkhead.New[any](uint(n))} }},
	{"chan", func(n int64) permits { return make(chanSem, n) }},
}

// mutexFloor is the floor of a semaphore behind one mutex: Acquire and
// Release each one Lock/Unlock round around a counter, nothing else (no
// weights, no queue, no cancellation check). x/sync/semaphore's and
// floodgate's uncontended paths are this plus their bookkeeping.
type mutexFloor struct {
	mu       sync.Mutex
	cur, max int64
}

func (f *mutexFloor) acquire(context.Context) error {
	f.mu.Lock()
	if f.cur >= f.max {
		f.mu.Unlock()
		panic("mutexFloor: full")
	}
	f.cur++
	f.mu.Unlock()
	return nil
}

func (f *mutexFloor) tryAcquire() bool { panic("mutexFloor: not used") }

func (f *mutexFloor) release() {
	f.mu.Lock()
	f.cur--
	f.mu.Unlock()
}

// handoffFloor is the floor of a FIFO semaphore that hands a permit to a
// waiting goroutine through a channel: one mutex, a queue of unit waiters, a
// wake by channel and nothing else (no weights, no cancellation, no
// statistics). With close set every wait makes a fresh waiter and unbuffered
// channel and the releaser closes it, as x/sync/semaphore does (two
// allocations per wait; x/sync makes three); without it a waiter and its
// buffered channel are reused through a sync.Pool and the releaser sends:
// floodgate's way, a wake with no allocation that still lets the waiter
// select on its context. The gap between the two rows is a send against a
// close plus floor-close's allocations; in the report's run its sign at
// GOMAXPROCS 1 was not its sign on every core.
type handoffFloor struct {
	close      bool
	pool       sync.Pool
	mu         sync.Mutex
	cur, max   int64
	head, tail *floorWaiter
}

type floorWaiter struct {
	next  *floorWaiter
	ready chan struct{}
}

func (f *handoffFloor) acquire(context.Context) error {
	f.mu.Lock()
	if f.head == nil && f.cur < f.max {
		f.cur++
		f.mu.Unlock()
		return nil
	}
	var w *floorWaiter
	if f.close {
		w = &floorWaiter{ready: make(chan struct{})}
	} else if p, ok := f.pool.Get().(*floorWaiter); ok {
		w = p
	} else {
		w = &floorWaiter{ready: make(chan struct{}, 1)}
	}
	if f.tail == nil {
		f.head = w
	} else {
		f.tail.next = w
	}
	f.tail = w
	f.mu.Unlock()
	<-w.ready // the permit was counted for us by release
	if !f.close {
		f.pool.Put(w)
	}
	return nil
}

func (f *handoffFloor) tryAcquire() bool { panic("handoffFloor: not used") }

func (f *handoffFloor) release() {
	f.mu.Lock()
	if w := f.head; w != nil { // hand the permit on: cur is unchanged
		f.head = w.next
		if f.head == nil {
			f.tail = nil
		}
		w.next = nil
		if f.close {
			close(w.ready)
		} else {
			w.ready <- struct{}{} // never blocks: buffered, and empty while queued
		}
	} else {
		f.cur--
	}
	f.mu.Unlock()
}

// BenchmarkSemaphoreAcquireRelease: one Acquire and Release with permits to
// spare (16), one goroutine; impl=floor is mutexFloor through the same
// interface. Target: impl=floodgate: ns/op ≤ 0.95× impl=xsync;
// impl=floodgate: allocs/op = 0.
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	ctx := context.Background()
	impls := append(semImpls[:len(semImpls):len(semImpls)], semImpl{"floor", func(n int64) permits { return &mutexFloor{max: n} }})
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			p := impl.new(16)
			b.ReportAllocs()
			for b.Loop() {
				if err := p.acquire(ctx); err != nil {
					b.Fatal(err)
				}
				p.release()
			}
		})
	}
}

// BenchmarkSemaphoreTryAcquireFull: TryAcquire on a semaphore with no permit
// left (it fails).
func BenchmarkSemaphoreTryAcquireFull(b *testing.B) {
	for _, impl := range semImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			p := impl.new(1)
			p.tryAcquire()
			b.ReportAllocs()
			for b.Loop() {
				if p.tryAcquire() {
					b.Fatal("acquired a full semaphore")
				}
			}
		})
	}
}

// BenchmarkSemaphoreBlocked: 64 goroutines on 4 permits; ns/op per acquisition.
// The permits are held until every goroutine has started, so the run begins with
// a queue and keeps it (see semaphore's BenchmarkBlocked: without this the result
// is bimodal, as the goroutines may run one after another and never wait).
// impl=floor-send and impl=floor-close are handoffFloor's two ways to wake a
// waiter, through the same interface.
//
// procs=1 runs the case with GOMAXPROCS 1: every hand-off is the releaser's
// bookkeeping, a wake and a switch to the waiter, which is what a semaphore's
// code decides; its figure moves with the machine's load, not between modes.
// procs=all runs it on every core, which is where it is used, but there the
// scheduler's share is large (a CPU profile is mostly runtime locks, the
// mutex's slow path and waking idle Ps) and so is the machine's: on the
// 2-core machine of the report, x/sync measured 580–620 ns/op in one process
// and 1270–1490 in another minutes later, and an experimental floodgate
// build (a field reorder, not kept) 1290 then 530 within one process. A round's ratio there depends on the mode it ran
// in.
// Target: impl=floodgate/procs=1: ns/op ≤ 0.95× impl=xsync;
// impl=floodgate/procs=all: ns/op ≤ 1× impl=xsync (the design's line);
// impl=floodgate: allocs/op = 0 (a waiting Acquire included).
func BenchmarkSemaphoreBlocked(b *testing.B) {
	impls := append(semImpls[:len(semImpls):len(semImpls)],
		semImpl{"floor-send", func(n int64) permits { return &handoffFloor{max: n} }},
		semImpl{"floor-close", func(n int64) permits { return &handoffFloor{max: n, close: true} }})
	for _, procs := range []string{"1", "all"} {
		for _, impl := range impls {
			b.Run("impl="+impl.name+"/procs="+procs, func(b *testing.B) {
				if procs == "1" {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				}
				blocked(b, impl.new(4))
			})
		}
	}
}

// blocked runs 64 goroutines on p's 4 permits for b.N acquisitions.
func blocked(b *testing.B, p permits) {
	ctx := context.Background()
	for range 4 {
		if err := p.acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	per := b.N/64 + 1
	var started, wg sync.WaitGroup
	started.Add(64)
	for range 64 {
		wg.Go(func() {
			started.Done()
			for range per {
				if err := p.acquire(ctx); err != nil {
					b.Error(err)
					return
				}
				p.release()
			}
		})
	}
	started.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for range 4 {
		p.release()
	}
	wg.Wait()
}

// TestHandoffFloorHoldsItsLimit: both wakes of handoffFloor keep at most max
// holders and lose no permit, so its rows are a floor for the same work, not
// a faster wrong semaphore.
func TestHandoffFloorHoldsItsLimit(t *testing.T) {
	for _, byClose := range []bool{false, true} {
		f := &handoffFloor{max: 4, close: byClose}
		var held, peak atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 200 {
					if err := f.acquire(context.Background()); err != nil {
						t.Error(err)
						return
					}
					n := held.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					runtime.Gosched()
					held.Add(-1)
					f.release()
				}
			})
		}
		wg.Wait()
		if p := peak.Load(); p > 4 || p < 2 {
			t.Errorf("close=%v: at most %d held at once, want 2..4", byClose, p)
		}
		f.mu.Lock()
		cur, head := f.cur, f.head
		f.mu.Unlock()
		if cur != 0 || head != nil {
			t.Errorf("close=%v: after every release cur = %d, queue empty = %v; want 0, true", byClose, cur, head == nil)
		}
	}
}
