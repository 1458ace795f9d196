package shaper_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/shaper"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const ms = time.Millisecond

// step is one call of a step table: at t0+at, cost n, and the expected decision.
type step struct {
	at           time.Duration
	n            int64
	ok           bool
	remaining    int64
	retry, reset time.Duration
	never        bool // expect ErrTooLarge
}

type allowAt interface {
	AllowNAt(key string, t time.Time, n int64) (shaper.Decision, error)
}

func runSteps(t *testing.T, m allowAt, steps []step) {
	t.Helper()
	for i, s := range steps {
		d, err := m.AllowNAt("k", t0.Add(s.at), s.n)
		if s.never {
			if !errors.Is(err, shaper.ErrTooLarge) {
				t.Errorf("step %d: AllowNAt(%v, %d) err = %v, want ErrTooLarge", i, s.at, s.n, err)
			}
			if re, ok := errors.AsType[*shaper.RejectError](err); !ok || re.RetryAfter() != 0 {
				t.Errorf("step %d: too-large error %v is not a *RejectError with RetryAfter 0", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: AllowNAt(%v, %d) err = %v", i, s.at, s.n, err)
		}
		if d.Allowed != s.ok || d.Remaining != s.remaining || d.RetryAfter != s.retry || d.ResetAfter != s.reset {
			t.Errorf("step %d: AllowNAt(%v, %d) = {ok %v rem %d retry %v reset %v}, want {ok %v rem %d retry %v reset %v}",
				i, s.at, s.n, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, s.ok, s.remaining, s.retry, s.reset)
		}
	}
}

// gcraSteps is the table shared by Meter and TokenBucket, which admit the same.
var gcraSteps = []step{ // 10/s burst 3: T = 100ms
	{at: 0, n: 1, ok: true, remaining: 2, reset: 100 * ms},
	{at: 0, n: 1, ok: true, remaining: 1, reset: 200 * ms},
	{at: 0, n: 1, ok: true, remaining: 0, reset: 300 * ms},
	{at: 0, n: 1, ok: false, remaining: 0, retry: 100 * ms, reset: 300 * ms},
	{at: 100 * ms, n: 1, ok: true, remaining: 0, reset: 300 * ms},
	{at: 150 * ms, n: 1, ok: false, remaining: 0, retry: 50 * ms, reset: 250 * ms},
	{at: 150 * ms, n: 4, never: true},
	{at: 250 * ms, n: 2, ok: false, remaining: 1, retry: 50 * ms, reset: 150 * ms},
	{at: 350 * ms, n: 2, ok: true, remaining: 0, reset: 250 * ms},
	{at: 1000 * ms, n: 0, ok: true, remaining: 3, reset: 0},
	{at: 1000 * ms, n: 3, ok: true, remaining: 0, reset: 300 * ms},
	{at: 1000 * ms, n: 0, ok: true, remaining: 0, reset: 300 * ms},
}

func TestMeterSteps(t *testing.T) {
	t.Run("burst=3", func(t *testing.T) {
		runSteps(t, shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 3}), gcraSteps)
	})
	t.Run("interval=1/3s", func(t *testing.T) {
		// T = 333333⅓ µs is kept exactly: the third slot is at 666666⅔ µs.
		runSteps(t, shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(3), Burst: 1}), []step{
			{at: 0, n: 1, ok: true, reset: 333334 * time.Microsecond},
			{at: 333333 * time.Microsecond, n: 1, ok: false, retry: time.Microsecond, reset: time.Microsecond},
			// Admitted ⅔µs late, so the next slot is at 666667⅓ µs.
			{at: 333334 * time.Microsecond, n: 1, ok: true, reset: 333334 * time.Microsecond},
			{at: 666667 * time.Microsecond, n: 1, ok: false, retry: time.Microsecond, reset: time.Microsecond},
			{at: 666668 * time.Microsecond, n: 1, ok: true, reset: 333334 * time.Microsecond},
			{at: 3 * time.Second, n: 1, ok: true, reset: 333334 * time.Microsecond},
		})
	})
	t.Run("default-burst", func(t *testing.T) {
		// Burst 0 means Rate.Count: five at once, then one per 12 s.
		runSteps(t, shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(5)}), []step{
			{at: 0, n: 5, ok: true, remaining: 0, reset: time.Minute},
			{at: time.Second, n: 1, ok: false, retry: 11 * time.Second, reset: 59 * time.Second},
			{at: 12 * time.Second, n: 1, ok: true, reset: time.Minute},
		})
	})
	t.Run("clock-backwards-is-stricter", func(t *testing.T) {
		// The debt seen from 50ms is 150ms, all of it owed: the next
		// admission is at 200ms, 150ms after the call's own time.
		runSteps(t, shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 1}), []step{
			{at: 100 * ms, n: 1, ok: true, reset: 100 * ms},
			{at: 50 * ms, n: 1, ok: false, retry: 150 * ms, reset: 150 * ms},
			{at: 199 * ms, n: 1, ok: false, retry: ms, reset: ms},
			{at: 200 * ms, n: 1, ok: true, reset: 100 * ms},
		})
	})
}

