package floodgatetest

import (
	"testing"
	"time"
)

// Eventually polls cond every 20 ms until it holds, and fails t (Fatalf,
// naming what) if it does not within d. It is for state outside the process
// that no channel announces: a release Redis applies in the background, a
// restarted redis-server, a lease expiring in Redis. For anything in the
// process, wait on what signals it; for time, use testing/synctest.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
