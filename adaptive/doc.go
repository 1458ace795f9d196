// Package adaptive provides a concurrency gate whose limit finds itself from
// the downstream's latency, for the day the number you would have guessed
// ("50 report queries against the replica") is wrong.
//
// A Gate implements floodgate.Gate, so it is a bulkhead layer's Gate, a
// bulkheadpgx class's Gate and a bulkhead.Workers Gate as it stands. It
// measures how long each hold lasts (grant to Release) and, in rounds of a
// few hundred holds, moves its limit between Config.Min and Config.Max from
// one model: the downstream serves some number c of calls at once in a
// no-queue latency (the baseline); beyond c, calls queue and latency grows in
// proportion to the concurrency.
//
//   - latency at the baseline while the gate is full: the limit grows,
//     doubling each round until latency first rises (startup), then by 5%,
//     doubling with each increase in a row while latency stays below the
//     baseline;
//   - latency above the baseline by more than Tolerance, and beyond the
//     round's own measured noise: the limit is set at once to where the queue
//     vanishes, concurrency × baseline / latency (at most halving);
//   - drops (Drop, or holds released after their context's deadline) above
//     DropRate: the limit falls by a quarter.
//
// The baseline is what the field's adaptive limiters get wrong. This one is
// learnt only from rounds known not to queue: rounds during startup, and
// rounds after the concurrency fell (a decrease, or a probe round every
// ProbeInterval at 85% of the concurrency) in which the latency did not fall
// with it. If the latency stayed where it was after the concurrency fell by a
// fifth or more, the downstream itself got slower (a latency step): the
// baseline moves there and the limit goes back up. Queueing never raises it
// (a baseline that drifts up with the queue keeps the limit up: Envoy PR
// #11579), and the limit never grows while latency is above it (the runaway
// of Netflix concurrency-limits PR #134). Two rounds in a row clearly faster
// lower it. A round counts only the holds that began in it, after a settling
// time once the limit moved, and is decided once all of them have ended, so
// that holds queued under an older limit, or long holds cut off by the round's
// end, do not bias it; a round whose halves disagree (the downstream changed
// within it) is decided on its later half. The controller is internal/limitctl.
//
// Callers that cannot be admitted wait in FIFO order, as with
// semaphore.Weighted (the gate's queue is one); a consumer's MaxWait bounds
// the wait, and TryHold's refusal carries a RetryAfter estimated from the
// release rate. Hold and TryHold with Release allocate nothing.
//
// bench/RESULTS.md measures the gate on a simulated downstream beside
// failsafe-go's adaptivelimiter and an AIMD limiter. For a fleet sharing one
// downstream, adaptiveredis runs the same controller on the fleet's rounds,
// with a distsem semaphore as the fleet-wide cap.
package adaptive
