package adaptsim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate/internal/adaptsim"
)

// tiny is an overload of two classes on a downstream of 2 workers, short
// enough to reason about by hand.
func tiny() adaptsim.Overload {
	return adaptsim.Overload{
		Name:    "tiny",
		Classes: []adaptsim.Class{{Name: "a", Share: 0.25}, {Name: "b", Share: 0.75}},
		Workers: 2, Median: 10 * time.Millisecond, Sigma: 0.5,
		Base: 50, Peak: 400,
		From: 2 * time.Second, To: 4 * time.Second, Length: 6 * time.Second,
	}
}

// TestClassMeasure measures a hand-made run: success and p99 by class over
// the overload, goodput by completion time, the base load's second half,
// and the bins where shedding starts and stops.
func TestClassMeasure(t *testing.T) {
	o := tiny()
	ms := time.Millisecond
	var calls []adaptsim.Call
	add := func(at time.Duration, class int, lat time.Duration, ok bool) {
		calls = append(calls, adaptsim.Call{At: at, Class: class, Latency: lat, OK: ok})
	}
	add(500*ms, 1, ms, false)    // the warm-up: not counted
	add(1500*ms, 1, 20*ms, true) // the base load
	add(1600*ms, 1, 0, false)
	add(1700*ms, 0, 40*ms, true)
	add(1990*ms, 0, 30*ms, true) // completes in the overload: goodput
	// The overload: class a all served, class b one of four; the first bin
	// that sheds is [2.3s, 2.4s).
	for i := range 100 {
		add(2000*ms+time.Duration(i)*ms, 0, time.Duration(i+1)*ms, true)
	}
	add(2300*ms, 1, 5*ms, true)
	add(2310*ms, 1, 0, false)
	add(2320*ms, 1, 0, false)
	add(2330*ms, 1, 0, false)
	// After it: the last bin that sheds is [4.4s, 4.5s); one refusal among
	// 21 arrivals of [4.6s, 4.7s) is below ShedShare.
	add(4400*ms, 1, 0, false)
	add(4600*ms, 1, 0, false)
	for i := range 20 {
		add(4600*ms+time.Duration(i)*ms, 0, ms, true)
	}
	m := adaptsim.ClassMeasure(o, adaptsim.ClassResult{Calls: calls})
	a, b := m.Classes[0], m.Classes[1]
	if a.Name != "a" || a.Offered != 100 || a.Success != 1 || a.P99 != 99*ms {
		t.Errorf("class a: %+v, want 100 offered, all served, p99 99ms", a)
	}
	if want := float64(99*ms) / float64(o.NoLoadP99()); math.Abs(a.P99x-want) > 1e-9 {
		t.Errorf("class a: P99x %v, want %v", a.P99x, want)
	}
	if b.Offered != 4 || b.Success != 0.25 || b.P99 != 5*ms {
		t.Errorf("class b: %+v, want 4 offered, a quarter served, p99 5ms", b)
	}
	if want := 102 / 2.0 / o.Capacity(); math.Abs(m.Goodput-want) > 1e-9 {
		t.Errorf("goodput %v, want %v (102 served in 2s)", m.Goodput, want)
	}
	if m.BaseRefused != 0.25 || m.BaseP99 != 40*ms {
		t.Errorf("base load: %.2f refused, p99 %v; want 0.25, 40ms", m.BaseRefused, m.BaseP99)
	}
	if !m.Started || m.ShedStart != 400*ms {
		t.Errorf("shedding started %v (%v), want 400ms after the overload's start", m.ShedStart, m.Started)
	}
	if !m.Stopped || m.ShedStop != 500*ms {
		t.Errorf("shedding stopped %v (%v), want 500ms after its end", m.ShedStop, m.Stopped)
	}
	// Refusals in the run's last second: it never stopped.
	m = adaptsim.ClassMeasure(o, adaptsim.ClassResult{Calls: append(calls, adaptsim.Call{At: 5500 * ms})})
	if m.Stopped {
		t.Errorf("a refusal at 5.5s of 6s: Stopped, want not")
	}
}

// admitFirst serves class a's calls and refuses b's.
type admitFirst struct{}

func (admitFirst) Do(_ context.Context, class string, serve func()) error {
	if class != "a" {
		return errors.New("refused")
	}
	serve()
	return nil
}

func (admitFirst) Limit() int { return 1 }

// TestRunClasses runs tiny through a limiter that refuses class b: the
// arrivals follow the rates and the shares, the served calls wait for the
// downstream's two workers, and the same number of runs draws the same
// arrivals.
func TestRunClasses(t *testing.T) {
	o := tiny()
	var first []adaptsim.Call
	for range 2 {
		synctest.Test(t, func(t *testing.T) {
			res := adaptsim.RunClasses(o, admitFirst{}, 7)
			want := o.Base*(o.From+o.Length-o.To).Seconds() + o.Peak*(o.To-o.From).Seconds()
			if n := float64(len(res.Calls)); math.Abs(n-want) > 4*math.Sqrt(want) {
				t.Errorf("%d calls, want about %.0f", len(res.Calls), want)
			}
			share := 0
			for i, c := range res.Calls {
				if c.OK != (c.Class == 0) {
					t.Fatalf("call %+v: served %v", c, c.OK)
				}
				if c.Class == 0 {
					share++
				}
				if i > 0 && c.At < res.Calls[i-1].At {
					t.Fatalf("calls out of order at %d", i)
				}
			}
			if s := float64(share) / float64(len(res.Calls)); math.Abs(s-0.25) > 0.05 {
				t.Errorf("class a is %.3f of the calls, want 0.25", s)
			}
			if res.MaxInFlight < 3 {
				t.Errorf("at most %d calls in the downstream: class a's peak (100/s, 11ms each, 2 workers) should queue", res.MaxInFlight)
			}
			if len(res.Samples) != int(o.Length/adaptsim.SampleEvery) {
				t.Errorf("%d samples, want %d", len(res.Samples), o.Length/adaptsim.SampleEvery)
			}
			if first == nil {
				first = res.Calls
			} else if len(first) != len(res.Calls) || first[0].At != res.Calls[0].At || first[len(first)-1].At != res.Calls[len(first)-1].At {
				t.Errorf("two runs of the same number drew different arrivals")
			}
		})
	}
}
