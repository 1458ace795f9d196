package breaker_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

var discard = slog.New(slog.DiscardHandler)

// errRefused is what a dial to a dead Redis returns.
var errRefused error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

var errDenied = errors.New("limiter: denied")

// store is a fake store call whose outcome the test sets, counting its calls.
type store struct {
	err   atomic.Pointer[error]
	calls atomic.Int64
}

func (s *store) set(err error) { s.err.Store(&err) }

func (s *store) call(ctx context.Context) (int, error) {
	s.calls.Add(1)
	if p := s.err.Load(); p != nil && *p != nil {
		return 0, *p
	}
	return 42, nil
}

func local(context.Context) (int, error) { return 7, nil }

// do calls Do with FailClosed and returns only the error.
func do(b *breaker.Breaker, s *store) error {
	_, _, err := breaker.Do(context.Background(), b, breaker.FailClosed, s.call, nil)
	return err
}

func wantState(t *testing.T, b *breaker.Breaker, want breaker.State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() = %v, want %v", got, want)
	}
}

// retryAfter returns the RetryAfter of a FailClosed call on an open breaker.
func retryAfter(t *testing.T, b *breaker.Breaker) time.Duration {
	t.Helper()
	var s store
	err := do(b, &s)
	oe, ok := errors.AsType[*breaker.OpenError](err)
	if !ok {
		t.Fatalf("Do on an open breaker = %v, want *OpenError", err)
	}
	if s.calls.Load() != 0 {
		t.Fatalf("Do on an open breaker called the store")
	}
	return oe.RetryAfter()
}

func TestTripOpenHalfOpenCloseTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 3, OpenDuration: time.Second, Jitter: -1, Logger: discard})
		var s store
		s.set(errRefused)

		// Two failures, a success (resets the run), then three failures trip it.
		for i, step := range []struct {
			err  error
			want breaker.State
		}{
			{errRefused, breaker.StateClosed},
			{errRefused, breaker.StateClosed},
			{nil, breaker.StateClosed},
			{errRefused, breaker.StateClosed},
			{errRefused, breaker.StateClosed},
			{errRefused, breaker.StateOpen},
		} {
			s.set(step.err)
			do(b, &s)
			if got := b.State(); got != step.want {
				t.Fatalf("step %d: State() = %v, want %v", i, got, step.want)
			}
		}
		calls := s.calls.Load()

		if got := retryAfter(t, b); got != time.Second {
			t.Fatalf("RetryAfter right after the trip = %v, want 1s", got)
		}
		time.Sleep(999 * time.Millisecond)
		wantState(t, b, breaker.StateOpen)
		if got := retryAfter(t, b); got != time.Millisecond {
			t.Fatalf("RetryAfter 999ms after the trip = %v, want 1ms", got)
		}
		time.Sleep(time.Millisecond)
		wantState(t, b, breaker.StateOpen) // open through its last instant, as gobreaker is
		time.Sleep(time.Nanosecond)
		wantState(t, b, breaker.StateHalfOpen)
		if n := s.calls.Load(); n != calls {
			t.Fatalf("store called %d times while open, want 0", n-calls)
		}

		// The probe succeeds: closed.
		s.set(nil)
		if err := do(b, &s); err != nil {
			t.Fatalf("probe: %v", err)
		}
		wantState(t, b, breaker.StateClosed)
		st := b.Stats()
		if st.Trips != 1 || st.Transitions != 3 || st.StoreFailures != 5 || st.FailClosed != 7 {
			t.Fatalf("Stats() = %+v, want 1 trip, 3 transitions, 5 store failures, 7 rejections (5 failed calls, 2 while open)", st)
		}
	})
}

func TestHalfOpenProbeFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		wantState(t, b, breaker.StateOpen)
		time.Sleep(time.Second + 1)
		wantState(t, b, breaker.StateHalfOpen)
		do(b, &s) // the probe fails
		wantState(t, b, breaker.StateOpen)
		if got := retryAfter(t, b); got != time.Second {
			t.Fatalf("RetryAfter after a failed probe = %v, want 1s (no growth configured)", got)
		}
	})
}

