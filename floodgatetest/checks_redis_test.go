package floodgatetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
)

// redisFor returns a Redis address and a key prefix for the test, deleting
// the prefix's keys at the end; pods get clients of their own from client.
func redisFor(t *testing.T) (addr, prefix string) {
	t.Helper()
	addr = floodgatetest.RedisAddr(t)
	prefix = floodgatetest.KeyPrefix(t)
	t.Cleanup(func() {
		rdb := redis.NewClient(floodgatetest.RedisOptions(addr))
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := floodgatetest.DeletePrefix(ctx, rdb, prefix); err != nil {
			t.Errorf("DeletePrefix: %v", err)
		}
	})
	return addr, prefix
}

// client returns a client of addr, closed at the end of the test.
func client(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(floodgatetest.RedisOptions(addr))
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestNoOverAdmissionDistsem: four pods, each with its own client and
// distsem.Semaphore of the same name, never hold more than the limit at
// once.
func TestNoOverAdmissionDistsem(t *testing.T) {
	addr, prefix := redisFor(t)
	const limit = 3
	fleet := floodgatetest.Fleet{Pods: 4, Callers: 2, New: func(int) floodgatetest.Runner {
		s := distsem.New(client(t, addr), prefix+"sem", limit, distsem.Config{})
		t.Cleanup(func() { s.Close() })
		return floodgatetest.GateRunner(s, 1)
	}}
	rep := floodgatetest.CheckNoOverAdmission(t, fleet,
		floodgatetest.Load{Duration: time.Second, Hold: 10 * time.Millisecond},
		floodgatetest.Bound{Concurrent: limit})
	if rep.MaxConcurrent < 2 {
		t.Errorf("MaxConcurrent = %d: the load did not contend", rep.MaxConcurrent)
	}
}

// TestNoOverAdmissionShaperredis: four pods, each with its own client and
// meter on the same key, stay within the limit's bound in every second.
func TestNoOverAdmissionShaperredis(t *testing.T) {
	addr, prefix := redisFor(t)
	lim := shaper.Limit{Rate: shaper.PerSecond(40), Burst: 5}
	fleet := floodgatetest.Fleet{Pods: 4, Callers: 2, New: func(int) floodgatetest.Runner {
		m := shaperredis.NewMeter(client(t, addr), lim, shaperredis.Config{Prefix: prefix})
		return floodgatetest.RateRunner(m, "k", 1)
	}}
	rep := floodgatetest.CheckNoOverAdmission(t, fleet,
		floodgatetest.Load{Duration: 1500 * time.Millisecond, Pause: 5 * time.Millisecond},
		floodgatetest.Bound{Window: time.Second, Admitted: floodgatetest.RateBound(lim, time.Second)})
	if rep.Refused == 0 {
		t.Errorf("no call refused: the load did not test the rate")
	}
}

func TestHonestRetryAfterShaperredis(t *testing.T) {
	addr, prefix := redisFor(t)
	for _, m := range []struct {
		name string
		new  func(redis.UniversalClient, shaper.Limit, shaperredis.Config) *shaperredis.Meter
		lim  shaper.Limit
	}{
		{"gcra", shaperredis.NewMeter, shaper.Limit{Rate: shaper.PerSecond(20), Burst: 2}},
		{"slidinglog", shaperredis.NewSlidingLog, shaper.Limit{Rate: shaper.Rate{Count: 3, Period: 100 * time.Millisecond}}},
	} {
		t.Run(m.name, func(t *testing.T) {
			meter := m.new(client(t, addr), m.lim, shaperredis.Config{Prefix: prefix + m.name + ":"})
			floodgatetest.CheckRetryAfter(t, floodgatetest.RateRunner(meter, "k", 1), floodgatetest.RetryCheck{})
		})
	}
}

func TestPermitsBalanceDistsem(t *testing.T) {
	addr, prefix := redisFor(t)
	s := distsem.New(client(t, addr), prefix+"sem", 4, distsem.Config{})
	defer s.Close()
	floodgatetest.CheckPermitsBalance(t, s, floodgatetest.BalanceCheck{
		Limit: 4, MaxN: 2, Callers: 6, Ops: 25, MaxDelay: 5 * time.Millisecond,
		InUse: func() int64 {
			st, err := s.Stats(context.Background())
			if err != nil {
				t.Errorf("Stats: %v", err)
			}
			return st.InUse
		},
	})
}

// TestAnswersWithinShaperredis: a meter whose breaker has a CallTimeout
// answers within it under every fault.
func TestAnswersWithinShaperredis(t *testing.T) {
	addr, prefix := redisFor(t)
	const callTimeout = 150 * time.Millisecond
	for _, policy := range []breaker.Policy{breaker.FailClosed, breaker.FailOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			rep := floodgatetest.CheckAnswersWithin(t, floodgatetest.FaultCheck{
				Target:      addr,
				CallTimeout: callTimeout,
				New: func(proxy string) floodgatetest.Runner {
					m := shaperredis.NewMeter(client(t, proxy), shaper.Limit{Rate: shaper.PerSecond(1000)}, shaperredis.Config{
						Prefix: prefix, Policy: policy,
						Breaker: breaker.New("redis", breaker.Config{CallTimeout: callTimeout}),
					})
					return floodgatetest.RateRunner(m, "k", 1)
				},
			})
			if len(rep.Results) != len(floodgatetest.Faults) {
				t.Fatalf("%d results, want one per fault", len(rep.Results))
			}
			frozen := rep.Results[1]
			if frozen.Fault != floodgatetest.FaultFreeze || frozen.Worst < callTimeout/2 {
				t.Errorf("under freeze: %+v; want calls that waited for the CallTimeout", frozen)
			}
		})
	}
}

// TestAnswersWithinBroken: a client without a call timeout is caught, both
// when its calls are late and when they never return.
func TestAnswersWithinBroken(t *testing.T) {
	addr, _ := redisFor(t)
	for _, c := range []struct {
		name        string
		readTimeout time.Duration
		want        string
	}{
		{"late", time.Second, "under freeze, 2 of 2 calls took longer than 200ms"},
		{"hung", -1, "under freeze, calls still running after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := floodgatetest.AnswersWithin(t.Context(), floodgatetest.FaultCheck{
				Target:      addr,
				CallTimeout: 100 * time.Millisecond,
				Faults:      []floodgatetest.Fault{floodgatetest.FaultNone, floodgatetest.FaultFreeze},
				Calls:       2,
				Callers:     2,
				New: func(proxy string) floodgatetest.Runner {
					// ContextTimeoutEnabled false: the context's deadline is ignored,
					// only ReadTimeout bounds a call.
					rdb := redis.NewClient(&redis.Options{Addr: proxy, DisableIdentity: true, ReadTimeout: c.readTimeout, MaxRetries: -1})
					t.Cleanup(func() { rdb.Close() })
					return func(ctx context.Context, fn func(context.Context) error) error {
						ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // the deadline the client ignores
						defer cancel()
						if err := rdb.Ping(ctx).Err(); err != nil {
							return err
						}
						return fn(ctx)
					}
				},
			})
			wantViolation(t, err, "AnswersWithin", c.want)
		})
	}
}
