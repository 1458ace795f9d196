package semaphore_test

// Stress tests in real time: many goroutines mixing every operation, to find
// lost wake-ups (a waiter blocked forever while weight is free), grants above
// the limit, FIFO violations and state left behind. `make stress` runs them
// many times with -race.

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/semaphore"
)

// waitDone waits for wg, failing with every goroutine's stack and the
// semaphore's Stats if it takes over 30s (a lost wake-up).
func waitDone(t *testing.T, s *semaphore.Weighted, wg *sync.WaitGroup, what string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 64<<10)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: goroutines stuck for 30s; stats %+v\n%s", what, s.Stats(), buf)
	}
}

// runAll runs f(0) … f(n-1), each in a goroutine of its own, and waits for
// them all with waitDone.
func runAll(t *testing.T, s *semaphore.Weighted, what string, n int, f func(g int)) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() { f(g) })
	}
	waitDone(t, s, &wg, what)
}

// spin calls f over and over in a goroutine of its own until stop is called;
// stop returns once f has returned for the last time. It is also called when
// the test ends, so that a failing test leaves no spinner behind.
func spin(t *testing.T, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			f()
		}
	})
	stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// waitQueued waits until s has n waiters, failing t if that takes over 5s.
func waitQueued(t *testing.T, s *semaphore.Weighted, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Waiting != n; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("waiter %d never queued: %+v", n, s.Stats())
		}
	}
}

// checkIdle fails t unless s has no weight in use and no waiters, and returns
// its Stats.
func checkIdle(t *testing.T, s *semaphore.Weighted) semaphore.Stats {
	t.Helper()
	st := s.Stats()
	if st.InUse != 0 || st.Waiting != 0 || st.WaitingWeight != 0 {
		t.Fatalf("final stats %+v, want nothing in use and no waiters", st)
	}
	return st
}

// Mixed Acquire, TryAcquire, Release and cancellation, with Stats called in
// the background: the weight held never exceeds the limit.
func TestStressMixedOps(t *testing.T) {
	const limit = 10
	var inUse, over atomic.Int64
	s := semaphore.New(limit, semaphore.Config{})
	stop := spin(t, func() {
		runtime.Gosched() // a pure spinner starves timer-woken holders at GOMAXPROCS=1
		st := s.Stats()
		if st.InUse < 0 || st.Waiting < 0 || st.WaitingWeight < 0 {
			over.Add(1)
		}
	})
	runAll(t, s, "mixed", 16, func(g int) {
		r := rand.New(rand.NewPCG(uint64(g), 1))
		for range 300 {
			n := int64(1 + r.IntN(limit))
			switch r.IntN(4) {
			case 0:
				if !s.TryAcquire(n) {
					continue
				}
			case 1:
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(2) == 0 {
					d := time.Duration(r.IntN(50)) * time.Microsecond
					go func() { time.Sleep(d); cancel() }()
				}
				err := s.Acquire(ctx, n)
				cancel()
				if err != nil {
					continue
				}
			default:
				if err := s.Acquire(context.Background(), n); err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
			}
			if v := inUse.Add(n); v > limit {
				over.Add(1)
			}
			if r.IntN(3) == 0 {
				time.Sleep(time.Duration(r.IntN(5)) * time.Microsecond)
			}
			inUse.Add(-n)
			s.Release(n)
		}
	})
	stop()
	if over.Load() != 0 {
		t.Fatalf("limit exceeded or bad stats %d times", over.Load())
	}
	checkIdle(t, s)
}

// SetLimit racing Acquire and Release: callers larger than the limit of the
// moment fail with ErrTooLarge, every other one is granted, and nothing is
// left held or queued.
func TestStressSetLimit(t *testing.T) {
	s := semaphore.New(8, semaphore.Config{})
	rr := rand.New(rand.NewPCG(99, 1))
	stop := spin(t, func() {
		s.SetLimit(int64(4 + rr.IntN(8)))
		time.Sleep(time.Duration(rr.IntN(20)) * time.Microsecond)
	})
	runAll(t, s, "setlimit", 12, func(g int) {
		r := rand.New(rand.NewPCG(uint64(g), 2))
		for range 300 {
			n := int64(1 + r.IntN(6))
			if r.IntN(4) == 0 {
				if !s.TryAcquire(n) {
					continue
				}
			} else if err := s.Acquire(context.Background(), n); err != nil {
				if !errors.Is(err, semaphore.ErrTooLarge) {
					t.Errorf("acquire: %v", err)
					return
				}
				continue
			}
			s.Release(n)
		}
	})
	stop()
	s.SetLimit(20)
	checkIdle(t, s)
}

