// Package servertest decides what a test does when a server it needs is not
// configured: skip with a clear message when run by hand, fail under CI=true or
// FLOODGATE_REQUIRE_SERVERS=1, so that CI can never silently test nothing.
package servertest

import (
	"os"
	"testing"
)

// Required reports whether missing servers are failures rather than skips.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("FLOODGATE_REQUIRE_SERVERS") == "1"
}

// Missing ends the test because a server is unavailable: t.Fatalf when servers are
// required, t.Skipf otherwise. why says what is missing and how to provide it.
func Missing(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (servers are required: CI=true or FLOODGATE_REQUIRE_SERVERS=1; run `make test`)", why)
	}
	t.Skipf("%s; skipping (run `make test` to start the servers)", why)
}
