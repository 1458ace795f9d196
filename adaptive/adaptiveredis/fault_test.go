package adaptiveredis_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/adaptive/adaptiveredis"
	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/adaptsim"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestFailLocalOutage: three Gates under FailLocal share a limit; Redis is
// frozen (SIGSTOP) for 3s under load. During the outage every gate admits
// locally, at most its share (the fleet limit it knew over the 3 processes
// it saw); after Redis returns the holds are granted by Redis again, under
// the fleet limit, the gates agree with the semaphore's limit, and Close
// returns and leaves no goroutine behind.
func TestFailLocalOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("20s of real time")
	}
	srv := redistest.Start(t)
	before := runtime.NumGoroutine()
	const c = 8
	down := adaptsim.NewRealtime(c, 10*time.Millisecond, 0.3)
	clients := newClients(t, srv.Addr, 3)
	var fromStore, fromLocal atomic.Int64
	obs := floodgate.ObserverFunc(func(e floodgate.Event) {
		if e.Kind != floodgate.KindAdmit {
			return
		}
		switch e.Source {
		case floodgate.SourceStore:
			fromStore.Add(1)
		case floodgate.SourceFailLocal:
			fromLocal.Add(1)
		}
	})
	f := &fleet{}
	{
		// One breaker per process, as in a deployment: each opens on its own
		// failures.
		var gs []*adaptiveredis.Gate
		for i, cl := range clients {
			brk := breaker.New("outage"+string(rune('a'+i)), breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 3, OpenDuration: 500 * time.Millisecond})
			gs = append(gs, adaptiveredis.New(cl, "outage", adaptiveredis.Config{
				Min: 1, Max: 100, Initial: 12, Breaker: brk, Policy: breaker.FailLocal, Observer: obs,
			}))
		}
		f = loadFleet(t, gs, down, 8)
	}

	time.Sleep(10 * time.Second) // the limit settles: real time the test measures
	limit := f.gates[0].Limit()
	for i, g := range f.gates {
		s := g.Stats()
		t.Logf("before the outage, gate %d: limit %d, processes %d, share %d", i, s.Limit, s.Processes, s.LocalShare)
		if s.Processes != 3 || s.LocalShare != max(1, s.Limit/3) {
			t.Errorf("gate %d before the outage: processes %d, share %d; want 3 and limit/3 = %d", i, s.Processes, s.LocalShare, max(1, s.Limit/3))
		}
	}

	srv.Pause()
	paused := time.Now()
	localBefore := fromLocal.Load()
	maxOver := make([]int64, len(f.gates)) // the most in flight above the share, per gate
	var maxSum int64
	for time.Since(paused) < 3*time.Second {
		time.Sleep(10 * time.Millisecond) // sampling period
		if time.Since(paused) < 500*time.Millisecond {
			continue // permits granted by Redis before the outage drain; calls in flight time out
		}
		var sum int64
		for i, g := range f.gates {
			s := g.Stats()
			sum += s.InFlight
			maxOver[i] = max(maxOver[i], s.InFlight-s.LocalShare)
		}
		maxSum = max(maxSum, sum)
	}
	srv.Resume()
	local := fromLocal.Load() - localBefore
	t.Logf("outage: %d holds granted locally; most in flight at once over the fleet %d (fleet limit before %d); most above the share per gate %v", local, maxSum, limit, maxOver)
	if local < 100 {
		t.Errorf("only %d holds granted by FailLocal during a 3s outage", local)
	}
	for i, over := range maxOver {
		if over > 0 {
			t.Errorf("gate %d held %d above its share during the outage", i, over)
		}
	}

	// Redis is back: grants come from Redis again, and the gates learn the
	// fleet's limit again.
	storeAt := fromStore.Load()
	deadline := time.Now().Add(10 * time.Second)
	for fromStore.Load() < storeAt+100 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	if got := fromStore.Load() - storeAt; got < 100 {
		t.Fatalf("%d holds granted by Redis within 10s of its return", got)
	}
	localAfter := fromLocal.Load()
	time.Sleep(time.Second) // a window in which no hold should be degraded
	if n := fromLocal.Load() - localAfter; n > 0 {
		t.Errorf("%d holds granted locally a second after Redis came back", n)
	}
	sem := f.gates[0].Semaphore()
	agreed := false
	var last []int64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !agreed; {
		st, err := sem.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = []int64{st.Limit}
		agreed = true
		for _, g := range f.gates {
			last = append(last, g.Limit())
			agreed = agreed && g.Limit() == st.Limit
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	if !agreed {
		t.Errorf("after the outage the gates' limits never equalled the semaphore's: [semaphore gates...] = %v", last)
	}
	for i, g := range f.gates {
		s := g.Stats()
		t.Logf("gate %d: flushes %d, flush errors %d, samples lost %d", i, s.Flushes, s.FlushErrors, s.Lost)
		if s.FlushErrors == 0 {
			t.Errorf("gate %d counted no failed flush during the outage", i)
		}
	}

	f.close() // fails if a Close does not return
	for _, cl := range clients {
		cl.Close()
	}
	floodgatetest.CheckGoroutines(t, before)
}

// TestPoliciesWhileRedisIsDown: with Redis frozen and the breaker open,
// FailClosed refuses every hold with breaker.ErrUnavailable at once, and
// FailOpen admits every hold, beyond the fleet limit.
func TestPoliciesWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	for _, policy := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			cl := newClients(t, srv.Addr, 1)[0]
			brk := breaker.New("policy", breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 2, OpenDuration: time.Minute})
			g := adaptiveredis.New(cl, "policy-"+policy.String(), adaptiveredis.Config{Initial: 2, Breaker: brk, Policy: policy})
			defer g.Close()
			ctx := t.Context()
			h, err := g.Hold(ctx, 1)
			if err != nil {
				t.Fatalf("Hold with Redis up: %v", err)
			}
			h.Release()
			srv.Pause()
			defer srv.Resume()
			for range 10 {
				if brk.State() == breaker.StateOpen {
					break
				}
				if h, err := g.TryHold(ctx, 1); err == nil {
					h.Release()
				}
			}
			if brk.State() != breaker.StateOpen {
				t.Fatalf("breaker not open after 10 holds with Redis frozen")
			}
			var held []floodgate.Held
			for range 5 { // more than the limit of 2
				start := time.Now()
				h, err := g.Hold(ctx, 1)
				if el := time.Since(start); el > 50*time.Millisecond {
					t.Errorf("Hold with the breaker open took %v", el)
				}
				switch policy {
				case breaker.FailClosed:
					if !errors.Is(err, breaker.ErrUnavailable) {
						t.Fatalf("FailClosed Hold with the breaker open: %v, want ErrUnavailable", err)
					}
				case breaker.FailOpen:
					if err != nil {
						t.Fatalf("FailOpen Hold with the breaker open: %v, want a grant", err)
					}
					held = append(held, h)
				}
			}
			for _, h := range held {
				h.Release()
			}
		})
	}
}