// TestOpenDurationGrows follows a long outage: each failed probe doubles the
// open time up to the cap; the breaker stays open for the whole grown period
// although gobreaker's own timer is only OpenDuration; a close resets it.
func TestOpenDurationGrows(t *testing.T) {
	for _, jitter := range []float64{-1, 0.5} {
		t.Run("jitter="+strings.TrimSuffix(strings.TrimSuffix(time.Duration(jitter*1e9).String(), "s"), "0"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := breaker.New("t", breaker.Config{
					ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: 5 * time.Second,
					Jitter: jitter, Logger: discard,
				})
				var s store
				s.set(errRefused)
				do(b, &s)
				for k, base := range []time.Duration{1, 2, 4, 5, 5, 5} {
					base *= time.Second
					open := retryAfter(t, b)
					hi := base
					if jitter > 0 {
						hi = base + time.Duration(jitter*float64(base))
					}
					if open < base || open > hi || (jitter > 0 && open == hi) {
						t.Fatalf("trip %d: open for %v, want in [%v, %v)", k+1, open, base, hi)
					}
					time.Sleep(open - time.Nanosecond)
					wantState(t, b, breaker.StateOpen)
					time.Sleep(2 * time.Nanosecond)
					wantState(t, b, breaker.StateHalfOpen)
					do(b, &s) // probe fails: open again, longer
				}
				// Recovery resets the open time.
				time.Sleep(10 * time.Second)
				s.set(nil)
				if err := do(b, &s); err != nil {
					t.Fatalf("probe after recovery: %v", err)
				}
				wantState(t, b, breaker.StateClosed)
				s.set(errRefused)
				do(b, &s)
				if open := retryAfter(t, b); open < time.Second || open > time.Second+time.Duration(max(jitter, 0)*1e9) {
					t.Fatalf("open time after a close = %v, want back to 1s (+jitter)", open)
				}
			})
		})
	}
}

func TestJitterSpreadsOpenTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := map[time.Duration]bool{}
		for range 20 {
			b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, Logger: discard})
			var s store
			s.set(errRefused)
			do(b, &s)
			d := retryAfter(t, b)
			if d < breaker.DefaultOpenDuration || d >= breaker.DefaultOpenDuration*11/10 {
				t.Fatalf("default open time %v, want in [1s, 1.1s)", d)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("20 breakers opened for only %d distinct durations; jitter not applied?", len(seen))
		}
	})
}

func TestHalfOpenLetsProbesThroughOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, HalfOpenProbes: 2, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		time.Sleep(2 * time.Second)

		release := make(chan struct{})
		var probes atomic.Int64
		slow := func(ctx context.Context) (int, error) {
			probes.Add(1)
			<-release
			return 1, nil
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, src, err := breaker.Do(context.Background(), b, breaker.FailClosed, slow, nil); err != nil || src != breaker.FromStore {
					t.Errorf("probe = %v, %v; want FromStore, nil", src, err)
				}
			})
		}
		synctest.Wait()
		if n := probes.Load(); n != 2 {
			t.Fatalf("%d probes in flight, want 2", n)
		}
		wantState(t, b, breaker.StateHalfOpen)
		_, src, err := breaker.Do(context.Background(), b, breaker.FailClosed, slow, nil)
		oe, ok := errors.AsType[*breaker.OpenError](err)
		if !ok || src != breaker.FromFailClosed || oe.State != breaker.StateHalfOpen {
			t.Fatalf("third call while half-open = %v, %v; want FromFailClosed, *OpenError in half-open", src, err)
		}
		if !errors.Is(err, breaker.ErrUnavailable) || !errors.Is(err, gobreaker.ErrTooManyRequests) || errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("half-open rejection %v: want Is ErrUnavailable and ErrTooManyRequests, not ErrOpenState", err)
		}
		if got := oe.RetryAfter(); got != breaker.DefaultCallTimeout {
			t.Fatalf("half-open RetryAfter = %v, want the call timeout %v", got, breaker.DefaultCallTimeout)
		}
		// FailOpen and FailLocal callers are answered by their policies meanwhile.
		if _, src, err := breaker.Do(context.Background(), b, breaker.FailOpen, slow, nil); src != breaker.FromFailOpen || err != nil {
			t.Fatalf("FailOpen while probes in flight = %v, %v; want FromFailOpen, nil", src, err)
		}
		if v, src, err := breaker.Do(context.Background(), b, breaker.FailLocal, slow, local); v != 7 || src != breaker.FromFailLocal || err != nil {
			t.Fatalf("FailLocal while probes in flight = %v, %v, %v; want 7, FromFailLocal, nil", v, src, err)
		}
		close(release)
		wg.Wait()
		wantState(t, b, breaker.StateClosed)
		if n := probes.Load(); n != 2 {
			t.Fatalf("store called %d times, want only the 2 probes", n)
		}
	})
}

func TestFailureRatioOverRollingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{
			ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 10,
			Window: 10 * time.Second, WindowBuckets: 10, Logger: discard,
		})
		var s store
		// 9 calls, 5 failing: fewer than MinCalls, stays closed.
		for i := range 9 {
			s.set(nil)
			if i%2 == 0 {
				s.set(errRefused)
			}
			do(b, &s)
		}
		wantState(t, b, breaker.StateClosed)
		// The window rolls past them: the next failures start from scratch.
		time.Sleep(11 * time.Second)
		s.set(errRefused)
		for range 4 {
			do(b, &s)
		}
		s.set(nil)
		for range 5 {
			do(b, &s)
		}
		wantState(t, b, breaker.StateClosed) // 4 of 9
		s.set(errRefused)
		do(b, &s) // 5 of 10
		wantState(t, b, breaker.StateOpen)

		// Denials and redis.Nil are answers: they count as successes.
		b = breaker.New("t", breaker.Config{ConsecutiveFailures: -1, FailureRatio: 0.5, MinCalls: 4, Logger: discard})
		for _, err := range []error{errRefused, redis.Nil, errDenied, errDenied, errRefused} {
			s.set(err)
			do(b, &s)
		}
		wantState(t, b, breaker.StateClosed) // 2 of 5
	})
}

func TestPolicies(t *testing.T) {
	tripped := func() *breaker.Breaker {
		b := breaker.New("redis:1", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Minute, Jitter: -1, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		return b
	}
	errLocal := errors.New("local: denied")
	localDeny := func(context.Context) (int, error) { return 0, errLocal }

	t.Run("open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := tripped()
			var s store
			ctx := context.Background()

			v, src, err := breaker.Do(ctx, b, breaker.FailClosed, s.call, local)
			if v != 0 || src != breaker.FromFailClosed || !errors.Is(err, breaker.ErrUnavailable) || !errors.Is(err, gobreaker.ErrOpenState) {
				t.Errorf("FailClosed = %v, %v, %v; want 0, FromFailClosed, ErrUnavailable and ErrOpenState", v, src, err)
			}
			var ra interface{ RetryAfter() time.Duration }
			if !errors.As(err, &ra) || ra.RetryAfter() != time.Minute {
				t.Errorf("FailClosed error %v: RetryAfter via interface, want 1m", err)
			}
			if oe, _ := errors.AsType[*breaker.OpenError](err); oe == nil || oe.Name != "redis:1" || oe.State != breaker.StateOpen {
				t.Errorf("FailClosed error = %#v, want *OpenError named redis:1, open", err)
			}

			v, src, err = breaker.Do(ctx, b, breaker.FailOpen, s.call, local)
			if v != 0 || src != breaker.FromFailOpen || err != nil {
				t.Errorf("FailOpen = %v, %v, %v; want 0 (zero T, fallback unused), FromFailOpen, nil", v, src, err)
			}
			v, src, err = breaker.Do(ctx, b, breaker.FailLocal, s.call, local)
			if v != 7 || src != breaker.FromFailLocal || err != nil {
				t.Errorf("FailLocal = %v, %v, %v; want 7, FromFailLocal, nil", v, src, err)
			}
			_, src, err = breaker.Do(ctx, b, breaker.FailLocal, s.call, localDeny)
			if src != breaker.FromFailLocal || err != errLocal {
				t.Errorf("FailLocal with a denying fallback = %v, %v; want FromFailLocal, the fallback's error", src, err)
			}
			if n := s.calls.Load(); n != 0 {
				t.Errorf("store called %d times while open", n)
			}
			st := b.Stats()
			if st.FailClosed != 2 || st.FailOpen != 1 || st.FailLocal != 2 || st.RetryAfter != time.Minute || st.State != breaker.StateOpen {
				t.Errorf("Stats() = %+v; want 2 rejections (the tripping call and one while open), 1 degraded, 2 fallbacks, open 1m", st)
			}
		})
	})

	// The breaker is closed but the call itself fails: the policy applies to it.
	t.Run("store failure while closed", func(t *testing.T) {
		b := breaker.New("redis:1", breaker.Config{Logger: discard})
		var s store
		s.set(errRefused)
		ctx := context.Background()

		v, src, err := breaker.Do(ctx, b, breaker.FailClosed, s.call, local)
		se, ok := errors.AsType[*breaker.StoreError](err)
		if v != 0 || src != breaker.FromFailClosed || !ok || se.Err != errRefused || !errors.Is(err, breaker.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("FailClosed = %v, %v, %v; want 0, FromFailClosed, *StoreError wrapping ErrUnavailable and the cause", v, src, err)
		}
		if errors.Is(err, gobreaker.ErrOpenState) {
			t.Errorf("store failure %v matches ErrOpenState", err)
		}
		if v, src, err = breaker.Do(ctx, b, breaker.FailOpen, s.call, local); v != 0 || src != breaker.FromFailOpen || err != nil {
			t.Errorf("FailOpen = %v, %v, %v; want 0, FromFailOpen, nil", v, src, err)
		}
		if v, src, err = breaker.Do(ctx, b, breaker.FailLocal, s.call, local); v != 7 || src != breaker.FromFailLocal || err != nil {
			t.Errorf("FailLocal = %v, %v, %v; want 7, FromFailLocal, nil", v, src, err)
		}
		if st := b.Stats(); st.StoreFailures != 3 || st.State != breaker.StateClosed || st.FailClosed != 1 || st.FailOpen != 1 || st.FailLocal != 1 {
			t.Errorf("Stats() = %+v; want 3 store failures, still closed, one answer by each policy", st)
		}
	})

	// Answers from a healthy store are returned as they are, whatever the policy.
	t.Run("answers pass through", func(t *testing.T) {
		for _, p := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen, breaker.FailLocal} {
			b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, Logger: discard})
			for _, want := range []error{nil, errDenied, redis.Nil} {
				var s store
				s.set(want)
				_, src, err := breaker.Do(context.Background(), b, p, s.call, local)
				if err != want || src != breaker.FromStore {
					t.Errorf("%v: Do with a call returning %v = %v, %v; want it as is, FromStore", p, want, src, err)
				}
			}
			if st := b.Stats(); st.StoreFailures != 0 || st.State != breaker.StateClosed || st.FailLocal+st.FailOpen+st.FailClosed != 0 {
				t.Errorf("%v: Stats() = %+v, want nothing counted", p, st)
			}
		}
	})
}

func TestCallerContextIsNotAStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, CallTimeout: time.Second, Logger: discard})
		hang := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }

		// Already done: not called.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		_, src, err := breaker.Do(ctx, b, breaker.FailLocal, func(context.Context) (int, error) { called = true; return 0, nil }, local)
		if err != context.Canceled || src != breaker.FromStore || called {
			t.Fatalf("Do with a done ctx = %v, %v (called %v); want context.Canceled, FromStore, not called", src, err, called)
		}

		// Cancelled while in flight.
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		_, src, err = breaker.Do(ctx, b, breaker.FailLocal, hang, local)
		if err != context.Canceled || src != breaker.FromStore {
			t.Fatalf("Do cancelled in flight = %v, %v; want context.Canceled as is, FromStore", src, err)
		}

		// The caller's deadline, sooner than CallTimeout.
		start := time.Now()
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, src, err = breaker.Do(ctx, b, breaker.FailLocal, hang, local)
		cancel()
		if err != context.DeadlineExceeded || src != breaker.FromStore || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Do past the caller's deadline = %v, %v after %v; want DeadlineExceeded as is, FromStore, after 100ms", src, err, time.Since(start))
		}
		// A call that reports the caller's deadline as a socket timeout (as
		// go-redis does) before the context's own timer fired is the caller's too:
		// Do returns the caller's context error, not the socket's.
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, src, err = breaker.Do(ctx, b, breaker.FailClosed, func(ctx context.Context) (int, error) {
			d, _ := ctx.Deadline()
			time.Sleep(time.Until(d))
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}, nil)
		cancel()
		if src != breaker.FromStore || err != context.DeadlineExceeded {
			t.Fatalf("socket timeout at the caller's deadline = %v, %v; want context.DeadlineExceeded, unwrapped", src, err)
		}
		wantState(t, b, breaker.StateClosed)
		if st := b.Stats(); st.StoreFailures != 0 {
			t.Fatalf("Stats().StoreFailures = %d, want 0", st.StoreFailures)
		}
	})
}

