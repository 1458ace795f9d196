package breaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// prober is a Config.Probe whose outcome the test sets: a store still gone
// (the probe waits until its context ends), refused, or back.
type prober struct {
	mode  atomic.Int32 // 0 back, 1 hangs until its context ends, 2 refused
	calls atomic.Int64
}

func (p *prober) probe(ctx context.Context) error {
	p.calls.Add(1)
	switch p.mode.Load() {
	case 1:
		<-ctx.Done()
		return ctx.Err()
	case 2:
		return errRefused
	}
	return nil
}

// TestProbeOffTheCallersPath: with Config.Probe, once the open period ends no
// caller waits on the store: the call that finds the period over starts the
// breaker's probe and is answered by its policy at once (no time passes in
// the bubble), as is every call while the probe runs; a probe that times out
// opens the breaker again, a probe that succeeds closes it, and only then do
// callers' calls reach the store. The probe's goroutine ends with it
// (synctest.Test fails on a goroutine left behind).
func TestProbeOffTheCallersPath(t *testing.T) {
	for _, p := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen, breaker.FailLocal} {
		t.Run(p.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var pr prober
				pr.mode.Store(1) // frozen: a probe waits its whole CallTimeout
				b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, CallTimeout: 250 * time.Millisecond, Probe: pr.probe, Logger: discard})
				var s store
				s.set(errRefused)
				breaker.Do(context.Background(), b, p, s.call, local) // trips
				wantState(t, b, breaker.StateOpen)
				time.Sleep(time.Second + time.Nanosecond)

				calls := s.calls.Load()
				start := time.Now()
				for i := range 5 {
					v, src, err := breaker.Do(context.Background(), b, p, s.call, local)
					if took := time.Since(start); took != 0 {
						t.Fatalf("call %d after the open period waited %v, want 0 (the probe is the breaker's)", i, took)
					}
					wantAnswer(t, p, v, src, err, breaker.StateHalfOpen, 250*time.Millisecond)
				}
				if n := s.calls.Load() - calls; n != 0 {
					t.Fatalf("%d callers' calls reached the store while the breaker probed it", n)
				}
				synctest.Wait() // the probe is waiting on its context
				if n := pr.calls.Load(); n != 1 {
					t.Fatalf("%d probes running, want 1", n)
				}
				time.Sleep(250 * time.Millisecond)
				synctest.Wait()
				wantState(t, b, breaker.StateOpen) // the probe timed out
				if st := b.Stats(); st.Trips != 2 || st.Probes != 1 || st.ProbeFailures != 1 {
					t.Fatalf("after a timed-out probe: %+v, want 2 trips, 1 probe, 1 failed", st)
				}

				// Redis back: the next probe closes the breaker; callers reach the store again.
				pr.mode.Store(0)
				time.Sleep(time.Second + time.Nanosecond)
				_, src, _ := breaker.Do(context.Background(), b, p, s.call, local)
				if src == breaker.FromStore {
					t.Fatalf("the call that started the probe went to the store")
				}
				synctest.Wait()
				wantState(t, b, breaker.StateClosed)
				s.set(nil)
				if v, src, err := breaker.Do(context.Background(), b, p, s.call, local); v != 42 || src != breaker.FromStore || err != nil {
					t.Fatalf("closed by its probe: Do = %v, %v, %v, want 42 from the store", v, src, err)
				}
				if st := b.Stats(); st.Probes != 2 || st.ProbeFailures != 1 || st.Transitions != 5 {
					t.Fatalf("Stats() = %+v, want 2 probes (1 failed), 5 transitions", st)
				}
			})
		})
	}
}

// wantAnswer checks a policy's answer without the store: FailClosed an
// *OpenError in state with delay, FailOpen the zero value, FailLocal the
// fallback's 7.
func wantAnswer(t *testing.T, p breaker.Policy, v int, src breaker.Source, err error, state breaker.State, delay time.Duration) {
	t.Helper()
	switch p {
	case breaker.FailClosed:
		oe, ok := errors.AsType[*breaker.OpenError](err)
		if !ok || src != breaker.FromFailClosed || oe.State != state || oe.Delay != delay {
			t.Fatalf("FailClosed: Do = %v, %v, %v, want an *OpenError in %v with Delay %v", v, src, err, state, delay)
		}
	case breaker.FailOpen:
		if v != 0 || src != breaker.FromFailOpen || err != nil {
			t.Fatalf("FailOpen: Do = %v, %v, %v, want 0, fail_open, nil", v, src, err)
		}
	case breaker.FailLocal:
		if v != 7 || src != breaker.FromFailLocal || err != nil {
			t.Fatalf("FailLocal: Do = %v, %v, %v, want 7, fail_local, nil", v, src, err)
		}
	}
}

// TestProbesCloseAfterHalfOpenProbesSuccesses: HalfOpenProbes probes in a
// row close the breaker, one at a time, callers answered by policy meanwhile;
// a refused probe among them opens it again at once.
func TestProbesCloseAfterHalfOpenProbesSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pr prober
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, HalfOpenProbes: 3, Probe: pr.probe, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		pr.mode.Store(2)
		time.Sleep(time.Second + time.Nanosecond)
		do(b, &s) // starts a probe, refused: open again
		synctest.Wait()
		wantState(t, b, breaker.StateOpen)

		pr.mode.Store(0)
		time.Sleep(time.Second + time.Nanosecond)
		calls := s.calls.Load()
		do(b, &s)
		synctest.Wait()
		wantState(t, b, breaker.StateClosed)
		if st := b.Stats(); st.Probes != 4 || st.ProbeFailures != 1 {
			t.Fatalf("Stats() = %+v, want 4 probes (1 refused, then 3 to close)", st)
		}
		if s.calls.Load() != calls {
			t.Fatalf("a caller's call reached the store while half-open")
		}
	})
}

// TestProbeWithoutCallTimeout: a probe is bounded by DefaultCallTimeout when
// the breaker's CallTimeout is off, so its goroutine always ends.
func TestProbeWithoutCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pr prober
		pr.mode.Store(1)
		b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Jitter: -1, CallTimeout: -1, Probe: pr.probe, Logger: discard})
		var s store
		s.set(errRefused)
		do(b, &s)
		time.Sleep(time.Second + time.Nanosecond)
		do(b, &s)
		synctest.Wait()
		time.Sleep(breaker.DefaultCallTimeout - time.Nanosecond)
		synctest.Wait()
		if st := b.Stats(); st.ProbeFailures != 0 {
			t.Fatalf("probe failed before DefaultCallTimeout: %+v", st)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		wantState(t, b, breaker.StateOpen)
		if st := b.Stats(); st.ProbeFailures != 1 {
			t.Fatalf("after DefaultCallTimeout: %+v, want the probe timed out", st)
		}
	})
}
