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

// Hammer: mixed Acquire/Release/TryAcquire/cancel with background Stats to keep mu busy.
func TestAdvHammer(t *testing.T) {
	const C = 10
	var inUse atomic.Int64
	var over atomic.Int64
	s := New(C, Config{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.Gosched() // a pure spinner starves timer-woken holders at GOMAXPROCS=1
			st := s.Stats()
			if st.InUse < 0 || st.Waiters < 0 || st.WaitingWeight < 0 {
				over.Add(1)
			}
		}
	}()
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
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
		}(g)
	}
	waitDone(t, s, &wg, "hammer")
	close(stop)
	bg.Wait()
	if over.Load() != 0 {
		t.Fatalf("capacity exceeded or bad stats %d times", over.Load())
	}
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 || st.WaitingWeight != 0 {
		t.Fatalf("final stats %+v", st)
	}
}

// Hammer with Resize racing pushes and releases.
func TestAdvResize(t *testing.T) {
	s := New(8, Config{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		r := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.Resize(int64(4 + r.IntN(8)))
			time.Sleep(time.Duration(r.IntN(20)) * time.Microsecond)
		}
	}()
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
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
		}(g)
	}
	waitDone(t, s, &wg, "resize")
	close(stop)
	bg.Wait()
	s.Resize(20)
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
		t.Fatalf("final stats %+v", st)
	}
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
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				n := int64(1 + (i+g)%3)
				if err := s.Acquire(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				s.Release(n)
			}
		}(g)
	}
	waitDone(t, s, &wg, "hooks")
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
		t.Fatalf("final stats %+v", st)
	}
}

// FIFO among waiters queued one after another, with mu kept busy so they are pushed.
func TestAdvFIFOPushed(t *testing.T) {
	s := New(3, Config{})
	s.Acquire(context.Background(), 3)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	for i := 0; i < 2; i++ {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.Gosched()
				if s.TryAcquire(1) { // must fail: capacity full / waiters queued
					panic("TryAcquire succeeded with capacity held / waiters queued")
				}
			}
		}()
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
		deadline := time.Now().Add(5 * time.Second)
		for s.Stats().Waiters != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued: %+v", i, s.Stats())
			}
		}
	}
	close(stop)
	bg.Wait()
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
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
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
		}(g)
	}
	waitDone(t, s, &wg, "cancel")
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
		t.Fatalf("final stats %+v", st)
	}
}

// Over-release panics in the caller even with the slow bit set.
func TestAdvOverReleasePanics(t *testing.T) {
	s := New(2, Config{})
	s.Acquire(context.Background(), 2)
	done := make(chan error)
	go func() { done <- s.Acquire(context.Background(), 1) }()
	for s.Stats().Waiters != 1 {
	}
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
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
		t.Fatalf("%+v", st)
	}
}

// Full-capacity ping-pong: every acquire needs the whole capacity, so each grant
// depends on the previous holder's release reaching a waiter. Lost wake-ups hang.
func TestAdvPingPong(t *testing.T) {
	s := New(4, Config{})
	var wg sync.WaitGroup
	var inUse atomic.Int64
	var bad atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
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
		}(g)
	}
	waitDone(t, s, &wg, "pingpong")
	if bad.Load() != 0 {
		t.Fatalf("over capacity %d times", bad.Load())
	}
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
		t.Fatalf("final stats %+v", st)
	}
}

// TryAcquire must fail while a waiter (possibly pushed) is queued, even if weight is free
// once a release happens concurrently.
func TestAdvTryAcquireVsQueued(t *testing.T) {
	for iter := 0; iter < 50; iter++ {
		s := New(2, Config{})
		s.Acquire(context.Background(), 2)
		stop := make(chan struct{})
		var bg sync.WaitGroup
		bg.Add(1)
		go func() { // keep mu busy so the next Acquire is likely pushed
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Stats()
			}
		}()
		got := make(chan error, 1)
		go func() { got <- s.Acquire(context.Background(), 2) }()
		for s.Stats().Waiters != 1 {
			runtime.Gosched()
		}
		close(stop)
		bg.Wait()
		s.Release(1) // 1 free, head needs 2
		if s.TryAcquire(1) {
			t.Fatalf("TryAcquire(1) overtook a queued waiter: %+v", s.Stats())
		}
		s.Release(1)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		s.Release(2)
		if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 {
			t.Fatalf("%+v", st)
		}
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
	time.Sleep(10 * time.Millisecond) // b now blocked in abandon's lock()
	s.unlock()
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v", err)
	}
	s.Release(1)
	s.Release(1)
	if st := s.Stats(); st.InUse != 0 || st.Waiters != 0 || st.Canceled != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestAdvFIFOWithResize(t *testing.T) {
	s := New(2, Config{})
	s.Acquire(context.Background(), 2)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.Resize(int64(2 + i%2))
			runtime.Gosched()
		}
	}()
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
		for s.Stats().Waiters != i+1 {
			runtime.Gosched()
		}
	}
	s.Release(2)
	waitDone(t, s, &wg, "fifo-resize")
	close(stop)
	bg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("order: got %d want %d", i, want)
		}
		want++
	}
}