func TestCallTimeout(t *testing.T) {
	hang := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
	t.Run("expires", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, CallTimeout: 200 * time.Millisecond, Logger: discard})
			// The caller's deadline is later: ours applies and counts.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			start := time.Now()
			_, src, err := breaker.Do(ctx, b, breaker.FailClosed, hang, nil)
			if el := time.Since(start); el != 200*time.Millisecond {
				t.Fatalf("Do returned after %v, want the 200ms call timeout", el)
			}
			se, ok := errors.AsType[*breaker.StoreError](err)
			if src != breaker.FromFailClosed || !ok || !errors.Is(err, breaker.ErrTimeout) || !errors.Is(err, breaker.ErrUnavailable) || !se.Timeout() {
				t.Fatalf("Do past CallTimeout = %v, %v; want FromFailClosed, a timeout *StoreError matching ErrTimeout and ErrUnavailable", src, err)
			}
			// The caller's context is not done: the error must not look like it is.
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("Do past CallTimeout = %v matches context.DeadlineExceeded (caller ctx %v)", err, ctx.Err())
			}
			if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
				t.Fatalf("Do past CallTimeout = %v, not a timeout net.Error", err)
			}
			wantState(t, b, breaker.StateOpen)
		})
	})
	t.Run("call ignores ctx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, CallTimeout: 200 * time.Millisecond, Logger: discard})
			_, src, _ := breaker.Do(context.Background(), b, breaker.FailOpen, func(context.Context) (int, error) {
				time.Sleep(300 * time.Millisecond)
				return 0, errDenied // a late answer is still a slow store
			}, nil)
			if src != breaker.FromFailOpen {
				t.Fatalf("late answer: Source %v, want FromFailOpen", src)
			}
			wantState(t, b, breaker.StateOpen)
		})
	})
	t.Run("deadlines seen by the call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			deadline := func(b *breaker.Breaker, ctx context.Context) (time.Duration, bool) {
				var d time.Time
				var ok bool
				breaker.Do(ctx, b, breaker.FailClosed, func(ctx context.Context) (int, error) { d, ok = ctx.Deadline(); return 0, nil }, nil)
				return time.Until(d), ok
			}
			def := breaker.New("t", breaker.Config{})
			if d, ok := deadline(def, context.Background()); !ok || d != breaker.DefaultCallTimeout {
				t.Errorf("default: call deadline in %v (%v), want %v", d, ok, breaker.DefaultCallTimeout)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if d, ok := deadline(def, ctx); !ok || d != 50*time.Millisecond {
				t.Errorf("caller deadline sooner: call deadline in %v (%v), want the caller's 50ms", d, ok)
			}
			// Later, after the breaker has not looked at the clock for a while:
			// a sooner caller deadline is still kept, a later one still bounded.
			time.Sleep(time.Hour)
			for _, caller := range []time.Duration{50 * time.Millisecond, 249 * time.Millisecond, 251 * time.Millisecond, time.Minute} {
				ctx, cancel := context.WithTimeout(context.Background(), caller)
				want := min(caller, breaker.DefaultCallTimeout)
				if d, ok := deadline(def, ctx); !ok || d != want {
					t.Errorf("caller deadline in %v, an hour on: call deadline in %v (%v), want %v", caller, d, ok, want)
				}
				cancel()
				time.Sleep(time.Minute)
			}
			off := breaker.New("t", breaker.Config{CallTimeout: -1})
			if _, ok := deadline(off, context.Background()); ok {
				t.Errorf("CallTimeout < 0: the call got a deadline")
			}
		})
	})
}

