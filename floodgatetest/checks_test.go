package floodgatetest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// wantViolation fails t unless err is a *Violation of check whose text has
// every one of words.
func wantViolation(t *testing.T, err error, check string, words ...string) {
	t.Helper()
	v, ok := errors.AsType[*floodgatetest.Violation](err)
	if !ok {
		t.Fatalf("err = %v; want a *floodgatetest.Violation of %s", err, check)
	}
	if v.Check != check {
		t.Errorf("Violation.Check = %q, want %q", v.Check, check)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("violation %q does not say %q", err, w)
		}
	}
}

// TestNoOverAdmissionGate: pods sharing one semaphore never run more than its
// limit at once; a semaphore per pod (each with the fleet's limit, the classic
// mistake) does, and the check says by how much.
func TestNoOverAdmissionGate(t *testing.T) {
	const limit = 3
	load := floodgatetest.Load{Duration: 10 * time.Second, Hold: 5 * time.Millisecond}
	bound := floodgatetest.Bound{Concurrent: limit}
	t.Run("shared", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sem := semaphore.New(limit, semaphore.Config{})
			fleet := floodgatetest.Fleet{Pods: 4, Callers: 3, New: func(int) floodgatetest.Runner {
				return floodgatetest.GateRunner(sem, 1)
			}}
			rep := floodgatetest.CheckNoOverAdmission(t, fleet, load, bound)
			if rep.MaxConcurrent != limit {
				t.Errorf("MaxConcurrent = %d, want %d (12 callers hammering a semaphore of 3)", rep.MaxConcurrent, limit)
			}
		})
	})
	t.Run("per-pod", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fleet := floodgatetest.Fleet{Pods: 4, Callers: 3, New: func(int) floodgatetest.Runner {
				return floodgatetest.GateRunner(semaphore.New(limit, semaphore.Config{}), 1)
			}}
			rep, err := floodgatetest.NoOverAdmission(t.Context(), fleet, load, bound)
			wantViolation(t, err, "NoOverAdmission", "12 calls ran at once, bound 3")
			if rep.MaxConcurrent != 4*limit {
				t.Errorf("MaxConcurrent = %d, want %d", rep.MaxConcurrent, 4*limit)
			}
		})
	})
	t.Run("tolerance", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fleet := floodgatetest.Fleet{Pods: 4, Callers: 3, New: func(int) floodgatetest.Runner {
				return floodgatetest.GateRunner(semaphore.New(limit, semaphore.Config{}), 1)
			}}
			_, err := floodgatetest.NoOverAdmission(t.Context(), fleet, load, floodgatetest.Bound{Concurrent: 4, Tolerance: 2})
			if err != nil {
				t.Errorf("12 at once with bound 4 and tolerance 2 (12): %v; want no violation", err)
			}
			_, err = floodgatetest.NoOverAdmission(t.Context(), fleet, load, floodgatetest.Bound{Concurrent: 4, Tolerance: 1.5})
			wantViolation(t, err, "NoOverAdmission", "12 calls ran at once, bound 4 (10 with tolerance 1.5)")
		})
	})
}

