package shaperredis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/internal/shapertest"
	"github.com/floodgate-go/floodgate/shaper"
)

// The tests in this file run internal/shapertest's checks of the meters'
// answers after limit changes, at out-of-order times and for zero-cost peeks
// on the Redis scripts, fed chosen times through the test-time argument; shaper
// runs the same checks on the in-process meters.

// algoOf maps a Meter's algorithm to shapertest's name for it.
var algoOf = [...]shapertest.Algo{
	kindGCRA:           shapertest.GCRA,
	kindTokenBucket:    shapertest.TokenBucket,
	kindFixedWindow:    shapertest.FixedWindow,
	kindSlidingLog:     shapertest.SlidingLog,
	kindSlidingCounter: shapertest.SlidingCounter,
}

// redisSubjects returns a subject per algorithm; each fresh meter uses a key of
// its own.
func redisSubjects(t *testing.T) []shapertest.Subject {
	db := redistest.Connect(t)
	var out []shapertest.Subject
	seq := 0
	for kind := range kinds {
		out = append(out, shapertest.Subject{Name: "Redis" + kindNames[kind], Algo: algoOf[kind],
			Fresh: func(t *testing.T, lim shaper.Limit) (shapertest.Call, func(shaper.Limit)) {
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

// TestRedisRetryAfterExactEverywhere is shaper's TestRetryAfterExactEverywhere
// for the Redis scripts: every denial, over random histories with limit
// changes and out-of-order times, has an exact RetryAfter.
func TestRedisRetryAfterExactEverywhere(t *testing.T) {
	seqs := 12
	if testing.Short() {
		seqs = 3
	}
	for _, s := range redisSubjects(t) {
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckExact(t, s, seqs, 25) })
	}
}

// TestRedisGCRASetLimitLowered is shaper's TestGCRASetLimitLowered for the
// GCRA and token-bucket scripts.
func TestRedisGCRASetLimitLowered(t *testing.T) {
	for _, s := range redisSubjects(t) {
		if s.Algo != shapertest.GCRA && s.Algo != shapertest.TokenBucket {
			continue
		}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckSetLimitLowered(t, s) })
	}
}

// TestRedisGCRAOutOfOrderNoForgiveness is shaper's
// TestGCRAOutOfOrderNoForgiveness for the GCRA script.
func TestRedisGCRAOutOfOrderNoForgiveness(t *testing.T) {
	for _, s := range redisSubjects(t) {
		if s.Algo != shapertest.GCRA {
			continue
		}
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckOutOfOrderNoForgiveness(t, s) })
	}
}

// TestRedisTimeRange: the scripts refuse a test time outside [0, 2^53) µs.
func TestRedisTimeRange(t *testing.T) {
	for _, s := range redisSubjects(t) {
		call, _ := s.Fresh(t, shaper.Limit{Rate: shaper.PerSecond(10)})
		for _, us := range []int64{-1, maxExact} {
			if d, err := call(us, 1); err == nil || d.Allowed {
				t.Errorf("%s at %dµs: %+v, %v; want an error", s.Name, us, d, err)
			}
		}
	}
}

// TestRedisPeekRecordsNothing is shaper's TestPeekRecordsNothing for every
// script: a zero-cost call changes no later decision.
func TestRedisPeekRecordsNothing(t *testing.T) {
	for _, s := range redisSubjects(t) {
		t.Run(s.Name, func(t *testing.T) { shapertest.CheckPeekRecordsNothing(t, s) })
	}
}
