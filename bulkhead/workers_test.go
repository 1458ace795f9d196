package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
)

// The leaves satisfy the worker throttle's interfaces as they are.
var (
	_ bulkhead.Pacer = (*shaper.Queue)(nil)
	_ bulkhead.Pacer = (*shaperredis.Queue)(nil)
	_ floodgate.Gate = (*semaphore.Weighted)(nil)
)

// recorder records job starts and the most jobs seen running at once.
type recorder struct {
	mu      sync.Mutex
	starts  []time.Time
	order   []string
	running int
	most    int
}

func (r *recorder) job(name string, d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		r.mu.Lock()
		r.starts = append(r.starts, time.Now())
		r.order = append(r.order, name)
		r.running++
		r.most = max(r.most, r.running)
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.running--
			r.mu.Unlock()
		}()
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (r *recorder) snapshot() (starts []time.Time, order []string, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts...), append([]string(nil), r.order...), r.most
}

func pace(perSecond int64) *shaper.Queue {
	return shaper.NewQueue(shaper.PerSecond(perSecond), shaper.QueueConfig{})
}

func mustSubmit(t *testing.T, w *bulkhead.Workers, class string, job func(context.Context) error) {
	t.Helper()
	if err := w.Submit(t.Context(), class, bulkhead.Job{Run: job}); err != nil {
		t.Fatalf("Submit(%q) = %v, want nil", class, err)
	}
}

func shutdown(t *testing.T, w *bulkhead.Workers) {
	t.Helper()
	if err := w.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
}

// TestWorkersLongRunRate: 5/s with 8 workers and a deep backlog of 1s jobs:
// over a minute, starts never come closer than one interval and the count
// stays within ±1 of 5/s × elapsed.
func TestWorkersLongRunRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		w := bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Pace: pace(5)})
		t0 := time.Now()
		for i := range 400 {
			mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Second))
		}
		for _, at := range []time.Duration{10 * time.Second, 33*time.Second + 100*time.Millisecond, 59*time.Second + 900*time.Millisecond} {
			time.Sleep(time.Until(t0.Add(at)))
			synctest.Wait()
			starts, _, most := r.snapshot()
			want := 5 * at.Seconds()
			if got := float64(len(starts)); got < want-1 || got > want+1 {
				t.Errorf("after %v: %d starts, want %.1f ± 1", at, len(starts), want)
			}
			if most > 8 {
				t.Errorf("after %v: %d jobs ran at once, limit 8", at, most)
			}
		}
		starts, _, _ := r.snapshot()
		for i := 1; i < len(starts); i++ {
			if d := starts[i].Sub(starts[i-1]); d < 200*time.Millisecond {
				t.Fatalf("starts %d and %d %v apart, want ≥ 200ms", i-1, i, d)
			}
		}
		shutdown(t, w)
		if st := w.Stats().Classes[0]; st.Started != 400 || st.Finished != 400 || st.Queued != 0 || st.Running != 0 {
			t.Errorf("after Shutdown: %+v, want 400 started and finished, none queued or running", st)
		}
	})
}

// TestWorkersConcurrencyCap: jobs of mixed lengths, no pace: never more than
// the limit run at once, and the limit is reached. With a narrower Gate, the
// Gate's limit holds.
func TestWorkersConcurrencyCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate floodgate.Gate
		want int
	}{
		{"limit", nil, 8},
		{"gate", semaphore.New(3, semaphore.Config{}), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var r recorder
				w := bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Gate: tc.gate})
				for i := range 200 {
					mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Duration(i%7+1)*100*time.Millisecond))
				}
				shutdown(t, w)
				starts, _, most := r.snapshot()
				if len(starts) != 200 || most != tc.want {
					t.Errorf("%d jobs ran, at most %d at once; want 200, %d", len(starts), most, tc.want)
				}
			})
		})
	}
}