// TestNoOverAdmissionRate: pods sharing one meter stay within its bound in
// every window; a meter per pod exceeds it.
func TestNoOverAdmissionRate(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(50), Burst: 10}
	load := floodgatetest.Load{Duration: 10 * time.Second, Pause: 5 * time.Millisecond}
	bound := floodgatetest.Bound{Window: time.Second, Admitted: floodgatetest.RateBound(lim, time.Second)}
	if bound.Admitted != 60 {
		t.Fatalf("RateBound(%v, 1s) = %d, want 60", lim, bound.Admitted)
	}
	t.Run("shared", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := shaper.NewMeter(lim)
			fleet := floodgatetest.Fleet{New: func(int) floodgatetest.Runner { return floodgatetest.RateRunner(m, "k", 1) }}
			rep := floodgatetest.CheckNoOverAdmission(t, fleet, load, bound)
			// 10 at once, then 50 a second: within a second that starts
			// with the burst, exactly the bound.
			if rep.MaxInWindow != 60 {
				t.Errorf("MaxInWindow = %d, want 60", rep.MaxInWindow)
			}
			if rep.Refused == 0 {
				t.Errorf("no call refused: the load did not test the rate")
			}
		})
	})
	t.Run("per-pod", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fleet := floodgatetest.Fleet{New: func(int) floodgatetest.Runner {
				return floodgatetest.RateRunner(shaper.NewMeter(lim), "k", 1)
			}}
			_, err := floodgatetest.NoOverAdmission(t.Context(), fleet, load, bound)
			wantViolation(t, err, "NoOverAdmission", "calls admitted within 1s", "bound 60")
		})
	})
	t.Run("fixed-window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fw := shaper.Limit{Rate: shaper.PerSecond(50)}
			m := shaper.NewFixedWindow(fw)
			fleet := floodgatetest.Fleet{New: func(int) floodgatetest.Runner { return floodgatetest.RateRunner(m, "k", 1) }}
			// Across a window boundary, up to twice the count in a second.
			// (This load spends each window's count at its start, so it
			// sees only the count and a few more.)
			rep := floodgatetest.CheckNoOverAdmission(t, fleet, load, floodgatetest.Bound{Window: time.Second, Admitted: 2 * fw.Rate.Count})
			if rep.MaxInWindow < fw.Rate.Count {
				t.Errorf("MaxInWindow = %d, want at least %d", rep.MaxInWindow, fw.Rate.Count)
			}
		})
	})
}

// TestNoOverAdmissionTestsSomething: a subject that admits nothing is a
// violation, not a pass.
func TestNoOverAdmissionTestsSomething(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := func(context.Context, func(context.Context) error) error {
			return &floodgate.RejectError{Reason: floodgate.ReasonLimited, Delay: time.Millisecond}
		}
		fleet := floodgatetest.Fleet{New: func(int) floodgatetest.Runner { return never }}
		rep, err := floodgatetest.NoOverAdmission(t.Context(), fleet, floodgatetest.Load{}, floodgatetest.Bound{Concurrent: 1})
		wantViolation(t, err, "NoOverAdmission", "no call was admitted", "tested nothing")
		if rep.Refused == 0 || rep.Failed != 0 {
			t.Errorf("report %v: want refusals and no failures", rep)
		}
	})
}

// lyingRate is a Rate whose refusals promise half the true wait.
type lyingRate struct{ floodgatetest.Rate }

func (r lyingRate) Admit(ctx context.Context, key string, n int64) (shaper.Decision, error) {
	d, err := r.Rate.Admit(ctx, key, n)
	if err != nil && !d.Allowed {
		d.RetryAfter /= 2
		return d, d.Err()
	}
	return d, err
}