// TestStateChangeObserverCallsBackWithoutDeadlock is the regression test for
// gobreaker calling OnStateChange under its mutex: an Observer of
// transitions that calls back into the breaker (State, Stats, Do) must not
// deadlock.
func TestStateChangeObserverCallsBackWithoutDeadlock(t *testing.T) {
	type change struct{ from, to string }
	var (
		b       *breaker.Breaker
		changes []change
		inHook  atomic.Bool
	)
	b = breaker.New("t", breaker.Config{
		ConsecutiveFailures: 1, OpenDuration: 20 * time.Millisecond, Jitter: -1, Logger: discard,
		Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
			if e.Kind != floodgate.KindStateChange {
				return
			}
			if e.Component != floodgate.ComponentBreaker {
				t.Errorf("state change from Component %q, want breaker", e.Component)
			}
			if !inHook.CompareAndSwap(false, true) {
				t.Errorf("Observer called concurrently or recursively")
			}
			defer inHook.Store(false)
			changes = append(changes, change{e.From, e.To})
			// Call back into the breaker; State may itself cause a transition.
			_ = b.State()
			_ = b.Stats()
			breaker.Do(context.Background(), b, breaker.FailOpen, func(context.Context) (int, error) { return 0, nil }, nil)
		}),
	})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var s store
		s.set(errRefused)
		do(b, &s) // closed -> open, hook runs
		for b.State() == breaker.StateOpen {
			time.Sleep(time.Millisecond) // real time: this test must not use synctest, a deadlock would not be detected
		}
		// The hook's own calls closed it: half-open -> closed happened inside the hook.
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: the breaker did not return within 10s of a state change whose hook calls back into it")
	}
	want := []change{{floodgate.StateClosed, floodgate.StateOpen}, {floodgate.StateOpen, floodgate.StateHalfOpen}, {floodgate.StateHalfOpen, floodgate.StateClosed}}
	if len(changes) != len(want) {
		t.Fatalf("transitions %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("transitions %v, want %v", changes, want)
		}
	}
}

// recorder is a slog.Handler that keeps its records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		line := rec.Level.String() + " " + rec.Message
		rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		out = append(out, line)
	}
	return out
}

func TestOneLogLinePerTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := breaker.New("redis:1", breaker.Config{ConsecutiveFailures: 2, OpenDuration: time.Second, Jitter: -1, Logger: slog.New(&rec)})
		var s store
		s.set(errRefused)
		ctx := context.Background()
		for range 100 {
			breaker.Do(ctx, b, breaker.FailOpen, s.call, nil)
		}
		for range 50 {
			breaker.Do(ctx, b, breaker.FailLocal, s.call, local)
		}
		time.Sleep(2 * time.Second)
		s.set(nil)
		for range 100 {
			breaker.Do(ctx, b, breaker.FailOpen, s.call, nil)
		}
		want := []string{
			"WARN breaker: open limiter=redis:1 component=breaker from=closed to=open open_for=1s trips=1 store_failures=2 fail_closed=0 fail_open=2 fail_local=0",
			"INFO breaker: half_open limiter=redis:1 component=breaker from=open to=half_open store_failures=0 fail_closed=0 fail_open=98 fail_local=50",
			"INFO breaker: closed limiter=redis:1 component=breaker from=half_open to=closed store_failures=0 fail_closed=0 fail_open=0 fail_local=0",
		}
		got := rec.lines()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestHalfOpenProbeInFlight: while the one half-open probe is in flight, other
// calls are answered by their policy without reaching the store.
func TestHalfOpenProbeInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, CallTimeout: -1, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		wantState(t, b, breaker.StateOpen)
		time.Sleep(time.Second + 1)
		release := make(chan struct{})
		probed := make(chan error)
		go func() {
			_, _, err := breaker.Do(t.Context(), b, breaker.FailClosed, func(context.Context) (int, error) {
				<-release
				return 1, nil
			}, nil)
			probed <- err
		}()
		synctest.Wait() // the probe is in flight
		for _, tc := range []struct {
			p   breaker.Policy
			src breaker.Source
		}{{breaker.FailClosed, breaker.FromFailClosed}, {breaker.FailOpen, breaker.FromFailOpen}, {breaker.FailLocal, breaker.FromFailLocal}} {
			_, src, err := breaker.Do(t.Context(), b, tc.p, s.call, local)
			if src != tc.src || (err != nil) != (tc.p == breaker.FailClosed) {
				t.Fatalf("Do(%v) with the probe in flight = %v, %v; want %v", tc.p, src, err, tc.src)
			}
			if tc.p == breaker.FailClosed && !errors.Is(err, gobreaker.ErrTooManyRequests) {
				t.Fatalf("Do(FailClosed) error %v does not match ErrTooManyRequests", err)
			}
		}
		if n := s.calls.Load(); n != 1 {
			t.Fatalf("store calls = %d, want 1 (only the trip)", n)
		}
		close(release)
		if err := <-probed; err != nil {
			t.Fatalf("probe: %v", err)
		}
		wantState(t, b, breaker.StateClosed)
	})
}