// TestWorkersInteractiveNotDelayed: a flood of 10s background jobs at 5/s
// with 8 workers, 2 reserved for interactive: an interactive job submitted at
// any moment (while background still ramps up, and once it holds its 6)
// starts within one start interval.
func TestWorkersInteractiveNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		w := bulkhead.NewWorkers(8, bulkhead.WorkersConfig{
			Classes: []bulkhead.WorkerClass{{Name: "interactive", Reserved: 2}, {Name: "background"}},
			Pace:    pace(5),
		})
		for i := range 1000 {
			mustSubmit(t, w, "background", r.job(fmt.Sprint("b", i), 10*time.Second))
		}
		t0 := time.Now()
		for i, at := range []time.Duration{
			330 * time.Millisecond, 500 * time.Millisecond, 910 * time.Millisecond, // ramp-up
			3 * time.Second, 7*time.Second + 50*time.Millisecond, 25 * time.Second, // background full
		} {
			time.Sleep(time.Until(t0.Add(at)))
			var started time.Time
			submitted := time.Now()
			if err := w.Do(t.Context(), "interactive", func(context.Context) error {
				started = time.Now()
				time.Sleep(100 * time.Millisecond)
				return nil
			}); err != nil {
				t.Fatalf("interactive %d: Do = %v", i, err)
			}
			if d := started.Sub(submitted); d > 200*time.Millisecond {
				t.Errorf("interactive %d at %v waited %v, want ≤ 200ms", i, at, d)
			}
		}
		st := w.Stats()
		if bg, _ := st.Class("background"); bg.Running > 6 {
			t.Errorf("background running %d, want ≤ 6 (2 reserved)", bg.Running)
		}
		if err := w.Shutdown(canceled()); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown(canceled) = %v, want context.Canceled", err)
		}
	})
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestWorkersReservation: with limit 4 and classes a (1 reserved), b (1
// reserved), c: a flood of c takes 2, b then takes 1 (a's reservation stays
// free), a takes the last one.
func TestWorkersReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(4, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{
			{Name: "a", Reserved: 1}, {Name: "b", Reserved: 1}, {Name: "c"},
		}})
		block := make(chan struct{})
		job := func(ctx context.Context) error { <-block; return nil }
		running := func() (a, b, c int64) {
			synctest.Wait()
			st := w.Stats()
			return st.Classes[0].Running, st.Classes[1].Running, st.Classes[2].Running
		}
		for range 10 {
			mustSubmit(t, w, "c", job)
		}
		if a, b, c := running(); a != 0 || b != 0 || c != 2 {
			t.Errorf("after c flood: running a=%d b=%d c=%d, want 0 0 2", a, b, c)
		}
		for range 10 {
			mustSubmit(t, w, "b", job)
		}
		if a, b, c := running(); a != 0 || b != 1 || c != 2 {
			t.Errorf("after b flood: running a=%d b=%d c=%d, want 0 1 2", a, b, c)
		}
		for range 10 {
			mustSubmit(t, w, "a", job)
		}
		if a, b, c := running(); a != 1 || b != 1 || c != 2 {
			t.Errorf("after a flood: running a=%d b=%d c=%d, want 1 1 2", a, b, c)
		}
		close(block) // every job returns at once; a drains first with 3, b beside it with its 1
		shutdown(t, w)
		for _, cs := range w.Stats().Classes {
			if cs.Started != 10 || cs.Finished != 10 {
				t.Errorf("class %s: %+v, want 10 started and finished", cs.Name, cs)
			}
		}
	})
}

// TestWorkersClassUsesUnreserved: a class may use all of the limit that no
// other class reserves, but not another class's unused reservation, even a
// lower class's (until 85c20e6 a higher class took lower reservations).
func TestWorkersClassUsesUnreserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(4, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{
			{Name: "hi"}, {Name: "lo", Reserved: 3}, {Name: "none"},
		}})
		block := make(chan struct{})
		job := func(ctx context.Context) error { <-block; return nil }
		for range 6 {
			mustSubmit(t, w, "hi", job)
		}
		synctest.Wait()
		if st := w.Stats(); st.Running != 1 {
			t.Errorf("hi alone: Running = %d, want 1 (lo reserves 3)", st.Running)
		}
		close(block)
		shutdown(t, w)

		w = bulkhead.NewWorkers(4, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{
			{Name: "hi"}, {Name: "lo", Reserved: 3},
		}})
		block = make(chan struct{})
		for range 6 {
			mustSubmit(t, w, "lo", job)
		}
		synctest.Wait()
		if st := w.Stats(); st.Running != 4 {
			t.Errorf("lo alone: Running = %d, want 4 (its 3 and the unreserved 1)", st.Running)
		}
		close(block)
		shutdown(t, w)
	})
}

// TestWorkersFIFOWithinClass: one worker, jobs of two classes submitted
// interleaved: each class runs in submission order, the higher class first.
func TestWorkersFIFOWithinClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
			Classes: []bulkhead.WorkerClass{{Name: "hi"}, {Name: "lo"}},
			Pace:    pace(10),
		})
		block := make(chan struct{})
		mustSubmit(t, w, "lo", func(context.Context) error { <-block; return nil })
		synctest.Wait()
		var want []string
		for i := range 20 {
			mustSubmit(t, w, "lo", r.job(fmt.Sprint("lo", i), time.Millisecond))
			mustSubmit(t, w, "hi", r.job(fmt.Sprint("hi", i), time.Millisecond))
			want = append(want, fmt.Sprint("hi", i))
		}
		for i := range 20 {
			want = append(want, fmt.Sprint("lo", i))
		}
		close(block)
		shutdown(t, w)
		_, order, _ := r.snapshot()
		if strings.Join(order, " ") != strings.Join(want, " ") {
			t.Errorf("order\n%v\nwant\n%v", order, want)
		}
	})
}