func TestTokenBucketSteps(t *testing.T) {
	t.Run("burst=3", func(t *testing.T) {
		runSteps(t, shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 3}), gcraSteps)
	})
	t.Run("seed-example", func(t *testing.T) {
		// The seed's example: capacity 10, one token per second.
		runSteps(t, shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerSecond(1), Burst: 10}), []step{
			{at: 0, n: 10, ok: true, remaining: 0, reset: 10 * time.Second},
			{at: 0, n: 1, ok: false, retry: time.Second, reset: 10 * time.Second},
			{at: time.Second, n: 1, ok: true, remaining: 0, reset: 10 * time.Second},
			{at: 30 * time.Second, n: 0, ok: true, remaining: 10},
			{at: 30 * time.Second, n: 11, never: true},
		})
	})
	t.Run("clock-never-moves-backwards", func(t *testing.T) {
		// As the seed's Lua: a call dated before the last one is taken at its
		// time; its waits count from its own time.
		runSteps(t, shaper.NewTokenBucket(shaper.Limit{Rate: shaper.PerSecond(10), Burst: 1}), []step{
			{at: 100 * ms, n: 1, ok: true, reset: 100 * ms},
			{at: 50 * ms, n: 1, ok: false, retry: 150 * ms, reset: 150 * ms},
			{at: 200 * ms, n: 1, ok: true, reset: 100 * ms},
		})
	})
}

func TestFixedWindowSteps(t *testing.T) {
	runSteps(t, shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerMinute(5)}), []step{
		{at: 59 * time.Second, n: 5, ok: true, remaining: 0, reset: time.Second},
		{at: 59 * time.Second, n: 1, ok: false, retry: time.Second, reset: time.Second},
		{at: 59*time.Second + 999*ms, n: 1, ok: false, retry: ms, reset: ms},
		// The boundary: five more at once, ten within one second (seed: 2×).
		{at: 60 * time.Second, n: 5, ok: true, remaining: 0, reset: time.Minute},
		{at: 61 * time.Second, n: 1, ok: false, retry: 59 * time.Second, reset: 59 * time.Second},
		{at: 61 * time.Second, n: 6, never: true},
		{at: 200 * time.Second, n: 0, ok: true, remaining: 5, reset: 0},
		{at: 200 * time.Second, n: 2, ok: true, remaining: 3, reset: 40 * time.Second},
	})
}

func TestSlidingCounterSteps(t *testing.T) {
	runSteps(t, shaper.NewSlidingCounter(shaper.Limit{Rate: shaper.PerMinute(10)}), []step{
		{at: 30 * time.Second, n: 10, ok: true, remaining: 0, reset: 90 * time.Second},
		// Full: the earliest fit is 7s into the next window, when
		// 1·60s + 10·(60s − 7s) ≤ 10·60s.
		{at: 59 * time.Second, n: 1, ok: false, retry: 7 * time.Second, reset: 61 * time.Second},
		// Next window: est = 0 + 10·(1 − e/60s); one more fits when e ≥ 6s.
		{at: 60 * time.Second, n: 1, ok: false, retry: 6 * time.Second, reset: time.Minute},
		{at: 66 * time.Second, n: 0, ok: true, remaining: 1, reset: 54 * time.Second},
		{at: 66 * time.Second, n: 1, ok: true, remaining: 0, reset: 114 * time.Second},
		{at: 90 * time.Second, n: 3, ok: true, remaining: 1, reset: 90 * time.Second},
		// Two windows later nothing is remembered.
		{at: 180 * time.Second, n: 0, ok: true, remaining: 10, reset: 0},
		{at: 181 * time.Second, n: 11, never: true},
	})
}

