package shaperredis

import (
	"context"
	"errors"
	"fmt"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/shaper"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// The tests in this file check the meters' answers after limit changes, at
// out-of-order times, at times outside the valid range and for zero-cost peeks
// (issue 12 items 2–4).

// An op is one step of a history: a limit change or a call.
type op struct {
	set bool
	lim shaper.Limit
	at  int64 // µs
	n   int64
}

// A subject is one meter under test, local or Redis, that can replay a history
// from scratch: fresh returns a new, empty meter with limit lim.
type subject struct {
	name  string
	kind  algoKind
	fresh func(t *testing.T, lim shaper.Limit) (call func(at, n int64) (shaper.Decision, error), set func(shaper.Limit))
}

func localSubjects() []subject {
	var out []subject
	for kind := range kinds {
		out = append(out, subject{name: kindNames[kind], kind: algoKind(kind),
			fresh: func(_ *testing.T, lim shaper.Limit) (func(int64, int64) (shaper.Decision, error), func(shaper.Limit)) {
				m := newLocal(algoKind(kind), lim)
				return func(at, n int64) (shaper.Decision, error) { return localAt(m, "k", at, n) },
					func(l shaper.Limit) { setLocal(m, l) }
			}})
	}
	out = append(out, subject{name: "Limiter", kind: kindGCRA,
		fresh: func(_ *testing.T, lim shaper.Limit) (func(int64, int64) (shaper.Decision, error), func(shaper.Limit)) {
			l := shaper.NewLimiter(lim)
			return func(at, n int64) (shaper.Decision, error) { return l.AllowNAt(time.UnixMicro(at), n) }, l.SetLimit
		}})
	return out
}

func setLocal(m localMeter, lim shaper.Limit) {
	switch l := m.(type) {
	case *shaper.Meter:
		l.SetLimit(lim)
	case *shaper.TokenBucket:
		l.SetLimit(lim)
	case *shaper.FixedWindow:
		l.SetLimit(lim)
	case *shaper.SlidingLog:
		l.SetLimit(lim)
	case *shaper.SlidingCounter:
		l.SetLimit(lim)
	}
}

func redisSubjects(t *testing.T) []subject {
	db := redistest.Connect(t)
	var out []subject
	seq := 0
	for kind := range kinds {
		out = append(out, subject{name: "Redis" + kindNames[kind], kind: algoKind(kind),
			fresh: func(t *testing.T, lim shaper.Limit) (func(int64, int64) (shaper.Decision, error), func(shaper.Limit)) {
				seq++
				rm := newMeter(algoKind(kind), db.Client, lim, Config{Prefix: db.Prefix + kindNames[kind] + ":", Breaker: breaker.New("test", breaker.Config{CallTimeout: 5 * time.Second})})
				key := "h" + strconv.Itoa(seq)
				return func(at, n int64) (shaper.Decision, error) {
					return allowAt(context.Background(), rm, key, at, n)
				}, rm.SetLimit
			}})
	}
	return out
}

// replay runs hist on a fresh meter of s and returns the last decision.
func replay(t *testing.T, s subject, lim shaper.Limit, hist []op) (shaper.Decision, error) {
	call, set := s.fresh(t, lim)
	var d shaper.Decision
	var err error
	for _, o := range hist {
		if o.set {
			set(o.lim)
			continue
		}
		d, err = call(o.at, o.n)
	}
	return d, err
}

// randomHistory returns a random history for kind: calls mostly forward in time,
// sometimes back (up to several periods), zero costs, and limit changes.
func randomHistory(r *rand.Rand, kind algoKind, lim shaper.Limit, steps int) []op {
	var hist []op
	now := int64(1_700_000_000_000_000) + r.Int64N(1e12)
	for range steps {
		if r.IntN(12) == 0 {
			lim = randomLimit(r, kind)
			hist = append(hist, op{set: true, lim: lim})
			continue
		}
		var n int64
		now, n = randomStep(r, now, lim, burstOf(lim))
		if r.IntN(10) == 0 { // a larger step back
			now -= r.Int64N(3*int64(lim.Rate.Period/time.Microsecond) + 1)
		}
		hist = append(hist, op{at: now, n: n})
	}
	return hist
}

// checkExact replays random histories on s and checks every denial's RetryAfter:
// the same call (same cost, nothing in between) is denied 1µs before it and
// admitted at it.
func checkExact(t *testing.T, s subject, seqs, steps int) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHAPER_EXACT_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, uint64(s.kind)))
	checked := 0
	for q := range seqs {
		lim := randomLimit(r, s.kind)
		hist := randomHistory(r, s.kind, lim, steps)
		call, set := s.fresh(t, lim)
		for i, o := range hist {
			if o.set {
				set(o.lim)
				continue
			}
			d, err := call(o.at, o.n)
			if err != nil {
				t.Fatalf("seq %d step %d: %v", q, i, err)
			}
			if d.Allowed {
				continue
			}
			checked++
			if d.RetryAfter <= 0 {
				t.Fatalf("seq %d step %d (t=%d n=%d): denied with RetryAfter %v", q, i, o.at, o.n, d.RetryAfter)
			}
			retry := d.RetryAfter.Microseconds()
			for _, c := range []struct {
				dt   int64
				want bool
			}{{retry - 1, false}, {retry, true}} {
				probe := append(hist[:i+1:i+1], op{at: o.at + c.dt, n: o.n})
				p, err := replay(t, s, lim, probe)
				if err != nil {
					t.Fatalf("seq %d step %d: probe: %v", q, i, err)
				}
				if p.Allowed != c.want {
					t.Fatalf("seq %d step %d (%v): denied at t=%d n=%d with RetryAfter %v (%+v), but at +%dµs Allowed = %v\nhistory: %v",
						q, i, d.Limit, o.at, o.n, d.RetryAfter, d, c.dt, p.Allowed, fmtHist(hist[:i+1]))
				}
			}
		}
	}
	if checked < seqs {
		t.Errorf("only %d denials checked", checked)
	}
}

