package bench

import (
	"context"
	"sync"
	"testing"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	xsem "golang.org/x/sync/semaphore"
)

// The local semaphore beside x/sync/semaphore, failsafe-go's bulkhead (which
// is unweighted, so every call takes one permit) and a buffered channel, the
// floor for a FIFO hand-off without weights. The in-package benchmarks in
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
// Target: impl=floodgate: ns/op ≤ 0.95× impl=xsync; impl=floodgate: allocs/op = 0
// (a waiting Acquire included).
func BenchmarkSemaphoreBlocked(b *testing.B) {
	for _, impl := range semImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			p := impl.new(4)
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
		})
	}
}
