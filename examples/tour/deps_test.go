package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsAreWhatTheTourUses checks that the tour builds only what it uses:
// a first `go run ./examples/tour` downloads and compiles every module in
// this list, so neither pgx nor OpenTelemetry nor Prometheus may be in it.
func TestDepsAreWhatTheTourUses(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, bad := range []string{"github.com/jackc/pgx", "go.opentelemetry.io/", "github.com/prometheus/"} {
		for p := range strings.Lines(string(out)) {
			if strings.HasPrefix(p, bad) {
				t.Errorf("the tour depends on %s", strings.TrimSpace(p))
				break
			}
		}
	}
}