func TestPanicInCallCountsAndRepanics(t *testing.T) {
	b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, Logger: discard})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recover() = %v, want boom", r)
			}
		}()
		breaker.Do(context.Background(), b, breaker.FailClosed, func(context.Context) (int, error) { panic("boom") }, nil)
	}()
	wantState(t, b, breaker.StateOpen)
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  breaker.Config
		want string
	}{
		{"no trip rule", breaker.Config{ConsecutiveFailures: -1}, "breaker: no trip rule"},
		{"ratio above 1", breaker.Config{FailureRatio: 1.5}, "breaker: FailureRatio not in [0, 1]"},
		{"negative ratio", breaker.Config{FailureRatio: -0.1}, "breaker: FailureRatio not in [0, 1]"},
		{"negative MinCalls", breaker.Config{MinCalls: -1}, "breaker: MinCalls < 0"},
		{"negative Window", breaker.Config{Window: -time.Second}, "breaker: Window < 0"},
		{"negative buckets", breaker.Config{WindowBuckets: -1}, "breaker: WindowBuckets < 0"},
		{"buckets finer than 1ns", breaker.Config{FailureRatio: 0.5, Window: 5, WindowBuckets: 10}, "breaker: WindowBuckets > Window"},
		{"negative OpenDuration", breaker.Config{OpenDuration: -1}, "breaker: OpenDuration < 0"},
		{"negative MaxOpenDuration", breaker.Config{MaxOpenDuration: -1}, "breaker: MaxOpenDuration < 0"},
		{"jitter above 1", breaker.Config{Jitter: 2}, "breaker: Jitter > 1"},
		{"negative probes", breaker.Config{HalfOpenProbes: -1}, "breaker: HalfOpenProbes < 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q...", err, tc.want)
			}
			defer func() {
				if r := recover(); r != err.Error() {
					t.Fatalf("New panicked with %v, want %q", r, err.Error())
				}
			}()
			breaker.New("t", tc.cfg)
		})
	}
	for _, ok := range []breaker.Config{{}, {ConsecutiveFailures: -1, FailureRatio: 1}, {Jitter: -5, CallTimeout: -1}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", ok, err)
		}
	}
}

func TestMisuseOfDoPanics(t *testing.T) {
	b := breaker.New("t", breaker.Config{})
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"FailLocal without fallback", func() { breaker.Do(context.Background(), b, breaker.FailLocal, local, nil) }, "breaker: FailLocal needs a fallback"},
		{"invalid policy", func() { breaker.Do(context.Background(), b, breaker.Policy(9), local, nil) }, "breaker: invalid Policy Policy(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != tc.want {
					t.Fatalf("panic %v, want %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

func TestZeroBreaker(t *testing.T) {
	var b breaker.Breaker
	if got := b.State(); got != breaker.StateClosed {
		t.Fatalf("zero Breaker State() = %v, want closed", got)
	}
	v, src, err := breaker.Do(context.Background(), &b, breaker.FailClosed, local, nil)
	if v != 7 || src != breaker.FromStore || err != nil {
		t.Fatalf("Do on a zero Breaker = %v, %v, %v", v, src, err)
	}
	if b.Name() != "" {
		t.Fatalf("zero Breaker Name %q", b.Name())
	}
}

func TestSharedBreakerPerCallPolicies(t *testing.T) {
	// One breaker per endpoint; a semaphore failing closed and a meter failing
	// open share it, and each gets its own policy's answer.
	b := breaker.New("redis:1", breaker.Config{ConsecutiveFailures: 2, OpenDuration: time.Minute, Logger: discard})
	var s store
	s.set(errRefused)
	breaker.Do(context.Background(), b, breaker.FailClosed, s.call, nil)
	breaker.Do(context.Background(), b, breaker.FailOpen, s.call, nil)
	wantState(t, b, breaker.StateOpen)
	if _, src, _ := breaker.Do(context.Background(), b, breaker.FailClosed, s.call, nil); src != breaker.FromFailClosed {
		t.Errorf("semaphore's call: %v, want FromFailClosed", src)
	}
	if _, src, _ := breaker.Do(context.Background(), b, breaker.FailOpen, s.call, nil); src != breaker.FromFailOpen {
		t.Errorf("meter's call: %v, want FromFailOpen", src)
	}
}

func TestConcurrentUseRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes atomic.Int64
		b := breaker.New("t", breaker.Config{
			ConsecutiveFailures: 3, OpenDuration: 10 * time.Millisecond, MaxOpenDuration: 40 * time.Millisecond,
			HalfOpenProbes: 2, Logger: discard,
			Observer: floodgate.ObserverFunc(func(e floodgate.Event) {
				if e.Kind == floodgate.KindStateChange {
					changes.Add(1)
				}
			}),
		})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					err := error(nil)
					if (i/20+g)%3 == 0 {
						err = errRefused
					}
					p := breaker.Policy(i % 3)
					breaker.Do(context.Background(), b, p, func(context.Context) (int, error) {
						time.Sleep(time.Millisecond)
						return 0, err
					}, local)
					if i%7 == 0 {
						b.Stats()
					}
				}
			})
		}
		wg.Wait()
		st := b.Stats()
		if st.Transitions == 0 || uint64(changes.Load()) != st.Transitions {
			t.Fatalf("hook saw %d transitions, Stats %d; want equal and > 0", changes.Load(), st.Transitions)
		}
	})
}

