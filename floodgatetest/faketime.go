package floodgatetest

import (
	"testing/synctest"
	"time"
)

// Advance moves the fake clock of the testing/synctest bubble it is called
// in forward by d, and returns once every other goroutine of the bubble is
// durably blocked again: whatever was due by then (a waiter's timer, a
// breaker's open period, a queue's next slot) has happened, and its effects
// can be checked. It is time.Sleep(d) followed by synctest.Wait(), the two
// steps of every fake-time test, named. It panics outside a bubble.
//
// floodgate's local types (semaphore, shaper's meters, Limiter and Queue,
// breaker, bulkhead over local layers, adaptive.Gate, backoff) read time.Now
// and use time's timers, so they run on the bubble's fake clock: no clock
// to inject. The Redis-backed ones (distsem, shaperredis, adaptiveredis)
// decide by Redis's clock over real sockets, so test them in real time,
// with a [Proxy] for the faults.
func Advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// Steps calls f n times, d of the bubble's fake clock apart, each time once
// every other goroutine of the bubble is durably blocked: f(0) after
// synctest.Wait(), then [Advance](d) and f(1), and so on; i is the step and
// elapsed the fake time since the first. It is the fake-clock loop of a test
// that watches a limiter over time ("one admitted every 200ms"). It panics
// outside a testing/synctest bubble.
func Steps(n int, d time.Duration, f func(i int, elapsed time.Duration)) {
	start := time.Now()
	for i := range n {
		if i == 0 {
			synctest.Wait()
		} else {
			Advance(d)
		}
		f(i, time.Since(start))
	}
}
