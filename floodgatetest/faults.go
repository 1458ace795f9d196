package floodgatetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Fault is one way the path to the store breaks, as a [Proxy] makes it.
type Fault uint8

// The faults of [AnswersWithin].
const (
	FaultNone   Fault = iota // no fault: the baseline
	FaultFreeze              // Proxy.Freeze: the store stalls (a pause, a long command, a dead peer)
	FaultDelay               // Proxy.Delay of twice the CallTimeout: the store is slow
	FaultDrop                // Proxy.Drop: the store is gone; connections closed, dials refused
	FaultReset               // Proxy.Reset again and again: connections reset (a failover)
)

// Faults lists every Fault, in the order AnswersWithin applies them by
// default.
var Faults = []Fault{FaultNone, FaultFreeze, FaultDelay, FaultDrop, FaultReset}

var faultNames = [...]string{"none", "freeze", "delay", "drop", "reset"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", f)
}

// A FaultCheck configures [AnswersWithin]. Target, New and CallTimeout are
// required; the other fields have defaults.
type FaultCheck struct {
	// Target is the store's address (host:port), which a Proxy is put in
	// front of. Required.
	Target string

	// New returns your configuration built on a client that dials addr (the
	// proxy), as your code builds it: your Redis client options, your
	// breaker and its CallTimeout. It is called once per fault, before the
	// fault begins, so that each fault meets a healthy configuration:
	// otherwise a breaker opened by one fault would answer the calls of the
	// next from its open state, and the next fault would never be tested.
	// Required.
	New func(addr string) Runner

	// CallTimeout is the longest a call may take, by your configuration:
	// breaker.Config.CallTimeout of the breaker your limiter uses (plus
	// MaxWait, for a configuration that may wait for room). Required.
	CallTimeout time.Duration

	// Epsilon is the slack allowed beyond CallTimeout (scheduling, the race
	// detector). If zero, 100ms.
	Epsilon time.Duration

	// Faults are the faults applied, one after the other, with a Heal
	// between them. If nil, [Faults].
	Faults []Fault

	// Calls is the number of calls made under each fault. If zero, 12.
	Calls int

	// Callers is the number of goroutines making them at once. If zero, 3.
	Callers int
}

// A FaultResult is what the calls under one fault came to.
type FaultResult struct {
	Fault                     Fault
	Admitted, Refused, Failed int           // the calls' outcomes (a failure: an error other than a refusal)
	Worst                     time.Duration // the longest call
	Late                      int           // calls longer than CallTimeout + Epsilon
	FirstFailure              error
}

// A FaultReport is what [AnswersWithin] saw, fault by fault.
type FaultReport struct {
	Bound   time.Duration // CallTimeout + Epsilon
	Results []FaultResult
}

func (r FaultReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bound %v", r.Bound)
	for _, f := range r.Results {
		fmt.Fprintf(&b, "; %v: worst %v, %d admitted, %d refused, %d failed", f.Fault, f.Worst.Round(time.Millisecond), f.Admitted, f.Refused, f.Failed)
		if f.Late > 0 {
			fmt.Fprintf(&b, ", %d late", f.Late)
		}
	}
	return b.String()
}