// TestWorkersQueueFull: a backlog at MaxQueue refuses with ErrQueueFull and a
// RetryAfter: 1s before the class has two starts with a backlog, then its
// start interval (an idle gap does not count).
func TestWorkersQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(100, bulkhead.WorkersConfig{
			Classes: []bulkhead.WorkerClass{{Name: "bg", MaxQueue: 2}},
			Pace:    pace(5),
		})
		block := make(chan struct{})
		job := func(context.Context) error { <-block; return nil }
		submitFull := func(wantDelay time.Duration) {
			t.Helper()
			for w.Stats().Classes[0].Queued < 2 {
				mustSubmit(t, w, "bg", job)
			}
			err := w.Submit(t.Context(), "bg", bulkhead.Job{Run: job})
			re, ok := errors.AsType[*bulkhead.RejectError](err)
			if !errors.Is(err, bulkhead.ErrQueueFull) || !ok {
				t.Fatalf("Submit on a full backlog = %v, want a *RejectError matching ErrQueueFull", err)
			}
			if re.RetryAfter() != wantDelay || re.Status != 503 {
				t.Errorf("RetryAfter = %v, Status = %d, want %v, 503", re.RetryAfter(), re.Status, wantDelay)
			}
		}
		mustSubmit(t, w, "bg", job)
		synctest.Wait() // the first started; the dispatcher waits for the next slot
		submitFull(time.Second)
		time.Sleep(time.Second) // both queued jobs start, 200ms apart
		synctest.Wait()
		mustSubmit(t, w, "bg", job) // starts at once after the idle gap, which is not an interval
		synctest.Wait()
		submitFull(200 * time.Millisecond)
		st := w.Stats().Classes[0]
		if st.QueueFull != 2 || st.Submitted != st.Started+uint64(st.Queued) {
			t.Errorf("stats %+v: want 2 QueueFull, Submitted = Started + Queued", st)
		}
		close(block)
		shutdown(t, w)
	})
}

// TestWorkersShutdownDrains: Shutdown refuses new jobs, runs the backlog on
// schedule and returns when every job has returned.
func TestWorkersShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var unstarted atomic.Int64
		w := bulkhead.NewWorkers(2, bulkhead.WorkersConfig{
			Pace:        pace(5),
			OnUnstarted: func(string, bulkhead.Job, error) { unstarted.Add(1) },
		})
		for i := range 20 {
			mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Second))
		}
		t0 := time.Now()
		done := make(chan error)
		go func() { done <- w.Shutdown(context.Background()) }()
		synctest.Wait()
		if err := w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{Run: r.job("late", 0)}); err != bulkhead.ErrClosed {
			t.Errorf("Submit during Shutdown = %v, want ErrClosed", err)
		}
		if err := w.Do(t.Context(), bulkhead.DefaultClass, r.job("late", 0)); err != bulkhead.ErrClosed {
			t.Errorf("Do during Shutdown = %v, want ErrClosed", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
		starts, _, _ := r.snapshot()
		// 2 at a time, 1s each: 10 rounds.
		if len(starts) != 20 || unstarted.Load() != 0 || time.Since(t0) < 10*time.Second {
			t.Errorf("%d ran, %d handed back, Shutdown took %v; want 20, 0, ≥ 10s", len(starts), unstarted.Load(), time.Since(t0))
		}
		st := w.Stats().Classes[0]
		if st.Submitted != 20 || st.Finished != 20 || st.Closed != 2 || st.Running != 0 || st.Queued != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestWorkersShutdownHandsBack: with HandBack, queued jobs come back with
// ErrClosed (Submit's through OnUnstarted, Do's from Do), running ones finish.
func TestWorkersShutdownHandsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var mu sync.Mutex
		var back []error
		w := bulkhead.NewWorkers(2, bulkhead.WorkersConfig{
			Pace:     pace(5),
			HandBack: true,
			OnUnstarted: func(class string, job bulkhead.Job, err error) {
				mu.Lock()
				back = append(back, err)
				mu.Unlock()
			},
		})
		for i := range 20 {
			mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Second))
		}
		doErr := make(chan error)
		go func() { doErr <- w.Do(context.Background(), bulkhead.DefaultClass, r.job("do", time.Second)) }()
		time.Sleep(300 * time.Millisecond) // two started
		if err := w.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
		if err := <-doErr; err != bulkhead.ErrClosed {
			t.Errorf("queued Do = %v, want ErrClosed", err)
		}
		starts, _, _ := r.snapshot()
		for _, err := range back {
			if err != bulkhead.ErrClosed {
				t.Errorf("handed back with %v, want ErrClosed", err)
			}
		}
		if len(starts) != 2 || len(back) != 18 {
			t.Errorf("%d ran, %d handed back; want 2 and 18", len(starts), len(back))
		}
		st := w.Stats().Classes[0]
		if st.Submitted != 21 || st.Finished != 2 || st.HandedBack != 19 {
			t.Errorf("stats %+v: want 21 submitted, 2 finished, 19 handed back", st)
		}

		// Nothing queued: nothing to hand back, Shutdown returns at once.
		w = bulkhead.NewWorkers(2, bulkhead.WorkersConfig{HandBack: true, OnUnstarted: func(string, bulkhead.Job, error) {}})
		mustSubmit(t, w, bulkhead.DefaultClass, r.job("one", time.Second))
		synctest.Wait()
		t0 := time.Now()
		shutdown(t, w)
		if time.Since(t0) != time.Second {
			t.Errorf("Shutdown with nothing queued took %v, want 1s (the running job)", time.Since(t0))
		}
	})
}

