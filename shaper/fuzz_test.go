package shaper_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/shaper"
)

type admission struct {
	at time.Time
	n  int64
}

// FuzzMeters runs one random (time, cost) sequence through all five meters and
// checks the arithmetic: GCRA and the token bucket agree on every field; GCRA never
// admits more than burst + rate·t; the sliding log never exceeds its limit in any
// rolling window, the fixed window in any window, the sliding counter never 2×; a
// cost above the maximum is ErrTooLarge and nothing else is; and every
// RetryAfter is exact (denied 1µs before, admitted at it).
//
// Input: 4 bytes of limit (count, period, burst), then 3 bytes per step: a time
// step (µs, scaled by the period), a cost and a probe flag.
func FuzzMeters(f *testing.F) {
	f.Add([]byte{4, 10, 0, 3, 1, 0, 1, 0, 0, 1, 0, 0, 0x81, 200, 0, 2, 5, 1, 0x83})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 1, 0, 0, 0x81, 1, 0, 1, 1, 0, 0x81})
	f.Fuzz(fuzzMeters)
}

func fuzzMeters(t *testing.T, data []byte) {
	{
		if len(data) < 4 {
			return
		}
		count := 1 + int64(data[0]%20)
		period := time.Duration(1+int64(data[1])|int64(data[2])<<8) * 37 * time.Microsecond
		burst := 1 + int64(data[3]%25)
		rate := shaper.Rate{Count: count, Period: period}
		lim := shaper.Limit{Rate: rate, Burst: burst}
		win := shaper.Limit{Rate: rate}
		gcra, tb := shaper.NewMeter(lim), shaper.NewTokenBucket(lim)
		windows := map[string]meter{
			"FixedWindow":    shaper.NewFixedWindow(win),
			"SlidingLog":     shaper.NewSlidingLog(win),
			"SlidingCounter": shaper.NewSlidingCounter(win),
		}
		pUS := int64(period / time.Microsecond)
		at := t0
		var first time.Time
		var admittedGCRA int64
		admitted := map[string][]admission{}
		lastDenied := map[string]shaper.Decision{}

		check := func(name string, m meter, max int64, at time.Time, n int64, probe bool) {
			if d, ok := lastDenied[name]; ok && probe {
				delete(lastDenied, name)
				_ = d
			}
			d, err := m.AllowNAt("k", at, n)
			if n > max {
				if !errors.Is(err, shaper.ErrTooLarge) {
					t.Fatalf("%s: cost %d > %d: err = %v, want ErrTooLarge", name, n, max, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: cost %d: %v", name, n, err)
			}
			if d.Allowed {
				if n > 0 {
					admitted[name] = append(admitted[name], admission{at, n})
				}
				return
			}
			if d.RetryAfter <= 0 {
				t.Fatalf("%s: denied with RetryAfter %v", name, d.RetryAfter)
			}
			if probe {
				early, _ := m.AllowNAt("k", at.Add(d.RetryAfter-time.Microsecond), n)
				if early.Allowed {
					t.Fatalf("%s: admitted 1µs before RetryAfter %v", name, d.RetryAfter)
				}
				ok, _ := m.AllowNAt("k", at.Add(d.RetryAfter), n)
				if !ok.Allowed {
					t.Fatalf("%s: denied at RetryAfter %v (cost %d)", name, d.RetryAfter, n)
				}
				admitted[name] = append(admitted[name], admission{at.Add(d.RetryAfter), n})
			}
		}

		for s := data[4:]; len(s) >= 3; s = s[3:] {
			step := time.Duration(int64(s[0])*pUS/64) * time.Microsecond
			at = at.Add(step)
			n := int64(s[1] % 32)
			probe := s[2]&0x80 != 0

			// GCRA and token bucket: identical decisions.
			dg, eg := gcra.AllowNAt("k", at, n%(burst+2))
			dt, et := tb.AllowNAt("k", at, n%(burst+2))
			if dg != dt || (eg == nil) != (et == nil) {
				t.Fatalf("at %v cost %d: GCRA %+v %v, token bucket %+v %v", at.Sub(t0), n%(burst+2), dg, eg, dt, et)
			}
			if eg == nil && dg.Allowed && n%(burst+2) > 0 {
				if first.IsZero() {
					first = at
				}
				admittedGCRA += n % (burst + 2)
				el := int64(at.Sub(first) / time.Microsecond)
				if admittedGCRA*pUS > burst*pUS+el*count {
					t.Fatalf("GCRA admitted %d by %v: more than burst %d + rate·t", admittedGCRA, at.Sub(first), burst)
				}
			}
			if probe && eg == nil && !dg.Allowed {
				// Probe the exactness on the GCRA only if the probe does
				// not reorder time for the token bucket too.
				dg2, _ := gcra.AllowNAt("k", at.Add(dg.RetryAfter), n%(burst+2))
				dt2, _ := tb.AllowNAt("k", at.Add(dg.RetryAfter), n%(burst+2))
				if !dg2.Allowed || !dt2.Allowed {
					t.Fatalf("GCRA/token bucket denied at RetryAfter %v", dg.RetryAfter)
				}
				admittedGCRA += n % (burst + 2)
				at = at.Add(dg.RetryAfter)
			}

			nw := n % (count + 2)
			for _, name := range []string{"FixedWindow", "SlidingLog", "SlidingCounter"} {
				check(name, windows[name], count, at, nw, probe)
			}
			if probe {
				// Probes moved the window meters' clocks forward; keep
				// the shared time monotonic.
				for _, a := range admitted {
					if len(a) > 0 && a[len(a)-1].at.After(at) {
						at = a[len(a)-1].at
					}
				}
			}
		}

		// Window invariants over what was admitted.
		rolling := func(name string) int64 {
			a := admitted[name]
			var best, sum int64
			j := 0
			for i := range a {
				sum += a[i].n
				for !a[j].at.After(a[i].at.Add(-period)) {
					sum -= a[j].n
					j++
				}
				best = max(best, sum)
			}
			return best
		}
		if got := rolling("SlidingLog"); got > count {
			t.Fatalf("SlidingLog: %d in a rolling window, limit %d", got, count)
		}
		if got := rolling("SlidingCounter"); got > 2*count {
			t.Fatalf("SlidingCounter: %d in a rolling window, more than 2×%d", got, count)
		}
		perWindow := map[int64]int64{}
		for _, a := range admitted["FixedWindow"] {
			w := a.at.UnixMicro() / pUS
			perWindow[w] += a.n
			if perWindow[w] > count {
				t.Fatalf("FixedWindow: %d in one window, limit %d", perWindow[w], count)
			}
		}
	}
}
