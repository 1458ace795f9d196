package semaphore_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/internal/reject"
	"github.com/floodgate-go/floodgate/semaphore"
)

// result collects the outcome of an Acquire running in its own goroutine.
type result struct {
	done atomic.Bool
	err  error
}

func acquireAsync(ctx context.Context, s *semaphore.Weighted, n int64) *result {
	r := new(result)
	go func() {
		r.err = s.Acquire(ctx, n)
		r.done.Store(true)
	}()
	return r
}

func TestAcquireUncontended(t *testing.T) {
	s := semaphore.New(10, semaphore.Config{})
	ctx := t.Context()
	for _, n := range []int64{3, 7} {
		if err := s.Acquire(ctx, n); err != nil {
			t.Fatalf("Acquire(ctx, %d) = %v, want nil", n, err)
		}
	}
	if s.TryAcquire(1) {
		t.Fatal("TryAcquire(1) on a full semaphore = true")
	}
	st := s.Stats()
	if st.InUse != 10 || st.Acquired != 2 || st.Limit != 10 {
		t.Fatalf("Stats = %+v, want InUse 10, Acquired 2, Limit 10", st)
	}
	s.Release(10)
	if !s.TryAcquire(10) {
		t.Fatal("TryAcquire(10) after releasing everything = false")
	}
	s.Release(10)
}

// golang/go#37852: a cancelled waiter at the head of the queue must wake the
// waiters behind it that now fit.
func TestAcquireCancelAtFrontWakesNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		if err := s.Acquire(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		head := acquireAsync(ctx, s, 2) // does not fit while 1 is held
		synctest.Wait()
		next := acquireAsync(t.Context(), s, 1) // fits, but queued behind head
		synctest.Wait()
		if next.done.Load() {
			t.Fatal("waiter behind the head was granted before the head: not FIFO")
		}
		cancel()
		synctest.Wait()
		if !head.done.Load() || !errors.Is(head.err, context.Canceled) {
			t.Fatalf("cancelled head: done=%v err=%v, want context.Canceled", head.done.Load(), head.err)
		}
		if !next.done.Load() || next.err != nil {
			t.Fatalf("waiter behind a cancelled head: done=%v err=%v, want granted", next.done.Load(), next.err)
		}
		if st := s.Stats(); st.InUse != 2 || st.Waiting != 0 || st.Canceled != 1 {
			t.Fatalf("Stats = %+v, want InUse 2, Waiting 0, Canceled 1", st)
		}
	})
}

// golang/go#63615: a done context fails even when the weight is free, and leaves
// the semaphore unchanged.
func TestAcquireDoneCtxFailsEvenIfFree(t *testing.T) {
	s := semaphore.New(5, semaphore.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 100 {
		if err := s.Acquire(ctx, 1); err != context.Canceled {
			t.Fatalf("Acquire(done ctx, 1) = %v, want context.Canceled", err)
		}
	}
	if st := s.Stats(); st.InUse != 0 || st.Acquired != 0 {
		t.Fatalf("Stats after done-ctx acquires = %+v, want nothing held or granted", st)
	}
}

// A grant that races the waiter's cancellation is given back: the caller gets
// ctx.Err() and holds nothing.
func TestCancelGivesBackRacedGrant(t *testing.T) {
	for i := range 200 {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, semaphore.Config{})
			if err := s.Acquire(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			w := acquireAsync(ctx, s, 1)
			synctest.Wait()
			// Both events reach the blocked waiter in the same instant; which one
			// its select sees first varies between iterations.
			if i%2 == 0 {
				cancel()
				s.Release(1)
			} else {
				s.Release(1)
				cancel()
			}
			synctest.Wait()
			st := s.Stats()
			switch {
			case w.err == nil && st.InUse == 1:
				// granted before it saw the cancellation: it holds the weight
			case errors.Is(w.err, context.Canceled) && st.InUse == 0:
			default:
				t.Fatalf("iteration %d: err=%v InUse=%d: a cancelled acquire kept its grant or a grant was lost", i, w.err, st.InUse)
			}
			if st.Waiting != 0 {
				t.Fatalf("Waiting = %d, want 0", st.Waiting)
			}
		})
	}
}