// A call admitted before a trip that finishes after OpenDuration moves
// gobreaker itself to half-open early; a grown open period must still hold:
// no caller reaches the store before it ends.
func TestStragglerDoesNotShortenGrownOpenPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := breaker.New("t", breaker.Config{
			ConsecutiveFailures: 1, OpenDuration: time.Second, MaxOpenDuration: 8 * time.Second,
			Jitter: -1, HalfOpenProbes: 2, CallTimeout: -1, Logger: discard,
		})
		var s store
		s.set(errRefused)
		do(b, &s)                   // trip 1: open 1s
		time.Sleep(time.Second + 1) // half-open
		release := make(chan struct{})
		straggled := make(chan struct{})
		go func() { // probe 1, still in flight
			defer close(straggled)
			breaker.Do(t.Context(), b, breaker.FailClosed, func(context.Context) (int, error) {
				<-release
				return 0, nil
			}, nil)
		}()
		synctest.Wait()
		do(b, &s) // probe 2 fails: trip 2, open 2s
		if got := retryAfter(t, b); got != 2*time.Second {
			t.Fatalf("open for %v after the second trip, want 2s", got)
		}
		time.Sleep(1200 * time.Millisecond) // past gobreaker's own 1s timer
		close(release)                      // the slow probe reports now
		<-straggled
		wantState(t, b, breaker.StateOpen)
		s.set(nil)
		before := s.calls.Load()
		if _, src, err := breaker.Do(t.Context(), b, breaker.FailClosed, s.call, nil); src != breaker.FromFailClosed || err == nil {
			t.Fatalf("Do 1.2s into a 2s open period = %v, %v; want FromFailClosed", src, err)
		}
		if s.calls.Load() != before {
			t.Fatal("a call reached the store during the open period")
		}
		time.Sleep(800*time.Millisecond + 1) // open through its last instant, as gobreaker
		if err := do(b, &s); err != nil {
			t.Fatalf("probe after the open period: %v", err)
		}
	})
}

func TestLongestOpen(t *testing.T) {
	for _, tc := range []struct {
		cfg  breaker.Config
		want time.Duration
	}{
		{breaker.Config{}, 1100 * time.Millisecond}, // DefaultOpenDuration, DefaultJitter
		{breaker.Config{OpenDuration: 100 * time.Millisecond, Jitter: -1}, 100 * time.Millisecond},
		{breaker.Config{OpenDuration: time.Second, MaxOpenDuration: 8 * time.Second, Jitter: 0.5}, 12 * time.Second},
		{breaker.Config{OpenDuration: 2 * time.Second, MaxOpenDuration: time.Second, Jitter: -1}, 2 * time.Second},
	} {
		if got := breaker.New("x", tc.cfg).LongestOpen(); got != tc.want {
			t.Errorf("LongestOpen with %+v = %v, want %v", tc.cfg, got, tc.want)
		}
	}
}