func TestSlidingLogSteps(t *testing.T) {
	runSteps(t, shaper.NewSlidingLog(shaper.Limit{Rate: shaper.Rate{Count: 3, Period: 10 * time.Second}}), []step{
		{at: 0, n: 1, ok: true, remaining: 2, reset: 10 * time.Second},
		{at: 1 * time.Second, n: 1, ok: true, remaining: 1, reset: 10 * time.Second},
		{at: 2 * time.Second, n: 1, ok: true, remaining: 0, reset: 10 * time.Second},
		{at: 3 * time.Second, n: 1, ok: false, remaining: 0, retry: 7 * time.Second, reset: 9 * time.Second},
		{at: 3 * time.Second, n: 2, ok: false, remaining: 0, retry: 8 * time.Second, reset: 9 * time.Second},
		{at: 10 * time.Second, n: 1, ok: true, remaining: 0, reset: 10 * time.Second},
		{at: 10 * time.Second, n: 1, ok: false, remaining: 0, retry: time.Second, reset: 10 * time.Second},
		{at: 10 * time.Second, n: 4, never: true},
		{at: 30 * time.Second, n: 0, ok: true, remaining: 3, reset: 0},
	})
}

func TestZeroMetersRejectEverything(t *testing.T) {
	for name, m := range map[string]allowAt{"Meter": new(shaper.Meter)} {
		d, err := m.AllowNAt("k", t0, 1)
		if d.Allowed || !errors.Is(err, shaper.ErrTooLarge) {
			t.Errorf("zero %s: AllowNAt = %v, %v; want denied, ErrTooLarge", name, d.Allowed, err)
		}
	}
}

func TestConstructorPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"zero-count", func() { shaper.NewMeter(shaper.Limit{Rate: shaper.Rate{Period: time.Second}}) }},
		{"zero-period", func() { shaper.NewTokenBucket(shaper.Limit{Rate: shaper.Rate{Count: 1}}) }},
		{"negative-burst", func() { shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1), Burst: -1}) }},
		{"window-burst", func() { shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerSecond(5), Burst: 6}) }},
		{"too-large", func() { shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1), Burst: 1 << 40}) }},
		{"negative-cost", func() { shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)}).AllowN("k", -1) }},
		{"queue-rate", func() { shaper.NewQueue(shaper.Rate{}, shaper.QueueConfig{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, ok := r.(string); !ok || len(s) < 8 || s[:8] != "shaper: " {
					t.Errorf("panic = %v, want a \"shaper: \" message", r)
				}
			}()
			tc.f()
		})
	}
}

type limitSetter interface {
	allowAt
	SetLimit(shaper.Limit)
}

// TestSetLimitClamps: after a change (rate ×10, burst halved) the next decision is
// at most one emission interval later than a fresh meter's (research scenario 28).
func TestSetLimitClamps(t *testing.T) {
	old := shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}
	lim := shaper.Limit{Rate: shaper.PerSecond(100), Burst: 5}
	for name, mk := range map[string]func(shaper.Limit) limitSetter{
		"Meter":       func(l shaper.Limit) limitSetter { return shaper.NewMeter(l) },
		"TokenBucket": func(l shaper.Limit) limitSetter { return shaper.NewTokenBucket(l) },
	} {
		t.Run(name, func(t *testing.T) {
			m := mk(old)
			for range 10 {
				m.AllowNAt("k", t0, 1)
			}
			m.SetLimit(lim)
			fresh := mk(lim)
			at := t0.Add(ms)
			d, _ := m.AllowNAt("k", at, 1)
			f, _ := fresh.AllowNAt("k", at, 1)
			if !f.Allowed {
				t.Fatalf("fresh meter denied")
			}
			interval := lim.Rate.Interval()
			if !d.Allowed && d.RetryAfter > interval {
				t.Errorf("after SetLimit: RetryAfter = %v, want ≤ one interval %v", d.RetryAfter, interval)
			}
			if got := m.(interface{ Limit() shaper.Limit }).Limit(); got != lim {
				t.Errorf("Limit() = %v, want %v", got, lim)
			}
		})
	}
}

