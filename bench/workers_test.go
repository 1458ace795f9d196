package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/shaper"
)

// BenchmarkWorkers: cost per job of running jobs (an atomic add each) at most
// 8 at once, end to end (submitted, started, finished; the clock stops when
// the last job returned):
//   - impl=bare: a goroutine per job under a channel semaphore, the submitter
//     blocking while 8 run;
//   - impl=workers/pace=none: bulkhead.Workers with its limit of 8, Submit
//     for every job, then Shutdown (drain);
//   - impl=workers/pace=local: the same with a local shaper.Queue whose rate
//     (1e9/s, burst 2^20) no run reaches, so the pace never waits but every
//     start asks it;
//   - impl=workers-do: b.RunParallel callers each running jobs through
//     Workers.Do (queued, run on a Workers goroutine, waited for).
func BenchmarkWorkers(b *testing.B) {
	const limit = 8
	var ran atomic.Int64
	job := func(context.Context) error { ran.Add(1); return nil }
	check := func(b *testing.B, want int64) {
		if got := ran.Load(); got != want {
			b.Fatalf("%d jobs ran, want %d", got, want)
		}
	}

	b.Run("impl=bare", func(b *testing.B) {
		b.ReportAllocs()
		ran.Store(0)
		sem := make(chan struct{}, limit)
		var wg sync.WaitGroup
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				job(ctx)
			})
		}
		wg.Wait()
		b.StopTimer()
		check(b, int64(b.N))
	})

	for _, pc := range []struct {
		name string
		pace func() bulkhead.Pacer
	}{
		{"none", func() bulkhead.Pacer { return nil }},
		{"local", func() bulkhead.Pacer {
			return shaper.NewQueue(shaper.PerSecond(1e9), shaper.QueueConfig{Burst: 1 << 20})
		}},
	} {
		b.Run("impl=workers/pace="+pc.name, func(b *testing.B) {
			b.ReportAllocs()
			ran.Store(0)
			cfg := bulkhead.WorkersConfig{}
			if p := pc.pace(); p != nil {
				cfg.Pace = p
			}
			w := bulkhead.NewWorkers(limit, cfg)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if err := w.Submit(ctx, bulkhead.DefaultClass, bulkhead.Job{Run: job}); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			check(b, int64(b.N))
		})
	}

	b.Run("impl=workers-do", func(b *testing.B) {
		b.ReportAllocs()
		ran.Store(0)
		w := bulkhead.NewWorkers(limit, bulkhead.WorkersConfig{})
		ctx := context.Background()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := w.Do(ctx, bulkhead.DefaultClass, job); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
		if err := w.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		check(b, n.Load())
	})
}