func fmtHist(h []op) string {
	s := ""
	for _, o := range h[max(0, len(h)-12):] {
		if o.set {
			s += fmt.Sprintf("\n  SetLimit(%v)", o.lim)
		} else {
			s += fmt.Sprintf("\n  t=%d n=%d", o.at, o.n)
		}
	}
	return s
}

// TestRetryAfterExactEverywhere: every meter's every denial, over random
// histories with limit changes and out-of-order times, has an exact RetryAfter.
func TestRetryAfterExactEverywhere(t *testing.T) {
	seqs := 150
	if testing.Short() {
		seqs = 30
	}
	for _, s := range localSubjects() {
		t.Run(s.name, func(t *testing.T) { checkExact(t, s, seqs, 40) })
	}
}

// TestRedisRetryAfterExactEverywhere is TestRetryAfterExactEverywhere for the
// Redis scripts, fed the same times through the test-time argument.
func TestRedisRetryAfterExactEverywhere(t *testing.T) {
	seqs := 12
	if testing.Short() {
		seqs = 3
	}
	for _, s := range redisSubjects(t) {
		t.Run(s.name, func(t *testing.T) { checkExact(t, s, seqs, 25) })
	}
}

var hourT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// TestGCRASetLimitLowered: 1/hour, then 10/s (burst 10): the key had used its
// whole old burst, which under the new limit reads as its whole new burst, so it
// is admitted 100 ms later (as the token bucket and x/time/rate do), and a denial
// before that says exactly when.
func TestGCRASetLimitLowered(t *testing.T) {
	subjects := append(localSubjects(), redisSubjectsIfAny(t)...)
	for _, s := range subjects {
		if s.kind != kindGCRA && s.kind != kindTokenBucket {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			call, set := s.fresh(t, shaper.Limit{Rate: shaper.PerHour(1)})
			if d, _ := call(hourT0, 1); !d.Allowed {
				t.Fatalf("first call denied")
			}
			set(shaper.Limit{Rate: shaper.PerSecond(10)})
			d, _ := call(hourT0+50_000, 1)
			if d.Allowed || d.RetryAfter != 50*time.Millisecond {
				t.Errorf("at +50ms: %+v, want denied with RetryAfter 50ms", d)
			}
			if d, _ := call(hourT0+100_000, 1); !d.Allowed {
				t.Errorf("at +100ms: %+v, want allowed", d)
			}
		})
	}
}

func redisSubjectsIfAny(t *testing.T) []subject {
	if os.Getenv("REDIS_ADDR") == "" && os.Getenv("CI") == "" {
		return nil
	}
	return redisSubjects(t)
}