// TestWorkersShutdownDeadline: if Shutdown's context ends first, queued jobs
// are handed back, running jobs are cancelled with ErrAborted as the cause,
// and Shutdown reports it after they returned.
func TestWorkersShutdownDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		var back atomic.Int64
		w := bulkhead.NewWorkers(3, bulkhead.WorkersConfig{
			OnUnstarted: func(string, bulkhead.Job, error) { back.Add(1) },
		})
		for i := range 10 {
			mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Hour))
		}
		var causes atomic.Int64
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), bulkhead.ErrAborted) && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				causes.Add(1)
			}
			return nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t0 := time.Now()
		err := w.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != time.Minute {
			t.Errorf("Shutdown = %v after %v, want DeadlineExceeded after 1m", err, time.Since(t0))
		}
		starts, _, _ := r.snapshot()
		if len(starts) != 3 || back.Load() != 8 || causes.Load() != 0 {
			t.Errorf("%d started, %d handed back, %d saw the cause; want 3, 8, 0", len(starts), back.Load(), causes.Load())
		}
		if st := w.Stats(); st.Running != 0 || st.Classes[0].Finished != 3 || st.Classes[0].Failed != 3 {
			t.Errorf("stats %+v", st)
		}
	})
	// The job that checks its cause, running.
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{})
		cause := make(chan error, 1)
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil
		})
		synctest.Wait()
		err := w.Shutdown(canceled())
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 running jobs cancelled") {
			t.Errorf("Shutdown = %v", err)
		}
		if c := <-cause; !errors.Is(c, bulkhead.ErrAborted) || !errors.Is(c, context.Canceled) {
			t.Errorf("job's cause = %v, want ErrAborted and context.Canceled", c)
		}
	})
}

