package semaphore

// Adversarial stress tests of the paths that queue and release without mu
// (inbox, released): written in review to find lost wake-ups, over-admission,
// FIFO violations and TryAcquire overtaking queued waiters.

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitDone waits for wg, failing with every goroutine's stack and the
// semaphore's state if it takes over 30s (a lost wake-up: a waiter blocked
// forever while weight is free).
func waitDone(t *testing.T, s *Weighted, wg *sync.WaitGroup, what string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 64<<10)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: goroutines stuck for 30s; stats %+v state=%x inbox=%v released=%d\n%s",
			what, s.Stats(), s.state.Load(), s.inbox.Load() != nil, s.released.Load(), buf)
	}
}

// runAll runs f(0) … f(n-1), each in a goroutine of its own, and waits for
// them all with waitDone.
func runAll(t *testing.T, s *Weighted, what string, n int, f func(g int)) {
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
func waitQueued(t *testing.T, s *Weighted, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Waiters != n; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("waiter %d never queued: %+v", n, s.Stats())
		}
	}
}

// checkIdle fails t unless s has no weight in use and no waiters, and returns
// its Stats.
func checkIdle(t *testing.T, s *Weighted) Stats {
	t.Helper()
	st := s.Stats()
	if st.InUse != 0 || st.Waiters != 0 || st.WaitingWeight != 0 {
		t.Fatalf("final stats %+v, want nothing in use and no waiters", st)
	}
	return st
}