// TestGCRAOutOfOrderNoForgiveness: with burst 2, a call dated before a later
// admission is told the honest wait, and the debt is never forgiven: at most 2
// in any emission window, whatever order the times come in.
func TestGCRAOutOfOrderNoForgiveness(t *testing.T) {
	subjects := append(localSubjects(), redisSubjectsIfAny(t)...)
	for _, s := range subjects {
		if s.kind != kindGCRA {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			call, _ := s.fresh(t, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 2})
			// 2 at t0+1s: tat = t0+1.2s.
			for range 2 {
				if d, _ := call(hourT0+1_000_000, 1); !d.Allowed {
					t.Fatalf("burst denied")
				}
			}
			d, _ := call(hourT0+900_000, 1) // 100 ms earlier
			if d.Allowed || d.RetryAfter != 200*time.Millisecond {
				t.Errorf("at t0+0.9s: %+v, want denied with RetryAfter 200ms", d)
			}
			admitted := 0
			for _, at := range []int64{0, 500_000, 950_000, 1_000_000, 1_050_000} {
				if d, _ := call(hourT0+at, 1); d.Allowed {
					admitted++
				}
			}
			if admitted != 0 {
				t.Errorf("%d more admitted before t0+1.1s, want 0", admitted)
			}
		})
	}
}

// TestTimeRange: times outside [0, 2^53) µs are refused with shaper.ErrTimeRange, and
// change nothing.
func TestTimeRange(t *testing.T) {
	bad := []time.Time{{}, time.Unix(-1, 0), time.UnixMicro(-1), time.UnixMicro(maxExact), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, s := range localSubjects() {
		t.Run(s.name, func(t *testing.T) {
			lim := shaper.Limit{Rate: shaper.PerSecond(10)}
			call, _ := s.fresh(t, lim)
			for _, at := range bad {
				d, err := call(at.UnixMicro(), 1)
				if !errors.Is(err, shaper.ErrTimeRange) || d.Allowed {
					t.Errorf("at %v: %+v, %v; want shaper.ErrTimeRange", at, d, err)
				}
			}
			for i := range 10 {
				if d, err := call(hourT0, 1); err != nil || !d.Allowed {
					t.Fatalf("call %d at t0 after refused times: %+v, %v", i, d, err)
				}
			}
		})
	}
	// The edges are valid.
	for _, us := range []int64{0, maxExact - 1} {
		if d, err := shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(1)}).AllowNAt("k", time.UnixMicro(us), 1); err != nil || !d.Allowed {
			t.Errorf("at %dµs: %+v, %v; want allowed", us, d, err)
		}
	}
}

// TestRedisTimeRange: the scripts refuse a test time outside [0, 2^53) µs.
func TestRedisTimeRange(t *testing.T) {
	for _, s := range redisSubjects(t) {
		call, _ := s.fresh(t, shaper.Limit{Rate: shaper.PerSecond(10)})
		for _, us := range []int64{-1, maxExact} {
			if d, err := call(us, 1); err == nil || d.Allowed {
				t.Errorf("%s at %dµs: %+v, %v; want an error", s.name, us, d, err)
			}
		}
	}
}

// TestPeekRecordsNothing: a zero-cost call changes no later decision, for every
// meter: empty a bucket at t0, peek at t0+5s, ask at t0+2s; the answer is the
// un-peeked meter's.
func TestPeekRecordsNothing(t *testing.T) {
	subjects := append(localSubjects(), redisSubjectsIfAny(t)...)
	lim := shaper.Limit{Rate: shaper.PerSecond(1), Burst: 10}
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			l := lim
			if kinds[s.kind].window {
				l = shaper.Limit{Rate: shaper.Rate{Count: 10, Period: 10 * time.Second}}
			}
			for _, peek := range []bool{false, true} {
				call, _ := s.fresh(t, l)
				for range 10 {
					call(hourT0+1_000_000, 1)
				}
				if peek {
					call(hourT0+6_000_000, 0)
					call(hourT0+16_000_000, 0)
				}
				d, err := call(hourT0+3_000_000, 5)
				want, _ := replay(t, s, l, []op{
					{at: hourT0 + 1_000_000, n: 10},
					{at: hourT0 + 3_000_000, n: 5},
				})
				if err != nil || d != want {
					t.Errorf("peek=%v: %+v, %v; un-peeked meter says %+v", peek, d, err, want)
				}
			}
		})
	}
}