// TestWorkersDo: Do returns the job's error; a Do cancelled while queued is
// removed and never runs; a Do cancelled while running cancels the job with
// its cause.
func TestWorkersDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{})
		defer shutdown(t, w)
		errJob := errors.New("job failed")
		if err := w.Do(t.Context(), bulkhead.DefaultClass, func(context.Context) error { return errJob }); err != errJob {
			t.Errorf("Do = %v, want the job's error", err)
		}

		block := make(chan struct{})
		mustSubmit(t, w, bulkhead.DefaultClass, func(context.Context) error { <-block; return nil })
		ctx, cancel := context.WithCancel(t.Context())
		ran := false
		errc := make(chan error)
		go func() {
			errc <- w.Do(ctx, bulkhead.DefaultClass, func(context.Context) error { ran = true; return nil })
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("Do cancelled while queued = %v, want context.Canceled", err)
		}
		close(block)
		synctest.Wait()
		if ran {
			t.Error("a Do cancelled while queued ran its job")
		}

		why := errors.New("client went away")
		ctx, cancelCause := context.WithCancelCause(t.Context())
		go func() {
			errc <- w.Do(ctx, bulkhead.DefaultClass, func(ctx context.Context) error {
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		synctest.Wait()
		cancelCause(why)
		if err := <-errc; err != why {
			t.Errorf("Do cancelled while running = %v, want the job's return (its cause)", err)
		}
		if st := w.Stats().Classes[0]; st.Canceled != 1 || st.Finished != 3 || st.Failed != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// failing is a Pacer or Gate that refuses every call.
type failing struct{ err error }

func (f failing) Wait(context.Context, int64) error { return f.err }
func (f failing) Hold(context.Context, int64) (floodgate.Held, error) {
	return floodgate.Held{}, f.err
}
func (f failing) TryHold(context.Context, int64) (floodgate.Held, error) {
	return floodgate.Held{}, f.err
}

// TestWorkersStartErrors: when the Pace or the Gate refuses, the job fails
// with its error (Do returns it, OnUnstarted gets a submitted job), and every
// job is accounted for.
func TestWorkersStartErrors(t *testing.T) {
	refusal := errors.New("store unavailable")
	for _, cfg := range []bulkhead.WorkersConfig{{Pace: failing{refusal}}, {Gate: failing{refusal}}} {
		synctest.Test(t, func(t *testing.T) {
			var back atomic.Int64
			cfg.OnUnstarted = func(_ string, _ bulkhead.Job, err error) {
				if err == refusal {
					back.Add(1)
				}
			}
			w := bulkhead.NewWorkers(2, cfg)
			ran := false
			for range 5 {
				mustSubmit(t, w, bulkhead.DefaultClass, func(context.Context) error { ran = true; return nil })
			}
			if err := w.Do(t.Context(), bulkhead.DefaultClass, func(context.Context) error { ran = true; return nil }); err != refusal {
				t.Errorf("Do = %v, want the refusal", err)
			}
			shutdown(t, w)
			st := w.Stats().Classes[0]
			if ran || back.Load() != 5 || st.PaceErrors+st.GateErrors != 6 {
				t.Errorf("ran %v, %d handed back, stats %+v; want no run, 5, 6 errors", ran, back.Load(), st)
			}
		})
	}
}

// TestWorkersBadInput: an unknown class is an error and changes nothing; a
// nil job and an impossible configuration panic with a prefixed message.
func TestWorkersBadInput(t *testing.T) {
	w := bulkhead.NewWorkers(2, bulkhead.WorkersConfig{})
	err := w.Submit(t.Context(), "nope", bulkhead.Job{Run: func(context.Context) error { return nil }})
	if !errors.Is(err, bulkhead.ErrUnknownClass) || err.Error() != `bulkhead: unknown class "nope"` {
		t.Errorf("Submit(unknown class) = %v", err)
	}
	if err := w.Do(t.Context(), "nope", func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrUnknownClass) {
		t.Errorf("Do(unknown class) = %v", err)
	}
	if err := w.Submit(canceled(), bulkhead.DefaultClass, bulkhead.Job{Run: func(context.Context) error { return nil }}); err != context.Canceled {
		t.Errorf("Submit(done ctx) = %v, want context.Canceled", err)
	}
	if st := w.Stats().Classes[0]; st != (bulkhead.WorkerClassStats{Name: bulkhead.DefaultClass}) {
		t.Errorf("stats after bad input %+v, want zero", st)
	}
	shutdown(t, w)

	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"job without Run", "bulkhead: Workers: Job without Run", func() { w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{Value: 1}) }},
		{"nil job Do", "bulkhead: Workers: nil job", func() { w.Do(t.Context(), bulkhead.DefaultClass, nil) }},
		{"limit 0", "bulkhead: NewWorkers: limit < 1", func() { bulkhead.NewWorkers(0, bulkhead.WorkersConfig{}) }},
		{"reserved > limit", "bulkhead: NewWorkers: Reserved adds up to more than limit", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{Name: "a", Reserved: 9}}})
		}},
		{"reserved sum > limit", "bulkhead: NewWorkers: Reserved adds up to more than limit", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{Name: "a", Reserved: 5}, {Name: "b", Reserved: 4}}})
		}},
		{"negative reserved", "bulkhead: NewWorkers: class a: negative Reserved", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{Name: "a", Reserved: -1}}})
		}},
		{"negative max queue", "bulkhead: NewWorkers: class a: negative MaxQueue", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{Name: "a", MaxQueue: -1}}})
		}},
		{"no name", "bulkhead: NewWorkers: class without a Name", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{}}})
		}},
		{"duplicate", "bulkhead: NewWorkers: duplicate class a", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{{Name: "a"}, {Name: "a"}}})
		}},
		{"hand back without callback", "bulkhead: NewWorkers: HandBack without OnUnstarted", func() {
			bulkhead.NewWorkers(8, bulkhead.WorkersConfig{HandBack: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != tc.want {
					t.Errorf("panic %v, want %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

// TestWorkersZero: a zero Workers refuses every job and shuts down at once.
func TestWorkersZero(t *testing.T) {
	var w bulkhead.Workers
	if err := w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{Run: func(context.Context) error { return nil }}); err != bulkhead.ErrClosed {
		t.Errorf("Submit = %v, want ErrClosed", err)
	}
	if err := w.Do(t.Context(), "x", func(context.Context) error { return nil }); err != bulkhead.ErrClosed {
		t.Errorf("Do = %v, want ErrClosed", err)
	}
	if err := w.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if st := w.Stats(); st.Limit != 0 || len(st.Classes) != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestWorkersEveryClassCanStart: NewWorkers refuses a configuration in which
// some class can never start a job (the other classes' reservations take
// the whole limit), and accepts every one in which each class can start one.
func TestWorkersEveryClassCanStart(t *testing.T) {
	cls := func(reserved ...int64) []bulkhead.WorkerClass {
		var cs []bulkhead.WorkerClass
		for i, r := range reserved {
			cs = append(cs, bulkhead.WorkerClass{Name: string(rune('a' + i)), Reserved: r})
		}
		return cs
	}
	for _, tc := range []struct {
		limit    int64
		reserved []int64
		want     string // the panic, or "" if accepted
	}{
		{4, []int64{4, 0}, "bulkhead: NewWorkers: class b: the Reserved of the other classes take the whole limit (4)"},
		{4, []int64{0, 4}, "bulkhead: NewWorkers: class a: the Reserved of the other classes take the whole limit (4)"},
		{4, []int64{2, 2, 0}, "bulkhead: NewWorkers: class c: the Reserved of the other classes take the whole limit (4)"},
		{1, []int64{1, 0}, "bulkhead: NewWorkers: class b: the Reserved of the other classes take the whole limit (1)"},
		{4, []int64{2, 2}, ""},
		{4, []int64{4}, ""},
		{4, []int64{3, 0}, ""},
		{4, []int64{0, 3}, ""},
		{4, []int64{1, 1, 1, 1}, ""},
		{4, []int64{1, 1, 1, 0, 0}, ""},
		{1, []int64{0, 0}, ""},
	} {
		t.Run(fmt.Sprint(tc.limit, tc.reserved), func(t *testing.T) {
			var got any
			var w *bulkhead.Workers
			func() {
				defer func() { got = recover() }()
				w = bulkhead.NewWorkers(tc.limit, bulkhead.WorkersConfig{Classes: cls(tc.reserved...)})
			}()
			if tc.want != "" {
				if got != tc.want {
					t.Errorf("panic %v, want %q", got, tc.want)
				}
				return
			}
			if got != nil {
				t.Fatalf("panic %v, want none", got)
			}
			shutdown(t, w)
			// Accepted: each class, alone, starts a job.
			synctest.Test(t, func(t *testing.T) {
				w := bulkhead.NewWorkers(tc.limit, bulkhead.WorkersConfig{Classes: cls(tc.reserved...)})
				defer shutdown(t, w)
				for _, c := range cls(tc.reserved...) {
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					if err := w.Do(ctx, c.Name, func(context.Context) error { return nil }); err != nil {
						t.Errorf("class %s: Do = %v, want nil", c.Name, err)
					}
					cancel()
				}
			})
		})
	}
}

// TestWorkersReservationIsOwn: a class's reservation is for that class alone,
// whatever the priority of the others: a flood of the higher class leaves
// the lower class's reservation free, and a flood of the lower class leaves
// the higher class's free. Both with jobs started as soon as there is room
// and through the Pace.
func TestWorkersReservationIsOwn(t *testing.T) {
	for _, paced := range []bool{false, true} {
		t.Run(fmt.Sprint("paced=", paced), func(t *testing.T) {
			for _, tc := range []struct {
				flood, other         string
				floodMost, otherMost int64
			}{
				{"hi", "lo", 5, 3}, // hi flood: lo's 3 stay free
				{"lo", "hi", 6, 2}, // lo flood: hi's 2 stay free
			} {
				synctest.Test(t, func(t *testing.T) {
					cfg := bulkhead.WorkersConfig{Classes: []bulkhead.WorkerClass{
						{Name: "hi", Reserved: 2}, {Name: "lo", Reserved: 3},
					}}
					if paced {
						cfg.Pace = pace(100)
					}
					w := bulkhead.NewWorkers(8, cfg)
					block := make(chan struct{})
					job := func(context.Context) error { <-block; return nil }
					for range 20 {
						mustSubmit(t, w, tc.flood, job)
					}
					time.Sleep(time.Second)
					synctest.Wait()
					if st, _ := w.Stats().Class(tc.flood); st.Running != tc.floodMost {
						t.Errorf("%s flood: %d running, want %d", tc.flood, st.Running, tc.floodMost)
					}
					for range 20 {
						mustSubmit(t, w, tc.other, job)
					}
					time.Sleep(time.Second)
					synctest.Wait()
					st := w.Stats()
					f, _ := st.Class(tc.flood)
					o, _ := st.Class(tc.other)
					if f.Running != tc.floodMost || o.Running != tc.otherMost || st.Running != 8 {
						t.Errorf("then %s: running %s=%d %s=%d, want %d and %d", tc.other, tc.flood, f.Running, tc.other, o.Running, tc.floodMost, tc.otherMost)
					}
					close(block)
					shutdown(t, w)
				})
			}
		})
	}
}

// TestWorkersShutdownFromJob: a job that calls Shutdown with its own context
// does not wait for itself: Shutdown returns nil once everything else has
// run, and, if its context ends first, an error matching ctx.Err() once the
// other jobs returned. An outside Shutdown still waits for that job too.
func TestWorkersShutdownFromJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(2, bulkhead.WorkersConfig{})
		var r recorder
		for i := range 4 {
			mustSubmit(t, w, bulkhead.DefaultClass, r.job(fmt.Sprint(i), time.Second))
		}
		inner := make(chan error, 1)
		t0 := time.Now()
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			inner <- w.Shutdown(ctx)
			time.Sleep(time.Second)
			return nil
		})
		if err := <-inner; err != nil || time.Since(t0) != 2*time.Second {
			t.Errorf("Shutdown from a job = %v after %v, want nil after 2s (the 4 others ran)", err, time.Since(t0))
		}
		if starts, _, _ := r.snapshot(); len(starts) != 4 {
			t.Errorf("%d others ran, want 4", len(starts))
		}
		shutdown(t, w)
		if time.Since(t0) != 3*time.Second || w.Stats().Running != 0 {
			t.Errorf("outside Shutdown returned after %v with %d running, want 3s and 0", time.Since(t0), w.Stats().Running)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(2, bulkhead.WorkersConfig{})
		var r recorder
		mustSubmit(t, w, bulkhead.DefaultClass, r.job("long", time.Hour))
		inner := make(chan error, 1)
		t0 := time.Now()
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			inner <- w.Shutdown(sctx)
			return nil
		})
		if err := <-inner; !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != time.Minute {
			t.Errorf("Shutdown from a job = %v after %v, want DeadlineExceeded after 1m", err, time.Since(t0))
		}
		shutdown(t, w)
		if st := w.Stats(); st.Running != 0 || st.Classes[0].Finished != 2 {
			t.Errorf("stats %+v, want 2 finished, none running", st)
		}
	})
	// Two jobs, under a Gate, each calling Shutdown: neither waits for the
	// other.
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(3, bulkhead.WorkersConfig{Gate: semaphore.New(3, semaphore.Config{})})
		start := make(chan struct{})
		inner := make(chan error, 2)
		for range 2 {
			mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
				<-start
				inner <- w.Shutdown(ctx)
				time.Sleep(time.Second)
				return nil
			})
		}
		synctest.Wait()
		t0 := time.Now()
		close(start)
		for range 2 {
			if err := <-inner; err != nil || time.Since(t0) != 0 {
				t.Errorf("Shutdown from one of two jobs = %v after %v, want nil at once", err, time.Since(t0))
			}
		}
		shutdown(t, w)
	})
	// A job leaves its Shutdown on a goroutine of its own and returns: that
	// Shutdown's context (the job's) has ended, so it cancels the other job
	// and returns ctx.Err() once that one returned.
	synctest.Test(t, func(t *testing.T) {
		w := bulkhead.NewWorkers(3, bulkhead.WorkersConfig{})
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			time.Sleep(time.Second) // ignoring ctx
			return nil
		})
		left := make(chan error, 1)
		leave := make(chan struct{})
		mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
			go func() { left <- w.Shutdown(ctx) }()
			<-leave
			return nil
		})
		synctest.Wait()
		t0 := time.Now()
		close(leave)
		if err := <-left; !errors.Is(err, context.Canceled) || time.Since(t0) != time.Second {
			t.Errorf("Shutdown left behind by its job = %v after %v, want context.Canceled after 1s", err, time.Since(t0))
		}
		if st := w.Stats(); st.Running != 0 || st.Classes[0].Finished != 2 {
			t.Errorf("stats %+v after the left-behind Shutdown, want 2 finished, 0 running", st)
		}
	})
}