// hammer calls m every step (random 0–max µs apart) for dur and returns the
// admitted cost and the time from the first admission to the end.
func hammer(m allowAt, seed uint64, maxStep, dur time.Duration, n int64) (admitted int64, elapsed time.Duration, times []time.Time) {
	r := rand.New(rand.NewPCG(seed, 1))
	var first time.Time
	at := t0
	end := t0.Add(dur)
	for at.Before(end) {
		if d, _ := m.AllowNAt("k", at, n); d.Allowed {
			if first.IsZero() {
				first = at
			}
			admitted += n
			times = append(times, at)
		}
		at = at.Add(time.Duration(r.Int64N(int64(maxStep) + 1)))
	}
	return admitted, end.Sub(first), times
}

// TestLongRunBound: GCRA and the token bucket admit ≤ burst + rate·t + 1 and at least
// 99% of that under hammering (x/time's TestLongRunningQPS criterion).
func TestLongRunBound(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(100), Burst: 5}
	for name, m := range map[string]allowAt{"Meter": shaper.NewMeter(lim), "TokenBucket": shaper.NewTokenBucket(lim)} {
		for _, maxStep := range []time.Duration{20 * time.Microsecond, 500 * time.Microsecond, 3 * ms} {
			got, el, _ := hammer(m, uint64(maxStep), maxStep, 5*time.Second, 1)
			bound := 5 + int64(el.Seconds()*100) + 1
			if got > bound || float64(got) < 0.99*float64(bound) {
				t.Errorf("%s step≤%v: admitted %d over %v, want ≤ %d and ≥ 99%%", name, maxStep, got, el, bound)
			}
			m = map[string]func(shaper.Limit) allowAt{
				"Meter":       func(l shaper.Limit) allowAt { return shaper.NewMeter(l) },
				"TokenBucket": func(l shaper.Limit) allowAt { return shaper.NewTokenBucket(l) },
			}[name](lim)
		}
	}
}

// TestContendedRace: many goroutines on one key with the real clock: no errors, and
// never more than burst + rate·t + 1.
func TestContendedRace(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(1000), Burst: 10}
	m := shaper.NewMeter(lim)
	var admitted, errs atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Since(start) < 100*ms {
				d, err := m.AllowN("k", 1)
				if err != nil {
					errs.Add(1)
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if bound := 10 + int64(el.Seconds()*1000) + 1; admitted.Load() > bound {
		t.Errorf("admitted %d in %v, bound %d", admitted.Load(), el, bound)
	}
	if errs.Load() != 0 {
		t.Errorf("%d errors under contention", errs.Load())
	}
}

// TestFixedWindowBoundaryBurst: exactly 2N pass around a boundary, never 2N+1.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	const n = 60
	m := shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerMinute(n)})
	admitted := 0
	for at := time.Minute - 500*ms; at < time.Minute+500*ms; at += ms {
		for range 3 {
			if d, _ := m.AllowNAt("k", t0.Add(at), 1); d.Allowed {
				admitted++
			}
		}
	}
	if admitted != 2*n {
		t.Errorf("admitted %d within 1s around the boundary, want exactly 2×%d", admitted, n)
	}
}