// AnswersWithin checks that every call of your configuration answers within
// CallTimeout + Epsilon whatever happens to the store: it puts a [Proxy] in
// front of cfg.Target and, for each fault in turn (no fault, freeze, a delay
// of twice CallTimeout, drop, repeated resets), builds the subject on it with
// cfg.New, makes cfg.Calls calls from cfg.Callers goroutines while the fault
// lasts, then heals. Admitted, refused or failed, each call must
// return within the bound. It returns the worst duration and the outcomes
// under each fault, and a *[Violation] for each fault under which a call was
// late (joined), or if no call was admitted with no fault (the subject does
// not work through the proxy, so the check would test nothing).
//
// The calls are given a context without deadline, so that the bound tested
// is your configuration's own. Calls that never return end the check with a
// violation once they are certainly late; they are waited for until the
// proxy closes at the end (which ends their connections), then 10 seconds
// more; a call still running then is left behind. It uses real
// time and real sockets: do not call it inside a testing/synctest bubble.
func AnswersWithin(ctx context.Context, cfg FaultCheck) (FaultReport, error) {
	const check = "AnswersWithin"
	if cfg.Target == "" || cfg.New == nil || cfg.CallTimeout <= 0 {
		panic("floodgatetest: AnswersWithin: Target, New and CallTimeout are required")
	}
	faults := cfg.Faults
	if faults == nil {
		faults = Faults
	}
	calls, callers := cmp.Or(cfg.Calls, 12), cmp.Or(cfg.Callers, 3)
	rep := FaultReport{Bound: cfg.CallTimeout + cmp.Or(cfg.Epsilon, 100*time.Millisecond)}

	p, err := NewProxy(cfg.Target)
	if err != nil {
		return rep, err
	}
	callCtx, cancel := context.WithCancel(ctx)
	var all sync.WaitGroup // every call's goroutine
	defer func() {
		cancel()
		p.Close()
		stuck := make(chan struct{})
		go func() { all.Wait(); close(stuck) }()
		select {
		case <-stuck:
		case <-time.After(10 * time.Second):
		}
	}()
	var errs []error
	for _, f := range faults {
		p.Heal()
		r := cfg.New(p.Addr())
		stopFault := apply(p, f, cfg.CallTimeout)
		res := FaultResult{Fault: f}
		var mu sync.Mutex
		var phase sync.WaitGroup
		next := make(chan struct{}, calls)
		for range calls {
			next <- struct{}{}
		}
		close(next)
		for range callers {
			phase.Add(1)
			all.Add(1)
			go func() {
				defer all.Done()
				defer phase.Done()
				for range next {
					ran := false
					start := time.Now()
					err := r(callCtx, func(context.Context) error { ran = true; return nil })
					took := time.Since(start)
					o, err := classify(callCtx, ran, err)
					mu.Lock()
					switch o {
					case admitted:
						res.Admitted++
					case refused:
						res.Refused++
					default:
						res.Failed++
						if res.FirstFailure == nil {
							res.FirstFailure = err
						}
					}
					res.Worst = max(res.Worst, took)
					if took > rep.Bound {
						res.Late++
					}
					mu.Unlock()
				}
			}()
		}
		done := make(chan struct{})
		go func() { phase.Wait(); close(done) }()
		// Each caller makes its calls one after the other: all are done
		// within that many bounds, plus a second for the scheduler.
		limit := time.Duration((calls+callers-1)/callers)*rep.Bound + time.Second
		hung := false
		select {
		case <-done:
		case <-time.After(limit):
			hung = true // calls that never return: let them go at the end
		case <-ctx.Done():
			stopFault()
			return rep, ctx.Err()
		}
		stopFault()
		if hung {
			mu.Lock()
			res.Late++
			res.Worst = max(res.Worst, limit)
			rep.Results = append(rep.Results, res)
			mu.Unlock()
			errs = append(errs, violation(check, "under %v, calls still running after %v (%d calls of at most %v each, by %d callers): the calls do not time out",
				f, limit, calls, rep.Bound, callers))
			break // the later faults would find the callers still stuck
		}
		rep.Results = append(rep.Results, res)
		if res.Late > 0 {
			errs = append(errs, violation(check, "under %v, %d of %d calls took longer than %v (CallTimeout %v + Epsilon); the worst %v",
				f, res.Late, calls, rep.Bound, cfg.CallTimeout, res.Worst))
		}
		if f == FaultNone && res.Admitted == 0 {
			errs = append(errs, violation(check, "with no fault, none of %d calls was admitted (%d refused, %d failed; first failure: %v): the subject does not work through the proxy",
				calls, res.Refused, res.Failed, res.FirstFailure))
		}
	}
	p.Heal()
	return rep, errors.Join(errs...)
}

// apply starts fault f on p and returns the function that stops it (the
// caller heals p afterwards).
func apply(p *Proxy, f Fault, callTimeout time.Duration) (stop func()) {
	switch f {
	case FaultFreeze:
		p.Freeze()
	case FaultDelay:
		p.Delay(2 * callTimeout)
	case FaultDrop:
		p.Drop()
	case FaultReset:
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			every := max(callTimeout/4, time.Millisecond)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				p.Reset()
				select {
				case <-t.C:
				case <-done:
					return
				}
			}
		})
		return func() { close(done); wg.Wait() }
	}
	return func() {}
}

// CheckAnswersWithin runs [AnswersWithin] under t's context, logs the report
// and fails t (t.Error) on a violation or an error.
func CheckAnswersWithin(t testing.TB, cfg FaultCheck) FaultReport {
	t.Helper()
	rep, err := AnswersWithin(t.Context(), cfg)
	t.Logf("AnswersWithin: %v", rep)
	if err != nil {
		t.Error(err)
	}
	return rep
}