// Hammer: mixed Acquire/Release/TryAcquire/cancel with background Stats to keep mu busy.
func TestAdvHammer(t *testing.T) {
	const C = 10
	var inUse atomic.Int64
	var over atomic.Int64
	s := New(C, Config{})
	stop := spin(t, func() {
		runtime.Gosched() // a pure spinner starves timer-woken holders at GOMAXPROCS=1
		st := s.Stats()
		if st.InUse < 0 || st.Waiters < 0 || st.WaitingWeight < 0 {
			over.Add(1)
		}
	})
	runAll(t, s, "hammer", 16, func(g int) {
		r := rand.New(rand.NewPCG(uint64(g), 1))
		for i := 0; i < 300; i++ {
			n := int64(1 + r.IntN(C))
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
			if v := inUse.Add(n); v > C {
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
		t.Fatalf("capacity exceeded or bad stats %d times", over.Load())
	}
	checkIdle(t, s)
}

// Hammer with Resize racing pushes and releases.
func TestAdvResize(t *testing.T) {
	s := New(8, Config{})
	rr := rand.New(rand.NewPCG(99, 1))
	stop := spin(t, func() {
		s.Resize(int64(4 + rr.IntN(8)))
		time.Sleep(time.Duration(rr.IntN(20)) * time.Microsecond)
	})
	runAll(t, s, "resize", 12, func(g int) {
		r := rand.New(rand.NewPCG(uint64(g), 2))
		for i := 0; i < 300; i++ {
			n := int64(1 + r.IntN(6))
			if r.IntN(4) == 0 {
				if !s.TryAcquire(n) {
					continue
				}
			} else if err := s.Acquire(context.Background(), n); err != nil {
				if !errors.Is(err, ErrTooLarge) {
					t.Errorf("acquire: %v", err)
					return
				}
				continue
			}
			s.Release(n)
		}
	})
	stop()
	s.Resize(20)
	checkIdle(t, s)
}

// Hooks calling back into the semaphore.
func TestAdvHooksReenter(t *testing.T) {
	var s *Weighted
	s = New(4, Config{
		OnAcquire: func(n int64, _ time.Duration) {
			_ = s.Stats()
			if s.TryAcquire(1) {
				s.Release(1)
			}
		},
		OnRelease: func(n int64) { _ = s.Stats() },
	})
	runAll(t, s, "hooks", 8, func(g int) {
		for i := 0; i < 300; i++ {
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

// FIFO among waiters queued one after another, with mu kept busy so they are pushed.
func TestAdvFIFOPushed(t *testing.T) {
	s := New(3, Config{})
	s.Acquire(context.Background(), 3)
	var stops [2]func()
	for i := range stops {
		stops[i] = spin(t, func() {
			runtime.Gosched()
			if s.TryAcquire(1) { // must fail: capacity full / waiters queued
				panic("TryAcquire succeeded with capacity held / waiters queued")
			}
		})
	}
	const N = 8
	order := make(chan int, N)
	var wg sync.WaitGroup
	for i := 0; i < N; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n := int64(3) // one grant at a time, so return order is grant order
			if err := s.Acquire(context.Background(), n); err != nil {
				t.Error(err)
				return
			}
			order <- i
			s.Release(n)
		}(i)
		waitQueued(t, s, i+1)
	}
	for _, stop := range stops {
		stop()
	}
	s.Release(3)
	waitDone(t, s, &wg, "fifo")
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("order: got %d want %d", i, want)
		}
		want++
	}
}

// Cancellation while in the inbox / queue, with releases racing.
func TestAdvCancelInbox(t *testing.T) {
	s := New(2, Config{})
	runAll(t, s, "cancel", 16, func(g int) {
		for i := 0; i < 200; i++ {
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

// Over-release panics in the caller even with the slow bit set.
func TestAdvOverReleasePanics(t *testing.T) {
	s := New(2, Config{})
	s.Acquire(context.Background(), 2)
	done := make(chan error)
	go func() { done <- s.Acquire(context.Background(), 1) }()
	waitQueued(t, s, 1)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		s.Release(3)
	}()
	s.Release(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Release(1)
	checkIdle(t, s)
}

// Full-capacity ping-pong: every acquire needs the whole capacity, so each grant
// depends on the previous holder's release reaching a waiter. Lost wake-ups hang.
func TestAdvPingPong(t *testing.T) {
	s := New(4, Config{})
	var inUse atomic.Int64
	var bad atomic.Int64
	runAll(t, s, "pingpong", 8, func(g int) {
		for i := 0; i < 500; i++ {
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
		t.Fatalf("over capacity %d times", bad.Load())
	}
	checkIdle(t, s)
}

// TryAcquire must fail while a waiter (possibly pushed) is queued, even if weight is free
// once a release happens concurrently.
func TestAdvTryAcquireVsQueued(t *testing.T) {
	for iter := 0; iter < 50; iter++ {
		s := New(2, Config{})
		s.Acquire(context.Background(), 2)
		stop := spin(t, func() { s.Stats() }) // keep mu busy so the next Acquire is likely pushed
		got := make(chan error, 1)
		go func() { got <- s.Acquire(context.Background(), 2) }()
		waitQueued(t, s, 1)
		stop()
		s.Release(1) // 1 free, head needs 2
		if s.TryAcquire(1) {
			t.Fatalf("TryAcquire(1) overtook a queued waiter: %+v", s.Stats())
		}
		s.Release(1)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		s.Release(2)
		checkIdle(t, s)
	}
}

// Deterministic: mu held by "someone"; an Acquire is pushed, a Release lands in
// released, a second pushed Acquire is cancelled in the inbox; the holder's unlock
// must grant the first and the cancelled one must return ctx.Err.
func TestAdvInboxDeterministic(t *testing.T) {
	s := New(2, Config{})
	s.Acquire(context.Background(), 2)
	s.mu.Lock()
	s.locked()
	a := make(chan error, 1)
	go func() { a <- s.Acquire(context.Background(), 1) }()
	for s.inbox.Load() == nil {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := make(chan error, 1)
	go func() { b <- s.Acquire(ctx, 2) }()
	for s.inbox.Load() == nil || s.inbox.Load().link == nil {
		runtime.Gosched()
	}
	s.Release(1) // TryLock fails: goes to released
	if s.released.Load() != 1 {
		t.Fatalf("released = %d", s.released.Load())
	}
	cancel()
	for s.lockers.Load() == 0 { // until b waits for mu in abandon's lock()
		runtime.Gosched()
	}
	s.unlock()
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v", err)
	}
	s.Release(1)
	s.Release(1)
	if st := checkIdle(t, s); st.Canceled != 1 {
		t.Fatalf("%+v, want 1 canceled", st)
	}
}

func TestAdvFIFOWithResize(t *testing.T) {
	s := New(2, Config{})
	s.Acquire(context.Background(), 2)
	resizes := 0
	stop := spin(t, func() {
		s.Resize(int64(2 + resizes%2))
		resizes++
		runtime.Gosched()
	})
	const N = 10
	order := make(chan int, N)
	var wg sync.WaitGroup
	for i := 0; i < N; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := s.Acquire(context.Background(), 2); err != nil {
				t.Error(err)
				return
			}
			order <- i
			s.Release(2)
		}(i)
		waitQueued(t, s, i+1)
	}
	s.Release(2)
	waitDone(t, s, &wg, "fifo-resize")
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