// Hooks calling back into the semaphore under load.
func TestStressHooksReenter(t *testing.T) {
	var s *semaphore.Weighted
	s = semaphore.New(4, semaphore.Config{
		Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			switch e.Kind {
			case floodgate.KindAdmit:
				_ = s.Stats()
				if s.TryAcquire(1) {
					s.Release(1)
				}
			case floodgate.KindRelease:
				_ = s.Stats()
			}
		}),
	})
	runAll(t, s, "hooks", 8, func(g int) {
		for i := range 300 {
			n := int64(1 + (i+g)%3)
			if err := s.Acquire(context.Background(), n); err != nil {
				t.Error(err)
				return
			}
			s.Release(n)
		}
	})
	checkIdle(t, s)
}

// Cancellation before and during Acquire, racing releases.
func TestStressCancelRacesRelease(t *testing.T) {
	s := semaphore.New(2, semaphore.Config{})
	runAll(t, s, "cancel", 16, func(g int) {
		for i := range 200 {
			ctx, cancel := context.WithCancel(context.Background())
			if (i+g)%2 == 0 {
				cancel()
			} else {
				go cancel()
			}
			n := int64(1 + (i+g)%2)
			if s.Acquire(ctx, n) == nil {
				s.Release(n)
			}
			if s.Acquire(context.Background(), 1) == nil {
				s.Release(1)
			}
		}
	})
	checkIdle(t, s)
}

// Full-limit ping-pong: most calls need the whole limit, so each grant
// depends on the previous holder's release reaching a waiter. Lost wake-ups
// hang.
func TestStressPingPong(t *testing.T) {
	s := semaphore.New(4, semaphore.Config{})
	var inUse, bad atomic.Int64
	runAll(t, s, "pingpong", 8, func(g int) {
		for i := range 500 {
			n := int64(4)
			if (i+g)%3 == 0 {
				n = int64(1 + (i+g)%4)
			}
			if (i+g)%5 == 0 {
				if !s.TryAcquire(n) {
					continue
				}
			} else if err := s.Acquire(context.Background(), n); err != nil {
				t.Error(err)
				return
			}
			if inUse.Add(n) > 4 {
				bad.Add(1)
			}
			inUse.Add(-n)
			s.Release(n)
		}
	})
	if bad.Load() != 0 {
		t.Fatalf("over the limit %d times", bad.Load())
	}
	checkIdle(t, s)
}

// SetLimit called over and over does not reorder the queue.
func TestStressFIFOWithSetLimit(t *testing.T) {
	s := semaphore.New(2, semaphore.Config{})
	s.Acquire(context.Background(), 2)
	limits := 0
	stop := spin(t, func() {
		s.SetLimit(int64(2 + limits%2))
		limits++
		runtime.Gosched()
	})
	const N = 10
	order := make(chan int, N)
	var wg sync.WaitGroup
	for i := range N {
		wg.Go(func() {
			if err := s.Acquire(context.Background(), 2); err != nil {
				t.Error(err)
				return
			}
			order <- i
			s.Release(2)
		})
		waitQueued(t, s, i+1)
	}
	s.Release(2)
	waitDone(t, s, &wg, "fifo-setlimit")
	stop()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("order: got %d want %d", i, want)
		}
		want++
	}
}

// Many goroutines with random weights, timeouts and SetLimit calls: the weight
// held by callers never exceeds the limit they were granted under, and at the
// end nothing is held or queued.
func TestStressRandomWeights(t *testing.T) {
	const limit = 16
	s := semaphore.New(limit, semaphore.Config{MaxWaiters: 48})
	var held atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // between 12 and limit throughout: held stays ≤ limit
		for i := 0; ; i++ {
			select {
			case <-stop:
				s.SetLimit(limit)
				return
			default:
			}
			s.SetLimit(limit - int64(i%5))
			if st := s.Stats(); st.Waiting < 0 || st.WaitingWeight < int64(st.Waiting) {
				t.Errorf("inconsistent Stats: %+v", st)
			}
			time.Sleep(20 * time.Microsecond)
		}
	})
	var workers sync.WaitGroup
	for g := range 64 {
		workers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				n := 1 + r.Int64N(limit)
				switch r.IntN(3) {
				case 0:
					if !s.TryAcquire(n) {
						continue
					}
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
					err := s.Acquire(ctx, n)
					cancel()
					if err != nil {
						continue
					}
				default:
					if err := s.Acquire(context.Background(), n); err != nil {
						continue
					}
				}
				if h := held.Add(n); h > limit {
					t.Errorf("weight held = %d > limit %d", h, limit)
				}
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond) // hold the weight for a while
				}
				held.Add(-n)
				s.Release(n)
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if st := checkIdle(t, s); st.Acquired == 0 {
		t.Fatal("no grants in the stress test")
	}
}
