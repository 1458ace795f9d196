package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/backoff"
)

// The backing-off client's rows of the report: floodgate's backoff.Client
// beside failsafe-go v0.9.8's retrypolicy with a budget around its
// adaptivethrottler, a plain retry policy and no policy, on the same traces
// of a downstream that refuses. TestBackoffReport runs them and writes a
// markdown section to the file named by BACKOFF_OUT, which the report puts
// in RESULTS.md under "Backing-off client (SRE throttle, retry budget)".
//
//	BACKOFF_OUT=/tmp/backoff.md go test -run 'TestBackoffReport$' -v

// errBackoffRefused is the downstream's refusal: a floodgate refusal
// without a delay, so that every client backs off by its own rule.
var errBackoffRefused = reject(floodgate.ReasonUnavailable, "downstream: overloaded")

func reject(reason floodgate.Reason, text string) error {
	return &floodgate.RejectError{Reason: reason, Err: errors.New(text)}
}

// A backoffClient makes one call to the downstream under its policy.
type backoffClient func(ctx context.Context, call func(context.Context) error) error

type backoffImpl struct {
	name  string
	build func() backoffClient // built inside the run's bubble
}

const (
	boBase, boMax = 10 * time.Millisecond, time.Second
	boWindow      = 10 * time.Second
)

var backoffImpls = []backoffImpl{
	{"none", func() backoffClient {
		return func(ctx context.Context, call func(context.Context) error) error { return call(ctx) }
	}},
	{"retry ×3", func() backoffClient {
		rp := retrypolicy.NewBuilder[any]().HandleErrors(errBackoffRefused).WithMaxAttempts(3).
			WithBackoff(boBase, boMax).WithJitterFactor(0.5).ReturnLastFailure().Build()
		return failsafeClient(failsafe.With[any](rp))
	}},
	{"failsafe-go", func() backoffClient {
		rp := retrypolicy.NewBuilder[any]().HandleErrors(errBackoffRefused).WithMaxAttempts(3).
			WithBackoff(boBase, boMax).WithJitterFactor(0.5).ReturnLastFailure().
			WithBudget(budget.NewBuilder().WithMaxRate(0.1).WithMinConcurrency(3).Build()).Build()
		th := adaptivethrottler.NewBuilder[any]().HandleErrors(errBackoffRefused).
			WithFailureRateThreshold(0.5, 20, boWindow).Build()
		return failsafeClient(failsafe.With[any](rp, th))
	}},
	{"floodgate", func() backoffClient {
		c := backoff.New(backoff.Config{BaseDelay: boBase, MaxDelay: boMax})
		return c.Do
	}},
	{"floodgate, no throttle", func() backoffClient {
		c := backoff.New(backoff.Config{BaseDelay: boBase, MaxDelay: boMax, K: -1})
		return c.Do
	}},
}

func failsafeClient(ex failsafe.Executor[any]) backoffClient {
	return func(ctx context.Context, call func(context.Context) error) error {
		return ex.WithContext(ctx).Run(func() error { return call(ctx) })
	}
}

// A backoffTrace is a downstream's behaviour over a run.
type backoffTrace struct {
	name   string
	about  string
	length time.Duration
	rate   int // calls offered per second
	// outageFrom..outageTo, if set, is when the downstream refuses
	// everything.
	outageFrom, outageTo time.Duration
	// newRefuse makes, for a run, whether the downstream refuses an
	// attempt arriving at t since the start (outside the outage).
	newRefuse func() func(t time.Duration) bool
}

var backoffTraces = []backoffTrace{
	{name: "half at random", length: 30 * time.Second, rate: 1000,
		about: "refuses each attempt with probability ½, whatever the load",
		newRefuse: func() func(time.Duration) bool {
			return func(time.Duration) bool { return rand.IntN(2) == 0 }
		}},
	{name: "half by capacity", length: 30 * time.Second, rate: 1000,
		about: "serves 500 attempts/s (a token bucket, burst 50) and refuses the rest: half the calls offered",
		newRefuse: func() func(time.Duration) bool {
			var mu sync.Mutex
			tokens, last := 50.0, time.Duration(0)
			return func(t time.Duration) bool {
				mu.Lock()
				defer mu.Unlock()
				tokens = min(50, tokens+(t-last).Seconds()*500)
				last = t
				if tokens < 1 {
					return true
				}
				tokens--
				return false
			}
		}},
	{name: "outage", length: 70 * time.Second, rate: 1000, outageFrom: 10 * time.Second, outageTo: 40 * time.Second,
		about: "healthy, refuses every attempt from 10 s to 40 s, then healthy again",
		newRefuse: func() func(time.Duration) bool {
			return func(time.Duration) bool { return false }
		}},
}