// TestWorkersConcurrentShutdownWaitsForHandBack: while one Shutdown hands the
// backlog back (OnUnstarted still running), another Shutdown does not return:
// a program that exits when it returns would lose the jobs not yet put back.
func TestWorkersConcurrentShutdownWaitsForHandBack(t *testing.T) {
	for _, handBack := range []bool{true, false} {
		t.Run(fmt.Sprint("HandBack=", handBack), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				var back atomic.Int64
				w := bulkhead.NewWorkers(1, bulkhead.WorkersConfig{
					HandBack: handBack,
					OnUnstarted: func(string, bulkhead.Job, error) {
						<-release
						back.Add(1)
					},
				})
				block := make(chan struct{})
				mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
					select {
					case <-block:
					case <-ctx.Done():
					}
					return nil
				})
				for range 3 {
					mustSubmit(t, w, bulkhead.DefaultClass, func(context.Context) error { return nil })
				}
				synctest.Wait()
				first := make(chan error, 1)
				if handBack {
					go func() { first <- w.Shutdown(context.Background()) }()
				} else {
					go func() { first <- w.Shutdown(canceled()) }() // hands back at once
				}
				synctest.Wait() // the first Shutdown is in OnUnstarted
				close(block)
				second := make(chan error, 1)
				go func() { second <- w.Shutdown(context.Background()) }()
				synctest.Wait()
				select {
				case err := <-second:
					t.Errorf("HandBack %v: second Shutdown = %v while the backlog was being handed back (%d of 3 back)", handBack, err, back.Load())
					second <- err
				default:
				}
				close(release)
				<-first
				<-second
				if back.Load() != 3 {
					t.Errorf("%d handed back, want 3", back.Load())
				}
			})
		})
	}
}