// The same two orders on one P, so that the waiter runs only after both
// events and the outcome is fixed: the grant is given back either way. With
// cancel first, the waiter wakes on ctx and finds itself granted; with Release
// first, it wakes on the grant and finds ctx done (the check after the grant,
// as x/sync's).
func TestCancelGivesBackRacedGrantOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, cancelFirst := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, semaphore.Config{})
			if err := s.Acquire(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			w := acquireAsync(ctx, s, 1)
			synctest.Wait()
			if cancelFirst {
				cancel()
				s.Release(1)
			} else {
				s.Release(1)
				cancel()
			}
			synctest.Wait()
			if st := s.Stats(); !errors.Is(w.err, context.Canceled) || st.InUse != 0 || st.Waiting != 0 {
				t.Fatalf("cancel first %v: err=%v, Stats %+v; want context.Canceled, nothing held or queued", cancelFirst, w.err, st)
			}
		})
	}
}

func TestFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(3, semaphore.Config{})
		if err := s.Acquire(t.Context(), 3); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		weights := []int64{1, 3, 2, 1, 1}
		for i, n := range weights {
			go func() {
				if err := s.Acquire(t.Context(), n); err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}()
			synctest.Wait() // enqueue in index order
		}
		granted := func() map[int]bool {
			mu.Lock()
			defer mu.Unlock()
			m := map[int]bool{}
			for _, i := range order {
				m[i] = true
			}
			return m
		}
		steps := []struct {
			release int64
			want    []int
		}{
			{3, []int{0}},          // #1 (3) does not fit yet: the heavy head blocks #2..#4
			{1, []int{0, 1}},       // 3 free: #1
			{3, []int{0, 1, 2, 3}}, // #2 (2) and #3 (1)
			{3, []int{0, 1, 2, 3, 4}},
		}
		for _, st := range steps {
			s.Release(st.release)
			synctest.Wait()
			g := granted()
			if len(g) != len(st.want) {
				t.Fatalf("after Release(%d): granted %v, want %v", st.release, order, st.want)
			}
			for _, i := range st.want {
				if !g[i] {
					t.Fatalf("after Release(%d): granted %v, want %v", st.release, order, st.want)
				}
			}
		}
	})
}

func TestTryAcquireDoesNotOvertakeWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		s.Acquire(t.Context(), 1)
		w := acquireAsync(t.Context(), s, 2)
		synctest.Wait()
		if s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded while a caller is queued")
		}
		s.Release(1)
		synctest.Wait()
		if w.err != nil || !w.done.Load() {
			t.Fatalf("queued Acquire(2) = %v, done %v", w.err, w.done.Load())
		}
	})
}

