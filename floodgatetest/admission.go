package floodgatetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Fleet is the subject of [NoOverAdmission]: Pods instances of your
// configuration, each built by New as each pod of a deployment builds its
// own (its own Redis client, its own limiter, sharing only what the pods
// share: a Redis, a key), with Callers goroutines calling each. New is
// required; the other fields have defaults.
type Fleet struct {
	// New returns pod's Runner (pod counts from 0). It is called Pods times,
	// before the run, on the check's goroutine. Required.
	New func(pod int) Runner

	// Pods is the number of instances. If zero, 4.
	Pods int

	// Callers is the number of goroutines calling each pod's Runner at once.
	// If zero, 2.
	Callers int
}

// A Load says how the fleet's callers call: each calls again and again
// until Duration has passed, holds each admitted call for Hold, and after a
// refusal or a failure waits Pause (or the refusal's RetryAfter if shorter)
// before calling again. The zero Load is valid: a second of calls each held
// 1ms.
type Load struct {
	// Duration is how long the callers call. If zero, 1s. Inside a
	// testing/synctest bubble it is fake time: a long Duration costs no
	// wall-clock time with local subjects.
	Duration time.Duration

	// Hold is how long fn runs in an admitted call. If zero, 1ms; if
	// negative, fn returns at once.
	Hold time.Duration

	// Pause is how long a caller waits after a refusal or failure. If zero,
	// 1ms. A refusal whose RetryAfter is shorter waits its RetryAfter.
	Pause time.Duration
}

// A Bound is what the fleet must never exceed. At least one of Concurrent
// and Admitted must be set.
type Bound struct {
	// Concurrent, if positive, is the most calls that may run fn at once,
	// over the whole fleet (a gate's limit, for calls of weight 1).
	Concurrent int64

	// Admitted, if positive, is the most calls that may be admitted within
	// any span of length Window (a rate's bound: see [RateBound]). A call
	// counts in a span only if it certainly was admitted inside it: it began
	// and its fn started within the span, so a slow store never makes a
	// correct subject fail.
	Admitted int64
	Window   time.Duration

	// Tolerance, if positive, lets the fleet exceed each bound by that
	// fraction (0.1: by 10%, rounded down) before the check fails: for a
	// configuration that is deliberately approximate (a local share while
	// Redis is down, a sliding counter).
	Tolerance float64
}

// An AdmissionReport is what [NoOverAdmission] saw.
type AdmissionReport struct {
	Calls    int64 // calls made, over the fleet
	Admitted int64 // calls whose fn ran
	Refused  int64 // calls refused (an error with RetryAfter)
	Failed   int64 // calls that failed otherwise (FirstFailure is the first)
	Canceled int64 // calls cut short by the end of the run

	MaxConcurrent int64 // the most calls seen running fn at once
	MaxInWindow   int64 // the most admissions within one Window (when Bound.Window is set)

	FirstFailure error
	Elapsed      time.Duration
}

func (r AdmissionReport) String() string {
	s := fmt.Sprintf("%d calls in %v: %d admitted, %d refused, %d failed, %d canceled; at most %d at once",
		r.Calls, r.Elapsed, r.Admitted, r.Refused, r.Failed, r.Canceled, r.MaxConcurrent)
	if r.MaxInWindow > 0 {
		s += fmt.Sprintf(", at most %d admitted in a window", r.MaxInWindow)
	}
	if r.FirstFailure != nil {
		s += fmt.Sprintf("; first failure: %v", r.FirstFailure)
	}
	return s
}

// stamp is one admitted call: when it began and when its fn started, since
// the start of the run.
type stamp struct{ call, fn time.Duration }

