// Package adaptive provides a concurrency gate whose limit finds itself from
// the downstream's latency, for the day the number you would have guessed
// ("50 report queries against the replica") is wrong.
//
// A Gate implements floodgate.Gate, so it is a bulkhead layer's Gate, a
// bulkheadpgx class's Gate and a bulkhead.Workers Gate as it stands. It
// measures how long each hold lasts (grant to Release), in rounds, and moves
// its limit between Config.Min and Config.Max:
//
//   - latency at the baseline (the downstream's no-queue latency) while the
//     gate is full: the limit grows (doubling until latency first rises,
//     then by up to 10% a round);
//   - latency above the baseline by more than Tolerance (and beyond the
//     round's measured noise): the limit is set at once to where the queue
//     would vanish, concurrency × baseline / latency (at most halving);
//   - drops (Drop, or holds released after their context's deadline) above
//     DropRate: the limit falls by a quarter.
//
// The baseline is lowered by any round clearly faster, and raised only on
// evidence that a higher latency is not queueing: after the concurrency fell
// by a fifth or more, the latency did not fall with it. Every ProbeInterval
// the gate runs one round at four fifths of its concurrency to gather that
// evidence. Only holds that began after the last change of the limit are
// measured. This guards against the failures reported of other adaptive
// limiters: a baseline that drifts up with the queue so that the limit never
// comes back down (Envoy PR #11579), and a limit that runs away upward when
// latency stays moderately high (Netflix concurrency-limits PR #134). The
// controller is in internal/limitctl, documented there.
//
// Callers that cannot be admitted wait in FIFO order, as with
// semaphore.Weighted (the gate's queue is one); a consumer's MaxWait bounds
// the wait, and TryHold's refusal carries a RetryAfter estimated from the
// release rate.
//
// For a fleet sharing one downstream, adaptiveredis runs the same controller
// on the fleet's rounds, with a distsem semaphore as the fleet-wide cap.
package adaptive