func TestErrors(t *testing.T) {
	type tc struct {
		name       string
		limit      int64
		cfg        semaphore.Config
		held       int64 // taken before the call
		queued     int   // callers already waiting with weight 1
		n          int64
		want       error
		wantRetry0 bool
	}
	cases := []tc{
		{name: "too large", limit: 4, n: 5, want: semaphore.ErrTooLarge, wantRetry0: true},
		{name: "zero value limit", limit: 0, n: 1, want: semaphore.ErrTooLarge, wantRetry0: true},
		{name: "queue full", limit: 1, held: 1, queued: 2, cfg: semaphore.Config{MaxWaiters: 2}, n: 1, want: semaphore.ErrQueueFull},
		{name: "never queue", limit: 1, held: 1, cfg: semaphore.Config{MaxWaiters: -1}, n: 1, want: semaphore.ErrQueueFull},
		{name: "max wait", limit: 1, held: 1, cfg: semaphore.Config{MaxWait: time.Second}, n: 1, want: semaphore.ErrMaxWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rejects atomic.Int32
				cfg := c.cfg
				cfg.Observer = floodgate.ObserverFunc(func(e floodgate.Event) {
					if e.Kind == floodgate.KindReject && errors.Is(e.Err, c.want) && e.Reason == reject.ReasonOf(c.want) {
						rejects.Add(1)
					}
				})
				s := semaphore.New(c.limit, cfg)
				if c.held > 0 {
					s.Acquire(t.Context(), c.held)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				for range c.queued {
					acquireAsync(ctx, s, 1)
					synctest.Wait()
				}
				before := s.Stats()
				start := time.Now()
				err := s.Acquire(t.Context(), c.n)
				if !errors.Is(err, c.want) {
					t.Fatalf("Acquire(ctx, %d) = %v, want %v", c.n, err, c.want)
				}
				re, ok := errors.AsType[*semaphore.RejectError](err)
				if !ok {
					t.Fatalf("error %T is not a *RejectError", err)
				}
				if re.RetryAfter() < 0 || (c.wantRetry0 && re.RetryAfter() != 0) {
					t.Fatalf("RetryAfter = %v", re.RetryAfter())
				}
				if c.want != semaphore.ErrMaxWait && time.Since(start) != 0 {
					t.Fatalf("rejection took %v, want at once", time.Since(start))
				}
				if c.want == semaphore.ErrMaxWait && time.Since(start) != c.cfg.MaxWait {
					t.Fatalf("MaxWait rejection after %v, want %v", time.Since(start), c.cfg.MaxWait)
				}
				after := s.Stats()
				if after.InUse != before.InUse || after.Waiting != before.Waiting {
					t.Fatalf("state changed by a rejection: before %+v after %+v", before, after)
				}
				if rejects.Load() != 1 {
					t.Fatalf("KindReject with %v reported %d times, want 1", c.want, rejects.Load())
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}

func TestPanics(t *testing.T) {
	s := semaphore.New(1, semaphore.Config{})
	for name, f := range map[string]func(){
		"New negative":         func() { semaphore.New(-1, semaphore.Config{}) },
		"NewWeighted negative": func() { semaphore.NewWeighted(-1) },
		"Acquire negative":     func() { s.Acquire(context.Background(), -1) },
		"TryAcquire negative":  func() { s.TryAcquire(-1) },
		"Release negative":     func() { s.Release(-1) },
		"Release unheld":       func() { s.Release(1) },
		"SetLimit negative":    func() { s.SetLimit(-1) },
		"Do negative weight":   func() { s.Do(context.Background(), -1, func(context.Context) error { return nil }) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if len(msg) < 11 || msg[:11] != "semaphore: " {
					t.Fatalf("recover() = %v, want a panic prefixed with \"semaphore: \"", r)
				}
			}()
			f()
		})
	}
	if st := s.Stats(); st.InUse != 0 || st.Limit != 1 {
		t.Fatalf("state changed by panicking calls: %+v", st)
	}
}

// An over-release with a caller queued panics, leaves the semaphore unchanged
// and unlocked, and the next proper Release still grants the waiter.
func TestOverReleaseWithWaitersPanicsAndUnlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		s.Acquire(t.Context(), 2)
		w := acquireAsync(t.Context(), s, 1)
		synctest.Wait()
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("Release(3) with 2 held did not panic")
				}
			}()
			s.Release(3)
		}()
		if st := s.Stats(); st.InUse != 2 || st.Waiting != 1 { // Stats would deadlock if the panic left the lock held
			t.Fatalf("Stats = %+v after a refused over-release, want InUse 2, Waiting 1", st)
		}
		s.Release(2)
		synctest.Wait()
		if !w.done.Load() || w.err != nil {
			t.Fatalf("waiter after the proper Release: done=%v err=%v, want granted", w.done.Load(), w.err)
		}
		s.Release(1)
	})
}

func TestMaxWaitGrantWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{MaxWait: time.Second})
		s.Acquire(t.Context(), 1)
		w := acquireAsync(t.Context(), s, 1)
		time.Sleep(999 * time.Millisecond)
		s.Release(1)
		synctest.Wait()
		if w.err != nil {
			t.Fatalf("Acquire granted just before MaxWait = %v, want nil", w.err)
		}
		s.Release(1)
	})
}

// MaxWait firing in the same instant as the grant: either the grant is kept
// (nil, weight held) or the call fails with ErrMaxWait holding nothing.
func TestMaxWaitRacesGrant(t *testing.T) {
	for i := range 100 {
		synctest.Test(t, func(t *testing.T) {
			s := semaphore.New(1, semaphore.Config{MaxWait: time.Second})
			s.Acquire(t.Context(), 1)
			w := acquireAsync(t.Context(), s, 1)
			synctest.Wait()
			time.Sleep(time.Second) // the waiter's timer fires now too
			s.Release(1)
			synctest.Wait()
			st := s.Stats()
			switch {
			case w.err == nil && st.InUse == 1:
			case errors.Is(w.err, semaphore.ErrMaxWait) && st.InUse == 0:
			default:
				t.Fatalf("iteration %d: err=%v InUse=%d", i, w.err, st.InUse)
			}
			if st.Waiting != 0 {
				t.Fatalf("Waiting = %d", st.Waiting)
			}
		})
	}
}