func TestHonestRetryAfter(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(7), Burst: 3}
	for _, m := range []struct {
		name string
		new  func(shaper.Limit) *shaper.Meter
	}{
		{"gcra", shaper.NewMeter}, {"tokenbucket", shaper.NewTokenBucket},
		{"fixedwindow", shaper.NewFixedWindow}, {"slidinglog", shaper.NewSlidingLog},
		{"slidingcounter", shaper.NewSlidingCounter},
	} {
		t.Run(m.name, func(t *testing.T) {
			lim := lim
			if m.name != "gcra" && m.name != "tokenbucket" {
				lim.Burst = 0
			}
			synctest.Test(t, func(t *testing.T) {
				r := floodgatetest.RateRunner(m.new(lim), "k", 1)
				rep := floodgatetest.CheckRetryAfter(t, r, floodgatetest.RetryCheck{Rounds: 20, Tight: time.Microsecond})
				if rep.Rounds != 20 {
					t.Errorf("Rounds = %d, want 20", rep.Rounds)
				}
			})
		})
	}
	t.Run("limiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			floodgatetest.CheckRetryAfter(t, floodgatetest.RateRunner(shaper.NewLimiter(lim), "", 1), floodgatetest.RetryCheck{Tight: time.Microsecond})
		})
	})
	t.Run("lying", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := floodgatetest.RateRunner(lyingRate{shaper.NewMeter(lim)}, "k", 1)
			_, err := floodgatetest.HonestRetryAfter(t.Context(), r, floodgatetest.RetryCheck{})
			wantViolation(t, err, "HonestRetryAfter", "round 1: refused after 3 admissions with RetryAfter 71.429ms; retried 71.429ms later: refused again")
		})
	})
	t.Run("pessimistic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := shaper.NewMeter(lim)
			r := func(ctx context.Context, fn func(context.Context) error) error {
				d, err := m.Admit(ctx, "k", 1)
				if err != nil {
					d.RetryAfter *= 2
					return d.Err()
				}
				return fn(ctx)
			}
			_, err := floodgatetest.HonestRetryAfter(t.Context(), r, floodgatetest.RetryCheck{Tight: time.Millisecond})
			wantViolation(t, err, "HonestRetryAfter", "the RetryAfter is longer than needed")
			// Without Tight, a pessimistic RetryAfter is honest.
			if _, err := floodgatetest.HonestRetryAfter(t.Context(), r, floodgatetest.RetryCheck{}); err != nil {
				t.Errorf("without Tight: %v", err)
			}
		})
	})
	t.Run("no-retry-after", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := func(context.Context, func(context.Context) error) error {
				return &floodgate.RejectError{Reason: floodgate.ReasonLimited}
			}
			_, err := floodgatetest.HonestRetryAfter(t.Context(), r, floodgatetest.RetryCheck{})
			wantViolation(t, err, "HonestRetryAfter", "no RetryAfter")
		})
	})
	t.Run("never-refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := func(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }
			_, err := floodgatetest.HonestRetryAfter(t.Context(), r, floodgatetest.RetryCheck{MaxCalls: 50})
			wantViolation(t, err, "HonestRetryAfter", "50 calls admitted in a row, never refused")
		})
	})
}

func TestPermitsBalance(t *testing.T) {
	t.Run("semaphore", func(t *testing.T) {
		for _, cfg := range []semaphore.Config{{}, {NoEarlyReject: true}, {MaxWaiters: 2}} {
			synctest.Test(t, func(t *testing.T) {
				sem := semaphore.New(5, cfg)
				rep := floodgatetest.CheckPermitsBalance(t, sem, floodgatetest.BalanceCheck{
					Limit: 5, MaxN: 3, Ops: 300, InUse: func() int64 { return sem.Stats().InUse },
				})
				if rep.Canceled == 0 || rep.Held == 0 {
					t.Errorf("report %v: want grants and cancellations", rep)
				}
			})
		}
	})
	t.Run("leaky", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			leaky := &forgetful{Weighted: semaphore.New(5, semaphore.Config{})} // see example_test.go
			_, err := floodgatetest.PermitsBalance(t.Context(), leaky, floodgatetest.BalanceCheck{
				Limit: 5, Rand: 1, InUse: func() int64 { return leaky.Stats().InUse },
			})
			wantViolation(t, err, "PermitsBalance", "rand 1: after every release the gate says 5 is in use, want 0")
			wantViolation(t, err, "PermitsBalance", "TryHold(5) (the whole limit)")
		})
	})
}

func TestStepsAndAdvance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := shaper.NewQueue(shaper.Every(200*time.Millisecond), shaper.QueueConfig{})
		var started atomic.Int64
		for range 3 {
			go func() {
				if q.Wait(t.Context(), 1) == nil {
					started.Add(1)
				}
			}()
		}
		var got []int64
		floodgatetest.Steps(5, 100*time.Millisecond, func(i int, elapsed time.Duration) {
			if elapsed != time.Duration(i)*100*time.Millisecond {
				t.Errorf("step %d: elapsed %v", i, elapsed)
			}
			got = append(got, started.Load())
		})
		// The first starts at once, then one every 200ms.
		if want := []int64{1, 1, 2, 2, 3}; !slices.Equal(got, want) {
			t.Errorf("started by step = %v, want %v", got, want)
		}
	})
}
