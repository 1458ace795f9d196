package main

import (
	"fmt"
	"time"

	"github.com/floodgate-go/floodgate/breaker"
)

// subject is what a scenario runs: one of floodgate's fleet limits or a peer.
type subject int

const (
	fgWindow  subject = iota // shaperredis.NewFixedWindow
	fgGCRA                   // shaperredis.NewMeter
	fgDistsem                // distsem.Semaphore (a gate)
	redisRate                // go-redis/redis_rate v10
	throttled                // throttled v2, GCRA on its go-redis v9 store
)

var subjectNames = [...]string{
	fgWindow:  "floodgate fixed window",
	fgGCRA:    "floodgate GCRA",
	fgDistsem: "floodgate distsem",
	redisRate: "redis_rate",
	throttled: "throttled",
}

func (s subject) String() string { return subjectNames[s] }

// peer reports whether s is another library (no breaker, no policy).
func (s subject) peer() bool { return s == redisRate || s == throttled }

// gate reports whether s caps concurrency rather than a rate.
func (s subject) gate() bool { return s == fgDistsem }

// fault is what goes wrong during a scenario.
type fault int

const (
	steady    fault = iota // nothing
	frozen                 // redis-server SIGSTOPped
	restarted              // redis-server killed, restarted empty
	failover               // promoted replica that lost recent writes
	partition              // one process's path to Redis frozen
	slow                   // every round trip 2 × CallTimeout
)

var faultNames = [...]string{
	steady:    "steady (no fault)",
	frozen:    "Redis frozen",
	restarted: "Redis restarted empty",
	failover:  "failover to a replica that lost recent writes",
	partition: "one process partitioned",
	slow:      "slow Redis (2 × CallTimeout)",
}

var faultKeys = [...]string{"steady", "frozen", "restarted", "failover", "partition", "slow"}

func (f fault) String() string { return faultNames[f] }

// scenario is one run: a subject through a fault under a policy.
type scenario struct {
	subj   subject
	fault  fault
	policy breaker.Policy // floodgate subjects only
}

func (sc scenario) name() string {
	if sc.subj.peer() {
		return fmt.Sprintf("%s/%s", sc.subj, faultKeys[sc.fault])
	}
	return fmt.Sprintf("%s/%s/%s", sc.subj, faultKeys[sc.fault], sc.policy)
}

// params are the sizes and times of a run.
type params struct {
	procs int   // processes sharing the limit
	limit int64 // L per 1 s window (rates), C held at once (gates)
	// offered load per process: rates, decisions per second (2L/N); gates,
	// acquires per second, each held hold (2C/N concurrency offered).
	rate      float64
	hold      time.Duration
	maxWait   time.Duration // a gate's Acquire deadline
	callTO    time.Duration // breaker CallTimeout, and the peers' per-call deadline
	warm      time.Duration // before the fault
	outage    time.Duration // frozen, partition, slow: how long
	down      time.Duration // restarted: how long Redis is gone before it comes back
	lag       time.Duration // failover: how long the replica lags before promotion
	recovery  time.Duration // after Redis returns
	steadyFor time.Duration
}

// fullParams are the published run's.
var fullParams = params{
	procs: 10, limit: 100, rate: 20,
	hold: 200 * time.Millisecond, maxWait: 500 * time.Millisecond,
	callTO: breaker.DefaultCallTimeout,
	warm:   5 * time.Second, outage: 30 * time.Second, down: 5 * time.Second,
	lag: 3 * time.Second, recovery: 10 * time.Second, steadyFor: 20 * time.Second,
}

// quickParams are the smoke test's: the same fleet, short phases.
var quickParams = params{
	procs: 10, limit: 100, rate: 20,
	hold: 200 * time.Millisecond, maxWait: 500 * time.Millisecond,
	callTO: breaker.DefaultCallTimeout,
	warm:   2 * time.Second, outage: 3 * time.Second, down: 2 * time.Second,
	lag: time.Second, recovery: 4 * time.Second, steadyFor: 4 * time.Second,
}

// gateLimit is C for the gate scenarios: the offered concurrency is
// rate × hold × procs = 40 = 2C.
const gateLimit = 20

// scenarios returns every scenario of the report, longest first (so that
// a parallel run ends together).
func scenarios() []scenario {
	var out []scenario
	pols := []breaker.Policy{breaker.FailOpen, breaker.FailClosed, breaker.FailLocal}
	for _, f := range []fault{frozen, partition, slow, restarted, failover} {
		for _, s := range []subject{fgWindow, fgGCRA, fgDistsem} {
			for _, p := range pols {
				out = append(out, scenario{s, f, p})
			}
		}
		out = append(out, scenario{redisRate, f, 0}, scenario{throttled, f, 0})
	}
	for _, s := range []subject{fgWindow, fgGCRA, fgDistsem} {
		out = append(out, scenario{s, steady, breaker.FailLocal})
	}
	out = append(out, scenario{redisRate, steady, 0}, scenario{throttled, steady, 0})
	return out
}