// NoOverAdmission runs fleet under load and checks that it never exceeds
// bound: never more than Bound.Concurrent calls running at once, never more
// than Bound.Admitted admitted within a Window. It returns what it saw, and
// a *[Violation] for each bound exceeded (joined), or for a run in which
// nothing was admitted (the check would have tested nothing). Failed calls
// (a store down under FailClosed, say) are counted, not violations.
//
// It runs inside a testing/synctest bubble as well as outside: with local
// subjects, fake time makes a long Duration instant and the counts exact.
// It panics if fleet.New is nil or bound sets nothing.
func NoOverAdmission(ctx context.Context, fleet Fleet, load Load, bound Bound) (AdmissionReport, error) {
	const check = "NoOverAdmission"
	if fleet.New == nil {
		panic("floodgatetest: NoOverAdmission: nil Fleet.New")
	}
	if bound.Concurrent <= 0 && (bound.Admitted <= 0 || bound.Window <= 0) {
		panic("floodgatetest: NoOverAdmission: the Bound sets neither Concurrent nor Admitted and Window")
	}
	pods, callers := cmp.Or(fleet.Pods, 4), cmp.Or(fleet.Callers, 2)
	duration := cmp.Or(load.Duration, time.Second)
	hold := cmp.Or(load.Hold, time.Millisecond)
	pause := cmp.Or(load.Pause, time.Millisecond)

	runners := make([]Runner, pods)
	for i := range runners {
		runners[i] = fleet.New(i)
	}

	var (
		running, maxRunning atomic.Int64
		mu                  sync.Mutex
		rep                 AdmissionReport
		stamps              []stamp
		wg                  sync.WaitGroup
	)
	runCtx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	start := time.Now()
	for _, r := range runners {
		for range callers {
			wg.Go(func() {
				var mine []stamp
				var calls, counts [4]int64
				var first error
				for runCtx.Err() == nil {
					began := time.Since(start)
					ran := false
					err := r(runCtx, func(ctx context.Context) error {
						ran = true
						mine = append(mine, stamp{began, time.Since(start)})
						n := running.Add(1)
						for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
						}
						if hold > 0 {
							sleepCtx(ctx, hold)
						}
						running.Add(-1)
						return nil
					})
					calls[0]++
					o, err := classify(runCtx, ran, err)
					counts[o]++
					switch o {
					case refused:
						wait := pause
						if ra, _ := retryAfterOf(err); ra > 0 && ra < wait {
							wait = ra
						}
						sleepCtx(runCtx, wait)
					case failed:
						if first == nil {
							first = err
						}
						sleepCtx(runCtx, pause)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				stamps = append(stamps, mine...)
				rep.Calls += calls[0]
				rep.Admitted += counts[admitted]
				rep.Refused += counts[refused]
				rep.Failed += counts[failed]
				rep.Canceled += counts[canceled]
				if rep.FirstFailure == nil {
					rep.FirstFailure = first
				}
			})
		}
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.MaxConcurrent = maxRunning.Load()

	var errs []error
	if rep.Admitted == 0 {
		errs = append(errs, violation(check, "no call was admitted in %v (%v): the check tested nothing", rep.Elapsed, rep))
	}
	if bound.Concurrent > 0 {
		if lim := allowed(bound.Concurrent, bound.Tolerance); rep.MaxConcurrent > lim {
			errs = append(errs, violation(check, "%d calls ran at once, bound %d%s", rep.MaxConcurrent, bound.Concurrent, tolerance(bound.Tolerance, lim)))
		}
	}
	if bound.Admitted > 0 && bound.Window > 0 {
		var at time.Duration
		rep.MaxInWindow, at = maxInWindow(stamps, bound.Window)
		if lim := allowed(bound.Admitted, bound.Tolerance); rep.MaxInWindow > lim {
			errs = append(errs, violation(check, "%d calls admitted within %v (from %v into the run), bound %d%s",
				rep.MaxInWindow, bound.Window, at, bound.Admitted, tolerance(bound.Tolerance, lim)))
		}
	}
	return rep, errors.Join(errs...)
}

// CheckNoOverAdmission runs [NoOverAdmission] under t's context, logs the
// report and fails t (t.Error) on a violation or an error.
func CheckNoOverAdmission(t testing.TB, fleet Fleet, load Load, bound Bound) AdmissionReport {
	t.Helper()
	rep, err := NoOverAdmission(t.Context(), fleet, load, bound)
	t.Logf("NoOverAdmission: %v", rep)
	if err != nil {
		t.Error(err)
	}
	return rep
}

// allowed is bound·(1+tol), rounded down.
func allowed(bound int64, tol float64) int64 {
	if tol <= 0 {
		return bound
	}
	return int64(float64(bound) * (1 + tol))
}

func tolerance(tol float64, lim int64) string {
	if tol <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%d with tolerance %g)", lim, tol)
}

// maxInWindow returns the most stamps certainly inside one span of length w
// (span [t, t+w] with call ≥ t and fn ≤ t+w), and where that span begins.
// The best span begins at some stamp's call time.
func maxInWindow(stamps []stamp, w time.Duration) (int64, time.Duration) {
	slices.SortFunc(stamps, func(a, b stamp) int { return cmp.Compare(a.call, b.call) })
	var best int64
	var at time.Duration
	for i, s := range stamps {
		end := s.call + w
		var n int64
		for _, o := range stamps[i:] {
			if o.call > end {
				break
			}
			if o.fn <= end {
				n++
			}
		}
		if n > best {
			best, at = n, s.call
		}
	}
	return best, at
}
