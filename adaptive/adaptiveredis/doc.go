// Package adaptiveredis is the fleet-wide adaptive concurrency gate: N
// processes in front of one downstream share ONE limit, found from the
// downstream's latency by the controller of package adaptive
// (internal/limitctl) running on the fleet's rounds, and enforced as one cap
// across the fleet by a distsem semaphore. Twelve pods that each found
// "their" limit with adaptive.Gate would add up to twelve times what one
// replica can take; twelve Gates of the same name here admit, together,
// what it can take.
//
// # Usage
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	g := adaptiveredis.New(rdb, "replica-reports", adaptiveredis.Config{
//		Min: 2, Max: 200, Initial: 10,
//		Policy: breaker.FailLocal,
//	})
//	defer g.Close()
//	// g is a floodgate.Gate: a bulkhead layer's Gate, a bulkheadpgx class's,
//	// a bulkhead.Workers Gate.
//
// # Design
//
// The cap. The fleet's in-flight weight is held in a distsem.Semaphore named
// name: it is exact across processes, and a hold gets its lease, its place
// in the fleet's FIFO queue, its fencing number and the breaker's failure
// policy from it. The controller moves the semaphore's stored limit with
// distsem's SetLimit (growing hands the new room to waiters at once;
// shrinking revokes nothing: holders drain).
//
// The rounds are the fleet's. Redis keeps one round open at a time: its
// number, its start (Redis TIME) and its totals (samples, summed latency and
// squared latency, drops, whether the fleet was full, the most weight seen in
// use at the semaphore), with the controller's State (JSON) and its version,
// in one hash. Each process measures the holds that began after it learned
// that the current round started (each Held is tagged with its start on the
// process's monotonic clock; the round's start is placed on that clock when
// the answer that announced it arrives, so a hold counted never began
// before it), and every FlushInterval it sends its sums with one script
// call: they are added if the round they were measured in is still the
// current one and discarded otherwise, and the process is counted among the
// round's reporters. Unlike adaptive.Gate, which counts the holds begun in a
// round and decides once every one of them has ended, a fleet round is cut by
// time: it is decided on the holds that had ended and been flushed when a
// flush finds it long enough and with enough samples, so a hold still out
// then is left out. (Counting each hold's end across the fleet would cost a
// round of flushes more per decision.) Rounds last at least four mean
// latencies, which keeps that bias small, but it leans the fleet's latency
// readings a little short. The same call returns the round's totals, Redis's time
// and, when its version moved, the State. A process that finds the round due
// (limitctl's rule, on the fleet's totals and Redis's clock) decides it: it
// runs the controller's Step on the State and writes the new State, and the
// next round (starting the controller's settle time later when the limit
// moved; kept open when the decision pooled it), with a compare-and-set on
// the State's version, so of several processes that find it due at once
// exactly one decides and the others change nothing. The winner then sets
// the semaphore's limit. A process that dies between the two loses nothing:
// a process that sees the semaphore's limit differ from the State's in two
// flushes of the same State version sets it (Stats.Healed), which also
// covers semaphore keys that expired while the State lived on. So the fleet
// loses at most the decision of a round whose decider died before writing
// it (the round is then decided again by the next process that flushes).
//
// All keys share the hash tag {name} (the semaphore's keys and the gate's
// {name}:a and {name}:ap), so the gate runs on Redis Cluster; the gate's
// keys expire after max(10 minutes, 10 × MaxRound) without a decision.
// Every process of a fleet should be configured alike: the controller's
// settings are each process's own, used when it decides.
//
// # When Redis is sick
//
// Holds follow the semaphore's failure policy (Config.Policy, through
// Config.Breaker, which the gate's own calls share):
//
//   - breaker.FailClosed (the default) refuses: breaker.ErrUnavailable, with
//     RetryAfter while the breaker is open;
//   - breaker.FailOpen admits every hold, without any fleet bound;
//   - breaker.FailLocal admits up to a local share per process: the last
//     fleet limit this process learned divided by the processes seen
//     reporting in the last round (the last round closed, or the open one
//     if more reported in it; at least 1), so that the fleet's total
//     stays about the fleet limit (its floor; at least one per process). The
//     share counts the permits the process already held in Redis (as far as
//     they fit). Before a process has learned anything its share is Initial.
//     A process idle in the last round is not counted, so when it wakes
//     during an outage the total can exceed the limit by its share.
//
// The limit does not move while Redis is unreachable: a flush that fails
// drops its samples (Stats.Lost), never blocks a hold or a Release, and is
// not retried; the next flush reports what came after. When Redis answers
// again the semaphore's limit, which Redis kept, applies again, and the
// rounds go on.
//
// # Cost
//
// Per hold, the semaphore's: one script call to acquire (one more per wait
// heartbeat when it queues; a hand-off wakes it with no call) and one to
// release, plus a renewal every Lease/3 for a hold longer than that. Per
// process, one flush call every FlushInterval while it holds, waits or
// measured anything (none when idle), and per round, one close call by the
// process that decides it (and one by each process that found the round due
// at the same moment and loses the compare-and-set), plus one SetLimit call
// when the limit moved. So with FlushInterval 100ms a busy process adds about
// 10 calls a second to its holds' two each: 2.12 calls per hold measured
// with 4 processes and about 400 holds a second (bench/RESULTS.md).
//
// # Concurrency
//
// A Gate is safe for simultaneous use by multiple goroutines. It starts one
// goroutine in New, the flusher, which makes every call of the gate's own
// (flush, close, SetLimit); Close stops it and waits for it.
package adaptiveredis
