//go:build !race

// The race detector allocates on its own; allocation budgets are checked
// without it (as x/time does).

package breaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// TestDoSuccessPathAllocs pins the allocation budget of the guarded success
// path: 0 when Do derives no per-call context (CallTimeout < 0, or the
// caller's deadline is sooner), and context.WithDeadline's own otherwise.
func TestDoSuccessPathAllocs(t *testing.T) {
	ctxSooner, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cancellable, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	for _, tc := range []struct {
		name string
		cfg  breaker.Config
		ctx  context.Context
		max  float64
	}{
		{"timeout off", breaker.Config{CallTimeout: -1}, context.Background(), 0},
		{"caller deadline sooner", breaker.Config{CallTimeout: 2 * time.Hour}, ctxSooner, 0},
		{"timeout on, ctx never done", breaker.Config{}, context.Background(), 4},
		{"timeout on, cancellable ctx", breaker.Config{}, cancellable, 4},
	} {
		b := breaker.New("t", tc.cfg)
		got := testing.AllocsPerRun(1000, func() {
			breaker.Do(tc.ctx, b, breaker.FailClosed, storeCall, nil)
		})
		if got > tc.max {
			t.Errorf("%s: Do success path allocates %v times per call, want <= %v", tc.name, got, tc.max)
		}
		// As the Redis stores call it: a closure over the client, whose
		// result holds pointers (escape analysis differs by the result's
		// shape).
		client := &replyClient{vals: []int64{1, 0, 0}}
		got = testing.AllocsPerRun(1000, func() {
			breaker.Do(tc.ctx, b, breaker.FailClosed, func(ctx context.Context) (reply, error) { return client.call(ctx) }, nil)
		})
		if got > tc.max {
			t.Errorf("%s, a closure with a pointer result: Do success path allocates %v times per call, want <= %v", tc.name, got, tc.max)
		}
	}
}

type reply struct {
	vals []int64
	src  *replyClient
}

type replyClient struct{ vals []int64 }

func (c *replyClient) call(context.Context) (reply, error) { return reply{c.vals, c}, nil }

// TestDoOpenAllocs: an open breaker answers FailOpen and FailLocal without
// allocating; FailClosed allocates its *OpenError.
func TestDoOpenAllocs(t *testing.T) {
	b := breaker.New("t", breaker.Config{ConsecutiveFailures: 1, OpenDuration: time.Hour, Logger: discard})
	breaker.Do(context.Background(), b, breaker.FailOpen, func(context.Context) (int, error) { return 0, errRefused }, nil)
	for p, max := range map[breaker.Policy]float64{breaker.FailOpen: 0, breaker.FailLocal: 0, breaker.FailClosed: 1} {
		got := testing.AllocsPerRun(1000, func() {
			breaker.Do(context.Background(), b, p, storeCall, storeCall)
		})
		if got > max {
			t.Errorf("%v while open: %v allocs per call, want <= %v", p, got, max)
		}
	}
}
