package otelfloodgate_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

const (
	lim  = "floodgate.limiter"
	kind = "floodgate.kind"
	rsn  = "floodgate.reason"
)

func TestSemaphore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		s := semaphore.New(2, m.SemaphoreConfig("db", semaphore.Config{MaxWaiters: 1}))
		if _, err := m.Semaphore("db", s); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := s.Acquire(ctx, 2); err != nil { // admitted at once: no wait recorded
			t.Fatal(err)
		}
		if err := s.Acquire(ctx, 3); !errors.Is(err, semaphore.ErrTooLarge) {
			t.Fatalf("Acquire(3) = %v, want ErrTooLarge", err)
		}
		done := make(chan error)
		go func() { done <- s.Acquire(ctx, 1) }() // waits
		synctest.Wait()
		if err := s.Acquire(ctx, 1); !errors.Is(err, semaphore.ErrQueueFull) {
			t.Fatalf("Acquire with a full queue = %v, want ErrQueueFull", err)
		}
		c := func(name string, kv ...string) string {
			return key(name, append([]string{lim, "db", kind, "semaphore"}, kv...)...)
		}
		want := map[string]int64{
			c(otelfloodgate.NameAdmitted):                    1,
			c(otelfloodgate.NameCanceled):                    0,
			c(otelfloodgate.NameRejected, rsn, "queue_full"): 1,
			c(otelfloodgate.NameRejected, rsn, "max_wait"):   0,
			c(otelfloodgate.NameRejected, rsn, "deadline"):   0,
			c(otelfloodgate.NameRejected, rsn, "too_large"):  1,
			c(otelfloodgate.NameInUse):                       2,
			c(otelfloodgate.NameWaiting):                     1,
			c(otelfloodgate.NameLimit):                       2,
		}
		diff(t, points(t, r), want)

		time.Sleep(time.Second) // fake time: the waiter waits 1s
		s.Release(1)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// A max-wait and a deadline rejection: both refused at once.
		mw := semaphore.New(1, m.SemaphoreConfig("db", semaphore.Config{MaxWait: -1}))
		if _, err := m.Semaphore("db", mw); err != nil {
			t.Fatal(err)
		}
		mw.TryAcquire(1)
		if err := mw.Acquire(ctx, 1); !errors.Is(err, semaphore.ErrMaxWait) {
			t.Fatalf("Acquire = %v, want ErrMaxWait", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		go func() { done <- s.Acquire(cctx, 1) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want Canceled", err)
		}
		got := points(t, r)
		// Two semaphores under one name add up in the SDK's callback.
		for k, v := range map[string]int64{
			c(otelfloodgate.NameAdmitted):                  3,
			c(otelfloodgate.NameCanceled):                  1,
			c(otelfloodgate.NameRejected, rsn, "max_wait"): 1,
			c(otelfloodgate.NameWaitDuration) + "#count":   1,
		} {
			if got[k] != v {
				t.Errorf("%s = %d, want %d", k, got[k], v)
			}
		}
	})
}

func TestMeter(t *testing.T) {
	m, r := newMetrics(t)
	mt := shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2)})
	if _, err := m.Meter("api", mt); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if got := mt.Allow("acme"); got != want {
			t.Fatalf("Allow #%d = %v, want %v", i, got, want)
		}
	}
	if _, err := mt.AllowN("acme", 3); !errors.Is(err, shaper.ErrTooLarge) {
		t.Fatalf("AllowN(3) = %v, want ErrTooLarge", err)
	}
	if _, err := mt.AllowN("acme", 0); err != nil { // a peek: not counted
		t.Fatal(err)
	}
	c := func(name string, kv ...string) string {
		return key(name, append([]string{lim, "api", kind, "meter"}, kv...)...)
	}
	diff(t, points(t, r), map[string]int64{
		c(otelfloodgate.NameAdmitted):                   2,
		c(otelfloodgate.NameRejected, rsn, "rate"):      1,
		c(otelfloodgate.NameRejected, rsn, "too_large"): 1,
	})
}

func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t)
		q := shaper.NewQueue(shaper.PerSecond(1), m.QueueConfig("jobs", shaper.QueueConfig{MaxQueue: 1, MaxWait: 5 * time.Second}))
		defer q.Close()
		if _, err := m.Queue("jobs", q); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := q.Wait(ctx, 1); err != nil { // at once
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- q.Wait(ctx, 1) }() // 1s later
		synctest.Wait()
		if err := q.Wait(ctx, 1); !errors.Is(err, shaper.ErrQueueFull) {
			t.Fatalf("Wait = %v, want ErrQueueFull", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := q.Wait(ctx, 10); err != nil { // waits 1s, then owes 10s of rate
			t.Fatal(err)
		}
		if err := q.Wait(ctx, 1); !errors.Is(err, shaper.ErrMaxWait) {
			t.Fatalf("Wait = %v, want ErrMaxWait", err)
		}
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if err := q.Wait(dctx, 1); !errors.Is(err, shaper.ErrDeadline) {
			t.Fatalf("Wait with a deadline = %v, want ErrDeadline", err)
		}
		c := func(name string, kv ...string) string {
			return key(name, append([]string{lim, "jobs", kind, "queue"}, kv...)...)
		}
		diff(t, points(t, r), map[string]int64{
			c(otelfloodgate.NameAdmitted):                    3,
			c(otelfloodgate.NameCanceled):                    0,
			c(otelfloodgate.NameRejected, rsn, "queue_full"): 1,
			c(otelfloodgate.NameRejected, rsn, "max_wait"):   1,
			c(otelfloodgate.NameRejected, rsn, "deadline"):   1,
			c(otelfloodgate.NameRejected, rsn, "too_large"):  0,
			c(otelfloodgate.NameWaiting):                     0,
			c(otelfloodgate.NameQueueDelay) + "#count":       2,
		})
	})
}

// TestNoAllocations: with metrics attached, the admitted path of a semaphore
// and of a meter allocates nothing, and neither does a recorded wait.
func TestNoAllocations(t *testing.T) {
	m, _ := newMetrics(t)
	s := semaphore.New(1, m.SemaphoreConfig("s", semaphore.Config{}))
	if _, err := m.Semaphore("s", s); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		s.TryAcquire(1)
		s.Release(1)
	}); a != 0 {
		t.Errorf("semaphore TryAcquire+Release: %v allocs, want 0", a)
	}
	mt := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1e6)})
	if _, err := m.Meter("m", mt); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { mt.Allow("k") }); a != 0 {
		t.Errorf("Meter.Allow: %v allocs, want 0", a)
	}
	cfg := m.SemaphoreConfig("w", semaphore.Config{})
	cfg.OnWait(1, time.Millisecond) // first record creates the series
	if a := testing.AllocsPerRun(100, func() { cfg.OnWait(1, time.Millisecond) }); a != 0 {
		t.Errorf("recording a wait: %v allocs, want 0", a)
	}
}