// observe builds up the throughput estimate: limit 1, each holder keeps the
// weight for hold, so the semaphore releases 1/hold per second while queued.
func observe(t *testing.T, s *semaphore.Weighted, hold time.Duration, rounds int) {
	t.Helper()
	if err := s.Acquire(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range rounds {
		wg.Go(func() {
			if err := s.Acquire(context.Background(), 1); err != nil {
				t.Errorf("observe: %v", err)
				return
			}
			time.Sleep(hold)
			s.Release(1)
		})
		synctest.Wait()
	}
	time.Sleep(hold)
	s.Release(1)
	wg.Wait()
}

func TestDeadlineTheQueueCannotMeetFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{})
		observe(t, s, time.Second, 4) // about 1 weight per second
		if r := s.Stats().ReleaseRate; r < 0.9 || r > 1.1 {
			t.Fatalf("ReleaseRate = %v, want about 1/s", r)
		}
		s.Acquire(t.Context(), 1)
		ctxQ, cancelQ := context.WithCancel(t.Context())
		for range 3 {
			acquireAsync(ctxQ, s, 1)
			synctest.Wait()
		}
		// 3 queued ahead + 1 own, nothing free: about 4 s; a 2 s deadline cannot be met.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := s.Acquire(ctx, 1)
		if !errors.Is(err, semaphore.ErrDeadline) || time.Since(start) != 0 {
			t.Fatalf("Acquire with an unmeetable deadline = %v after %v, want ErrDeadline at once", err, time.Since(start))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("ErrDeadline must not match context.DeadlineExceeded")
		}
		if ra := err.(*semaphore.RejectError).RetryAfter(); ra < 3*time.Second || ra > 5*time.Second {
			t.Fatalf("RetryAfter = %v, want about 4s", ra)
		}
		// A deadline the queue can meet waits.
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Minute)
		defer cancel2()
		w := acquireAsync(ctx2, s, 1)
		synctest.Wait()
		if w.done.Load() {
			t.Fatalf("Acquire with a generous deadline returned %v, want it queued", w.err)
		}
		// With NoEarlyReject the same call waits until its deadline.
		cancelQ()
		cancel2()
		synctest.Wait()
		s.Release(1)
	})
}

func TestMaxWaitEstimateFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{MaxWait: 2 * time.Second})
		observe(t, s, 400*time.Millisecond, 4) // 2.5/s
		s.Acquire(t.Context(), 1)
		ctxQ, cancelQ := context.WithCancel(t.Context())
		defer cancelQ()
		for range 6 { // 6 ahead + 1 own at 2.5/s: 2.8 s > MaxWait
			acquireAsync(ctxQ, s, 1)
			synctest.Wait()
		}
		start := time.Now()
		if err := s.Acquire(t.Context(), 1); !errors.Is(err, semaphore.ErrMaxWait) || time.Since(start) != 0 {
			t.Fatalf("Acquire with estimate > MaxWait = %v after %v, want ErrMaxWait at once", err, time.Since(start))
		}
		cancelQ()
		synctest.Wait()
		s.Release(1)
	})
}

func TestNoEarlyRejectWaitsUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(1, semaphore.Config{NoEarlyReject: true})
		observe(t, s, time.Second, 4)
		s.Acquire(t.Context(), 1)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := s.Acquire(ctx, 1); err != context.DeadlineExceeded || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("Acquire = %v after %v, want DeadlineExceeded after 500ms", err, time.Since(start))
		}
		s.Release(1)
	})
}

func TestZeroValueRejects(t *testing.T) {
	var s semaphore.Weighted
	if err := s.Acquire(t.Context(), 1); !errors.Is(err, semaphore.ErrTooLarge) {
		t.Fatalf("zero Weighted Acquire = %v, want ErrTooLarge", err)
	}
	if s.TryAcquire(1) {
		t.Fatal("zero Weighted TryAcquire = true")
	}
	if err := s.Acquire(t.Context(), 0); err != nil {
		t.Fatalf("zero Weighted Acquire(ctx, 0) = %v, want nil", err)
	}
	s.SetLimit(1)
	if !s.TryAcquire(1) {
		t.Fatal("zero Weighted given limit 1: TryAcquire = false")
	}
}

func TestNewWeighted(t *testing.T) {
	s := semaphore.NewWeighted(3)
	if st := s.Stats(); st.Limit != 3 || st.InUse != 0 {
		t.Fatalf("NewWeighted(3).Stats() = %+v, want Limit 3, nothing in use", st)
	}
	// The zero Config: an Acquire that cannot be granted waits (no MaxWaiters),
	// and nothing rejects it early.
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.NewWeighted(1)
		s.Acquire(t.Context(), 1)
		w := acquireAsync(t.Context(), s, 1)
		time.Sleep(time.Hour)
		if w.done.Load() {
			t.Fatalf("queued Acquire returned %v, want it still waiting", w.err)
		}
		s.Release(1)
		synctest.Wait()
		if w.err != nil {
			t.Fatalf("Acquire = %v after Release, want nil", w.err)
		}
	})
}

