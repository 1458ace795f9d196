package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsAreWhatTheTourUses checks that the tour builds only what it uses:
// a first `go -C examples run ./tour` downloads and compiles every module in
// this list, so neither a Redis client (go-redis alone takes longer to
// compile than the tour takes to run) nor pgx, OpenTelemetry or Prometheus
// may be in it. The fleet tour, examples/tour/fleet, is the one with Redis.
func TestDepsAreWhatTheTourUses(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, bad := range []string{"github.com/redis/", "github.com/jackc/pgx", "go.opentelemetry.io/", "github.com/prometheus/"} {
		var via []string
		for p := range strings.Lines(string(out)) {
			if strings.HasPrefix(p, bad) {
				via = append(via, strings.TrimSpace(p))
			}
		}
		if len(via) > 0 {
			t.Errorf("the tour depends on %s (%d packages: %s)", bad, len(via), strings.Join(via, " "))
		}
	}
}
