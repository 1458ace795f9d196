package floodgatetest

import (
	"runtime"
	"testing"
	"time"
)

// CheckGoroutines fails the test, with a dump of every goroutine, unless the
// number of goroutines falls back to at most before within 5 seconds: call
// before := runtime.NumGoroutine() before starting what must clean up after
// itself (a proxy, a limiter's client, a pool) and CheckGoroutines(t, before)
// after closing it. Goroutines take a moment to exit after they signal that
// they are done, so it polls.
//
// It counts every goroutine of the process, so it is meant for tests that do
// not run in parallel with others (no t.Parallel). Inside a testing/synctest
// bubble, synctest itself reports goroutines left at the end: use that.
func CheckGoroutines(t testing.TB, before int) {
	t.Helper()
	var now int
	for deadline := time.Now().Add(5 * time.Second); ; {
		if now = runtime.NumGoroutine(); now <= before || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	if now > before {
		buf := make([]byte, 1<<20)
		t.Errorf("floodgatetest: %d goroutines left, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
	}
}