// TestWorkersOnUnstartedGetsTheJob: every job that never runs comes back to
// OnUnstarted as it was submitted, its Value and its Run, whatever the reason:
// HandBack, Shutdown's context ending, the Pace or the Gate failing.
func TestWorkersOnUnstartedGetsTheJob(t *testing.T) {
	refusal := errors.New("store unavailable")
	for _, tc := range []struct {
		name     string
		cfg      bulkhead.WorkersConfig
		shutdown func() context.Context
		want     error
	}{
		{"hand back", bulkhead.WorkersConfig{HandBack: true}, context.Background, bulkhead.ErrClosed},
		{"deadline", bulkhead.WorkersConfig{}, canceled, bulkhead.ErrClosed},
		{"pace", bulkhead.WorkersConfig{Pace: failing{refusal}}, context.Background, refusal},
		{"gate", bulkhead.WorkersConfig{Gate: failing{refusal}}, context.Background, refusal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				type msg struct{ id int }
				block := make(chan struct{})
				var mu sync.Mutex
				ran := map[int]bool{}
				back := map[int]error{}
				cfg := tc.cfg
				cfg.OnUnstarted = func(class string, job bulkhead.Job, err error) {
					m, ok := job.Value.(*msg)
					if !ok || class != bulkhead.DefaultClass {
						t.Errorf("OnUnstarted(%q, Value %#v): want the default class and a *msg", class, job.Value)
						return
					}
					mu.Lock()
					back[m.id] = err
					if len(back) == 5 {
						close(block) // the running job may return now
					}
					mu.Unlock()
					job.Run(context.Background()) // the Run submitted with it
				}
				w := bulkhead.NewWorkers(1, cfg)
				if tc.cfg.Pace == nil && tc.cfg.Gate == nil {
					mustSubmit(t, w, bulkhead.DefaultClass, func(ctx context.Context) error {
						select {
						case <-block:
						case <-ctx.Done():
						}
						return nil
					})
					synctest.Wait()
				}
				for id := range 5 {
					err := w.Submit(t.Context(), bulkhead.DefaultClass, bulkhead.Job{
						Run: func(context.Context) error {
							mu.Lock()
							ran[id] = true
							mu.Unlock()
							return nil
						},
						Value: &msg{id},
					})
					if err != nil {
						t.Fatalf("Submit %d = %v", id, err)
					}
				}
				synctest.Wait()
				if err := w.Shutdown(tc.shutdown()); (err != nil) != (tc.name == "deadline") {
					t.Errorf("Shutdown = %v", err)
				}
				for id := range 5 {
					if err, ok := back[id]; !ok || err != tc.want || !ran[id] {
						t.Errorf("job %d: handed back %v with %v, its Run called %v; want true, %v, true", id, ok, err, ran[id], tc.want)
					}
				}
			})
		})
	}
}
