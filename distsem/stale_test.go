package distsem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

// TestTimedOutAcquireHoldsNothing: an acquire that timed out while Redis was
// frozen (SIGSTOP) was answered with an error, so when Redis wakes and runs
// the command still in its socket, it must not take the permit: with the
// breaker tripped by that timeout, the background release of the token cannot
// be sent until the breaker half-opens (a second later), and a stale grant
// would hold the semaphore's only permit for no one until then. After SIGCONT
// the permit is never seen held, over two seconds of reads.
func TestTimedOutAcquireHoldsNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	check := srv.Client()
	brk := breaker.New("stale", breaker.Config{CallTimeout: 100 * time.Millisecond, ConsecutiveFailures: 1})
	s := newSem(t, rdb, "stale", 1, distsem.Config{Breaker: brk})
	ctx := t.Context()
	p, err := s.TryAcquire(ctx, 1) // warm up: script cached, a connection open
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx)

	srv.Pause()
	if _, err := s.TryAcquire(ctx, 1); !errors.Is(err, breaker.ErrUnavailable) {
		srv.Resume()
		t.Fatalf("TryAcquire with Redis frozen: %v, want ErrUnavailable", err)
	}
	// Redis stays frozen a while after the caller gave up (a call that
	// reaches Redis within storecall.Slack of its deadline still runs).
	time.Sleep(100 * time.Millisecond)
	srv.Resume()
	woke := time.Now()
	var from, to time.Duration = -1, -1
	for time.Since(woke) < 2*time.Second {
		// The holders (the state's used is packed: the holder set says
		// the same).
		used, err := check.ZCard(context.Background(), "{stale}:h").Result()
		if err != nil {
			t.Fatal(err)
		}
		if used > 0 && from < 0 {
			from = time.Since(woke)
		}
		if used == 0 && from >= 0 && to < 0 {
			to = time.Since(woke)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if from >= 0 {
		t.Errorf("the permit of the acquire that timed out was held from %v to %v after SIGCONT (-1: still held)", from, to)
	}
}