// backoffRun is what a run measured.
type backoffRun struct {
	calls, ok, attempts     int64
	outageCalls, outageSent int64
	recovery                time.Duration // after the outage, until a second with ≥ 99% of calls succeeding; -1 never
}

// runBackoff offers tr's calls (rate per second, each in its own goroutine)
// through cl for tr.length, inside a synctest bubble.
func runBackoff(tr backoffTrace, cl backoffClient) backoffRun {
	refuse := tr.newRefuse()
	start := time.Now()
	var r backoffRun
	var calls, ok, attempts, outCalls, outSent atomic.Int64
	secs := int(tr.length / time.Second)
	perSec := make([][2]atomic.Int64, secs+1) // calls, successes by the second they started
	down := func(t time.Duration) bool { return tr.outageTo > 0 && t >= tr.outageFrom && t < tr.outageTo }
	call := func(context.Context) error {
		attempts.Add(1)
		t := time.Since(start)
		if down(t) {
			outSent.Add(1)
			return errBackoffRefused
		}
		if refuse(t) {
			return errBackoffRefused
		}
		return nil
	}
	var wg sync.WaitGroup
	every := time.Second / time.Duration(tr.rate)
	for t := time.Duration(0); t < tr.length; t += every {
		time.Sleep(time.Until(start.Add(t)))
		calls.Add(1)
		if down(t) {
			outCalls.Add(1)
		}
		sec := int(t / time.Second)
		perSec[sec][0].Add(1)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if cl(ctx, call) == nil {
				ok.Add(1)
				perSec[sec][1].Add(1)
			}
		})
	}
	wg.Wait()
	r.calls, r.ok, r.attempts = calls.Load(), ok.Load(), attempts.Load()
	r.outageCalls, r.outageSent = outCalls.Load(), outSent.Load()
	r.recovery = -1
	if tr.outageTo > 0 {
		for s := int(tr.outageTo / time.Second); s < secs; s++ {
			if n := perSec[s][0].Load(); n > 0 && float64(perSec[s][1].Load()) >= 0.99*float64(n) {
				r.recovery = time.Duration(s)*time.Second - tr.outageTo
				break
			}
		}
	}
	return r
}