// maxInWindow returns the largest number of times within any window (t−p, t].
func maxInWindow(times []time.Time, p time.Duration) int {
	best, j := 0, 0
	for i := range times {
		for !times[j].After(times[i].Add(-p)) {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func TestSlidingLogNeverExceedsRollingLimit(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.Rate{Count: 20, Period: time.Second}}
	for seed := range uint64(5) {
		m := shaper.NewSlidingLog(lim)
		_, _, times := hammer(m, seed, 20*ms, 20*time.Second, 1)
		if got := maxInWindow(times, time.Second); got != 20 {
			t.Errorf("seed %d: max in a rolling second = %d, want exactly 20", seed, got)
		}
	}
}

// TestSlidingCounterError: with traffic spread evenly the estimate keeps every
// rolling window within Count+1; with the adversarial pattern (the previous
// window's events all at its end) within 2×Count, as documented.
func TestSlidingCounterError(t *testing.T) {
	const n = 100
	lim := shaper.Limit{Rate: shaper.Rate{Count: n, Period: time.Second}}
	t.Run("even", func(t *testing.T) {
		m := shaper.NewSlidingCounter(lim)
		_, _, times := hammer(m, 7, 2*ms, 30*time.Second, 1)
		if got := maxInWindow(times, time.Second); got > n+1 {
			t.Errorf("max in a rolling second = %d, want ≤ %d", got, n+1)
		}
	})
	t.Run("adversarial", func(t *testing.T) {
		m := shaper.NewSlidingCounter(lim)
		var times []time.Time
		// All of window 0's events in its last millisecond, then hammer window 1.
		for at := 999 * ms; at < 2*time.Second; at += 100 * time.Microsecond {
			for range 20 {
				if d, _ := m.AllowNAt("k", t0.Add(at), 1); d.Allowed {
					times = append(times, t0.Add(at))
				}
			}
		}
		got := maxInWindow(times, time.Second)
		if got > 2*n || got < 3*n/2 {
			t.Errorf("max in a rolling second = %d, want in [1.5, 2]×%d", got, n)
		}
		t.Logf("adversarial max in a rolling second: %d (Count %d)", got, n)
	})
}

// TestRetryAfterIsExact: for every algorithm, after a denial the same call is
// denied 1µs before RetryAfter and admitted at RetryAfter (nothing else happening).
func TestRetryAfterIsExact(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.Rate{Count: 7, Period: 3 * time.Second}}
	for name, mk := range meterMakers {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			m := mk(lim)
			at := t0
			checked := 0
			for range 2000 {
				at = at.Add(time.Duration(r.Int64N(int64(400 * ms))))
				n := 1 + r.Int64N(3)
				d, err := m.AllowNAt("k", at, n)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					continue
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("denied with RetryAfter %v", d.RetryAfter)
				}
				checked++
				early, _ := m.AllowNAt("k", at.Add(d.RetryAfter-time.Microsecond), n)
				if early.Allowed {
					t.Fatalf("admitted 1µs before RetryAfter %v", d.RetryAfter)
				}
				at = at.Add(d.RetryAfter)
				if ok, _ := m.AllowNAt("k", at, n); !ok.Allowed {
					t.Fatalf("denied at RetryAfter %v: %+v", d.RetryAfter, ok)
				}
			}
			if checked < 100 {
				t.Errorf("only %d denials checked", checked)
			}
		})
	}
}

type meter interface {
	allowAt
	AllowN(key string, n int64) (shaper.Decision, error)
	Allow(key string) bool
}

var meterMakers = map[string]func(shaper.Limit) meter{
	"Meter":          func(l shaper.Limit) meter { return shaper.NewMeter(l) },
	"TokenBucket":    func(l shaper.Limit) meter { return shaper.NewTokenBucket(l) },
	"FixedWindow":    func(l shaper.Limit) meter { return shaper.NewFixedWindow(l) },
	"SlidingLog":     func(l shaper.Limit) meter { return shaper.NewSlidingLog(l) },
	"SlidingCounter": func(l shaper.Limit) meter { return shaper.NewSlidingCounter(l) },
}

// TestAllowZeroAllocs: the allow path of every O(1) meter allocates nothing for a
// key that exists.
func TestAllowZeroAllocs(t *testing.T) {
	lim := shaper.Limit{Rate: shaper.PerSecond(1e6)}
	for name, mk := range meterMakers {
		m := mk(lim)
		m.AllowN("key", 1)
		at := t0
		if got := testing.AllocsPerRun(1000, func() {
			at = at.Add(time.Microsecond)
			m.AllowNAt("key", at, 1)
			m.Allow("key")
		}); got != 0 {
			t.Errorf("%s: %v allocs per Allow, want 0", name, got)
		}
	}
}

