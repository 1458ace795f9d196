package semaphore_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/floodgate-go/floodgate/semaphore"
	xsem "golang.org/x/sync/semaphore"
)

// sem is what the benchmarks need; each implementation is measured in the same
// run so results are ratios.
type sem interface {
	Acquire(ctx context.Context, n int64) error
	TryAcquire(n int64) bool
	Release(n int64)
}

// chanSem is the buffered-channel semaphore, the baseline x/sync also uses.
type chanSem chan struct{}

func (c chanSem) Acquire(ctx context.Context, n int64) error {
	for range n {
		select {
		case c <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c chanSem) TryAcquire(n int64) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

func (c chanSem) Release(n int64) {
	for range n {
		<-c
	}
}

var impls = []struct {
	name string
	new  func(limit int64) sem
}{
	{"floodgate", func(c int64) sem { return semaphore.New(c, semaphore.Config{}) }},
	{"xsync", func(c int64) sem { return xsem.NewWeighted(c) }},
	{"chan", func(c int64) sem { return make(chanSem, c) }},
}

func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			s := impl.new(16)
			b.ReportAllocs()
			for b.Loop() {
				s.Acquire(ctx, 1)
				s.Release(1)
			}
		})
	}
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			s := impl.new(16)
			b.ReportAllocs()
			for b.Loop() {
				if s.TryAcquire(1) {
					s.Release(1)
				}
			}
		})
	}
}

func BenchmarkTryAcquireFull(b *testing.B) {
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			s := impl.new(1)
			s.TryAcquire(1)
			b.ReportAllocs()
			for b.Loop() {
				if s.TryAcquire(1) {
					b.Fatal("TryAcquire on a full semaphore succeeded")
				}
			}
		})
	}
}

// BenchmarkAcquireParallel: GOMAXPROCS goroutines share a semaphore with room
// for all of them (limit=1024) or for one (limit=1).
func BenchmarkAcquireParallel(b *testing.B) {
	for _, limit := range []int64{1, 1024} {
		for _, impl := range impls {
			b.Run("impl="+impl.name+"/limit="+itoa(limit), func(b *testing.B) {
				s := impl.new(limit)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						s.Acquire(ctx, 1)
						s.Release(1)
					}
				})
			})
		}
	}
}

// BenchmarkBlocked: 64 goroutines on 4 permits, so every Acquire blocks; with
// gosched=true each holder yields while holding. ns/op is per acquisition.
//
// The permits are held until all 64 goroutines have started, so the run begins
// with a queue, and it keeps one: a goroutine that releases joins the back of
// the queue on its next Acquire, behind those still waiting. Without this the
// benchmark is bimodal: when b.N is small enough for each goroutine to finish its
// share within one scheduler time slice, the goroutines run one after another,
// nobody ever waits, and it measures the uncontended path instead.
func BenchmarkBlocked(b *testing.B) {
	const goroutines, permits = 64, 4
	for _, gosched := range []bool{false, true} {
		for _, impl := range impls {
			b.Run("impl="+impl.name+"/gosched="+map[bool]string{false: "false", true: "true"}[gosched], func(b *testing.B) {
				s := impl.new(permits)
				ctx := context.Background()
				if err := s.Acquire(ctx, permits); err != nil {
					b.Fatal(err)
				}
				per := b.N/goroutines + 1
				var started, wg sync.WaitGroup
				started.Add(goroutines)
				for range goroutines {
					wg.Go(func() {
						started.Done()
						for range per {
							s.Acquire(ctx, 1)
							if gosched {
								runtime.Gosched()
							}
							s.Release(1)
						}
					})
				}
				started.Wait()
				b.ReportAllocs()
				b.ResetTimer()
				s.Release(permits)
				wg.Wait()
			})
		}
	}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