// TestBackoffReport runs every trace through every client, each run in its
// own synctest bubble, measures the per-call overhead on success, and
// writes the report's section to BACKOFF_OUT if set. It fails only when a
// run is broken (no call made), not on a missed target.
func TestBackoffReport(t *testing.T) {
	runs := make([][]backoffRun, len(backoffTraces))
	start := time.Now()
	t.Run("runs", func(t *testing.T) {
		for i, tr := range backoffTraces {
			runs[i] = make([]backoffRun, len(backoffImpls))
			for j, im := range backoffImpls {
				t.Run(tr.name+"/"+im.name, func(t *testing.T) {
					t.Parallel()
					synctest.Test(t, func(t *testing.T) {
						r := runBackoff(tr, im.build())
						if r.calls == 0 || r.attempts == 0 {
							t.Fatalf("%+v: nothing called", r)
						}
						runs[i][j] = r
					})
				})
			}
		}
	})
	wall := time.Since(start)
	if t.Failed() {
		return
	}
	for i := range runs {
		for j := range runs[i] {
			if runs[i][j].calls == 0 {
				t.Skipf("%s/%s did not run (-run?): no section written", backoffTraces[i].name, backoffImpls[j].name)
			}
		}
	}
	over := backoffOverhead()
	var b strings.Builder
	writeBackoffSection(&b, runs, over, wall)
	if testing.Verbose() {
		t.Log("\n" + b.String())
	}
	if out := os.Getenv("BACKOFF_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// backoffOverheadCase is one client on the success path.
type backoffOverheadCase struct {
	name string
	run  func(b *testing.B)
}

func backoffOverheadCases() []backoffOverheadCase {
	ctx := context.Background()
	var sink atomic.Int64
	fn := func(context.Context) error { sink.Add(1); return nil }
	var cs []backoffOverheadCase
	for _, im := range backoffImpls {
		if im.name == "retry ×3" || im.name == "floodgate, no throttle" {
			continue
		}
		name := im.name
		if name == "none" {
			name = "bare"
		}
		cs = append(cs, backoffOverheadCase{name, func(b *testing.B) {
			cl := im.build()
			b.ReportAllocs()
			for b.Loop() {
				cl(ctx, fn)
			}
		}})
	}
	return cs
}

// BenchmarkBackoffDo is one call that succeeds at once through each
// client: its overhead.
func BenchmarkBackoffDo(b *testing.B) {
	for _, c := range backoffOverheadCases() {
		b.Run("impl="+c.name, c.run)
	}
}

type backoffCost struct {
	name   string
	ns     float64
	allocs int64
	bytes  int64
}

func backoffOverhead() []backoffCost {
	var out []backoffCost
	for _, c := range backoffOverheadCases() {
		r := testing.Benchmark(c.run)
		out = append(out, backoffCost{c.name, float64(r.T.Nanoseconds()) / float64(r.N), r.AllocsPerOp(), r.AllocedBytesPerOp()})
	}
	return out
}

func writeBackoffSection(w io.Writer, runs [][]backoffRun, over []backoffCost, wall time.Duration) {
	fmt.Fprintf(w, `floodgate's backoff.Client (`+"`backoff.Config{BaseDelay: 10ms, MaxDelay: 1s}`"+`: 3 attempts,
a retry budget of 10%% of the first attempts + 10 retries per 10 s window, the SRE
throttle with K = 2 over 10 s from 20 attempts on, capped at 0.9) beside failsafe-go
v0.9.8's retrypolicy (3 attempts, backoff 10 ms..1 s with jitter factor 0.5) with
its budget (max rate 0.1, min concurrency 3) around its adaptivethrottler
(failure rate threshold 0.5, i.e. K = 2, over 20 executions and 10 s; its
default max rejection 0.9), the same retry policy alone ("retry ×3"), and no
policy ("none"); "floodgate, no throttle" is floodgate's with K = −1 (the
budget alone). Each downstream refusal is a floodgate refusal without a delay.
%d calls per second, each in its own goroutine with a 5 s deadline, in a
synctest bubble (simulated time); one run per trace and client took %s of wall
time in all. Extra attempts are the attempts that reached the downstream beyond
one per call; goodput is the share of calls that succeeded.

`, backoffTraces[0].rate, wall.Round(time.Millisecond))
	for i, tr := range backoffTraces {
		fmt.Fprintf(w, "**%s** (%s, %v):\n\n", tr.name, tr.about, tr.length)
		if tr.outageTo > 0 {
			fmt.Fprintln(w, "| client | extra attempts per call | goodput | attempts reaching the downstream during the outage, per call offered | seconds after the outage until a second with ≥ 99% of calls succeeding |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
		} else {
			fmt.Fprintln(w, "| client | extra attempts per call | goodput | attempts reaching the downstream per call |")
			fmt.Fprintln(w, "|---|---:|---:|---:|")
		}
		for j, im := range backoffImpls {
			r := runs[i][j]
			extra := float64(r.attempts-r.calls) / float64(r.calls)
			good := float64(r.ok) / float64(r.calls)
			if tr.outageTo > 0 {
				rec := "never"
				if r.recovery >= 0 {
					rec = fmt.Sprintf("%.0f", r.recovery.Seconds())
				}
				fmt.Fprintf(w, "| %s | %+.3f | %.3f | %.3f | %s |\n", im.name, extra, good,
					float64(r.outageSent)/float64(r.outageCalls), rec)
			} else {
				fmt.Fprintf(w, "| %s | %+.3f | %.3f | %.3f |\n", im.name, extra, good, float64(r.attempts)/float64(r.calls))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Per-call overhead on success (one call that succeeds at once, `testing.Benchmark` in the same run; also `BenchmarkBackoffDo`):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| client | ns/op | allocs/op | B/op |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, c := range over {
		fmt.Fprintf(w, "| %s | %.1f | %d | %d |\n", c.name, c.ns, c.allocs, c.bytes)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `The retry budget bounds floodgate's extra attempts to about 0.1 per call
whatever the downstream does (so, with half refused, goodput is at most about
0.5 + 0.1 × 0.5); failsafe-go's budget bounds retries in flight against
executions in flight, not over time, and barely binds here. With half the
attempts refused at random, K = 2 is exactly the point where the SRE throttle
begins (fewer than half accepted), so where it settles is a matter of chance.
Through an outage both throttles (capped at 0.9) let about a tenth of the calls
through once they have seen it; floodgate's counts its own refusals as requests
(the SRE book's rule), so it lets fewer through, and forgets them at the first
tenth of a window in which the downstream refused nothing, so it opens again
as soon.`)
}