func TestKeysAreIndependent(t *testing.T) {
	for name, mk := range meterMakers {
		m := mk(shaper.Limit{Rate: shaper.PerMinute(1)})
		if d, _ := m.AllowNAt("a", t0, 1); !d.Allowed {
			t.Errorf("%s: first a denied", name)
		}
		if d, _ := m.AllowNAt("a", t0, 1); d.Allowed {
			t.Errorf("%s: second a admitted", name)
		}
		if d, _ := m.AllowNAt("b", t0, 1); !d.Allowed {
			t.Errorf("%s: first b denied", name)
		}
	}
}

func TestDecisionErr(t *testing.T) {
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)})
	d, _ := m.AllowNAt("k", t0, 1)
	if d.Err() != nil {
		t.Fatalf("allowed decision Err = %v", d.Err())
	}
	d, _ = m.AllowNAt("k", t0, 1)
	err := d.Err()
	le, ok := errors.AsType[*shaper.RejectError](err)
	if !errors.Is(err, shaper.ErrLimited) || !ok || le.RetryAfter() != time.Second {
		t.Errorf("denied decision Err = %v, want ErrLimited with RetryAfter 1s", err)
	}
}

// TestWindowSetLimit: a new Count applies to what the current window already holds;
// a new Period starts new windows.
func TestWindowSetLimit(t *testing.T) {
	m := shaper.NewFixedWindow(shaper.Limit{Rate: shaper.PerMinute(5)})
	m.AllowNAt("k", t0, 5)
	m.SetLimit(shaper.Limit{Rate: shaper.PerMinute(8)})
	d, _ := m.AllowNAt("k", t0.Add(time.Second), 4)
	if d.Allowed || d.Remaining != 3 || d.Limit.Burst != 8 {
		t.Errorf("after raising Count: %+v, want denied with 3 remaining, Burst 8", d)
	}
	m.SetLimit(shaper.Limit{Rate: shaper.PerSecond(8)})
	if d, _ := m.AllowNAt("k", t0.Add(2*time.Second), 8); !d.Allowed {
		t.Errorf("after a new Period: %+v, want a fresh window", d)
	}
}

// TestManyKeysConcurrent: goroutines racing over many keys (so tables grow and are
// rebuilt while others use them) admit exactly Burst per key at one instant.
func TestManyKeysConcurrent(t *testing.T) {
	const keys, burst, workers = 20_000, 3, 4
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1), Burst: burst})
	admitted := make([]atomic.Int32, keys)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range keys {
				i := (j*7919 + w*5003) % keys // a different order per worker
				if d, err := m.AllowNAt("key:"+strconv.Itoa(i), t0, 1); err != nil {
					t.Errorf("key %d: %v", i, err)
				} else if d.Allowed {
					admitted[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range admitted {
		if got := admitted[i].Load(); got != burst {
			t.Fatalf("key %d: admitted %d of %d calls, want %d", i, got, workers, burst)
		}
	}
}

// TestAllowNAtFutureKeepsOtherKeys: calls with a time in the future that make
// the store sweep idle keys must not judge the other keys idle at that future
// time: their state is live now, and dropping it would give their quota back.
func TestAllowNAtFutureKeepsOtherKeys(t *testing.T) {
	m := shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1), Burst: 1})
	const used = 5000
	for i := range used {
		if !m.Allow("used-" + strconv.Itoa(i)) {
			t.Fatalf("fresh key %d denied", i)
		}
	}
	future := time.Now().Add(2 * time.Hour)
	for i := range 20 * used { // enough new keys to sweep every shard many times
		if _, err := m.AllowNAt("future-"+strconv.Itoa(i), future, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := range used {
		if m.Allow("used-" + strconv.Itoa(i)) {
			t.Fatalf("key %d allowed twice within the hour: its state was swept as idle", i)
		}
	}
}