// A weight of 0, as in x/sync: Acquire, TryAcquire and Release of 0 succeed
// and change nothing, even on a full semaphore, but an Acquire of 0 still
// waits behind the callers queued before it, and TryAcquire(0) does not
// overtake them.
func TestZeroWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := semaphore.New(2, semaphore.Config{})
		s.Acquire(t.Context(), 2)
		if err := s.Acquire(t.Context(), 0); err != nil {
			t.Fatalf("Acquire(ctx, 0) on a full semaphore = %v, want nil", err)
		}
		if !s.TryAcquire(0) {
			t.Fatal("TryAcquire(0) on a full semaphore = false, want true")
		}
		s.Release(0)
		if st := s.Stats(); st.InUse != 2 || st.Waiting != 0 {
			t.Fatalf("Stats = %+v after weight-0 calls, want InUse 2, Waiting 0", st)
		}

		head := acquireAsync(t.Context(), s, 2)
		synctest.Wait()
		zero := acquireAsync(t.Context(), s, 0)
		synctest.Wait()
		if zero.done.Load() {
			t.Fatal("Acquire(ctx, 0) overtook a queued caller")
		}
		if s.TryAcquire(0) {
			t.Fatal("TryAcquire(0) overtook a queued caller")
		}
		if st := s.Stats(); st.Waiting != 2 || st.WaitingWeight != 2 {
			t.Fatalf("Stats = %+v, want Waiting 2, WaitingWeight 2", st)
		}
		s.Release(2)
		synctest.Wait()
		if head.err != nil || zero.err != nil || !head.done.Load() || !zero.done.Load() {
			t.Fatalf("after Release: head (%v, %v), zero (%v, %v), want both granted", head.done.Load(), head.err, zero.done.Load(), zero.err)
		}
		if st := s.Stats(); st.InUse != 2 || st.Waiting != 0 {
			t.Fatalf("Stats = %+v, want InUse 2 (the head's), Waiting 0", st)
		}
		s.Release(2)
	})
}

// Limits and weights up to MaxLimit: no sum overflows.
func TestMaxLimitDoesNotOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxLimit = semaphore.MaxLimit
		s := semaphore.New(maxLimit, semaphore.Config{})
		if !s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) = false")
		}
		if s.TryAcquire(maxLimit) {
			t.Fatal("TryAcquire(MaxLimit) with 1 held = true")
		}
		ctx, cancel := context.WithCancel(t.Context())
		for range 3 {
			acquireAsync(ctx, s, maxLimit)
			synctest.Wait()
		}
		if st := s.Stats(); st.Waiting != 3 || st.WaitingWeight != maxLimit {
			t.Fatalf("Stats = %+v, want Waiting 3 and WaitingWeight saturated at MaxLimit", st)
		}
		cancel()
		synctest.Wait()
		if st := s.Stats(); st.Waiting != 0 || st.WaitingWeight != 0 || st.InUse != 1 {
			t.Fatalf("Stats = %+v after cancelling, want Waiting 0, WaitingWeight 0, InUse 1", st)
		}
		s.Release(1)
		if !s.TryAcquire(maxLimit) {
			t.Fatal("TryAcquire(MaxLimit) on an idle semaphore = false")
		}
		s.SetLimit(0) // InUse MaxLimit above limit 0
		if s.TryAcquire(0) || s.TryAcquire(maxLimit) {
			t.Fatal("TryAcquire succeeded with MaxLimit held above limit 0")
		}
		s.Release(maxLimit)
		if !s.TryAcquire(0) {
			t.Fatal("TryAcquire(0) at limit 0, nothing held = false")
		}
	})
}

// TestNegativeMaxWaitNeverWaits: a negative MaxWait refuses at once, with
// ErrMaxWait, a call that cannot be granted at once, and grants one that can.
func TestNegativeMaxWaitNeverWaits(t *testing.T) {
	s := semaphore.New(2, semaphore.Config{MaxWait: -1})
	if err := s.Acquire(context.Background(), 2); err != nil {
		t.Fatalf("Acquire(2) on an empty semaphore = %v, want nil", err)
	}
	err := s.Acquire(context.Background(), 1)
	if !errors.Is(err, semaphore.ErrMaxWait) {
		t.Fatalf("Acquire(1) on a full semaphore with MaxWait -1 = %v, want ErrMaxWait", err)
	}
	if st := s.Stats(); st.InUse != 2 || st.Waiting != 0 || st.RejectedMaxWait != 1 {
		t.Errorf("Stats = %+v, want InUse 2, Waiting 0, RejectedMaxWait 1", st)
	}
}
