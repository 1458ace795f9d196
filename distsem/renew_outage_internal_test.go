package distsem

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// renewCalls counts the renew calls (EVALSHA) that reach the client, and
// those that returned a reply, for the log: the EVAL that follows a NOSCRIPT
// (the first renewals on a new server) is not counted.
type renewCalls struct{ sent, answered atomic.Int64 }

// count is h's onRenew.
func (h *renewCalls) count(ctx context.Context, c redis.Cmder, n redis.ProcessHook) error {
	err := n(ctx, c)
	h.sent.Add(1)
	if err == nil {
		h.answered.Add(1)
	}
	return err
}

// TestManyPermitsRideOutRedisBlip: 2000 permits of one Semaphore are due for
// renewal while Redis is frozen until the Semaphore's breaker opens. Their
// renewals fail (and the breaker rejects more of them while it is open), so
// they are put back on the schedule again and again; after Redis is back,
// every permit is renewed before its local deadline and none is lost. Then all
// are released and nothing stays held.
func TestManyPermitsRideOutRedisBlip(t *testing.T) {
	if testing.Short() {
		t.Skip("2000 permits on a private redis-server")
	}
	const n = 2000
	// 15s, not 9s: with 9s, 2000 renewals under -race on a loaded machine
	// did not all get through between Redis's return and the first
	// deadlines (167 permits lost); the renewals were still all failed and
	// retried during the freeze.
	const lease = 15 * time.Second
	srv := redistest.Start(t)
	rdb := srv.Client()
	calls := &renewCalls{}
	rdb.AddHook(onRenew(calls.count))
	s := New(rdb, "blip", n, Config{Lease: lease})
	defer s.Close()
	ctx := t.Context()
	ps := make([]*Permit, n)
	start := time.Now()
	for i := range ps {
		p, err := s.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("TryAcquire %d: %v", i, err)
		}
		ps[i] = p
	}

	// Frozen before the first renewals are due (Lease/3 after each grant),
	// until they have failed often enough to open the breaker.
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	floodgatetest.Eventually(t, lease/2, "the breaker did not open while Redis was frozen", func() bool {
		return s.fail.st.Breaker.State() == breaker.StateOpen
	})
	srv.Resume()
	paused = false
	resumed := time.Now()
	t.Logf("%d grants in %v; breaker open %v after the last; %d renew calls sent, %d answered", n, ps[n-1].granted.Sub(start), resumed.Sub(ps[n-1].granted), calls.sent.Load(), calls.answered.Load())

	// Every permit renewed after the blip: its deadline (the send time of its
	// last successful renewal + Lease) is at least Lease after about when
	// Redis came back.
	floodgatetest.Eventually(t, lease, "not every permit was renewed after the blip", func() bool {
		for _, p := range ps {
			p.mu.Lock()
			ok := !p.deadline.Before(resumed.Add(lease-200*time.Millisecond)) && !p.isLost
			lost := p.isLost
			p.mu.Unlock()
			if lost {
				t.Fatalf("a permit was lost (%d lost)", s.lost.Load())
			}
			if !ok {
				return false
			}
		}
		return true
	})
	t.Logf("all renewed %v after Redis came back; %d renew calls sent, %d answered", time.Since(resumed), calls.sent.Load(), calls.answered.Load())
	if l := s.lost.Load(); l != 0 {
		t.Fatalf("%d permits lost", l)
	}
	if st := stats(t, s); st.Holders != n || st.InUse != n {
		t.Fatalf("Stats after the blip = %+v, want %d holders and %d in use", st, n, n)
	}
	for _, p := range ps {
		if err := p.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	s.renewals.mu.Lock()
	left := len(s.renewals.heap)
	s.renewals.mu.Unlock()
	if left != 0 {
		t.Errorf("%d permits still on the schedule after all were released", left)
	}
	if st := stats(t, s); st.Holders != 0 || st.InUse != 0 {
		t.Errorf("Stats after every Release = %+v, want nothing held", st)
	}
}

func stats(t *testing.T, s *Semaphore) Stats {
	t.Helper()
	st, err := s.Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}
