package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func buildTour(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tour")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestTourReadsREDIS_ADDR: the built tour, run with REDIS_ADDR set, does not
// ignore it silently: it says in one line that it runs locally and where the
// fleet tour is, then runs the local tour.
func TestTourReadsREDIS_ADDR(t *testing.T) {
	cmd := exec.Command(buildTour(t), "-d", "100ms")
	cmd.Env = append(os.Environ(), "REDIS_ADDR=127.0.0.1:1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tour with REDIS_ADDR=127.0.0.1:1: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var hint []string
	for l := range strings.Lines(stderr.String()) {
		if strings.Contains(l, "REDIS_ADDR") {
			hint = append(hint, l)
		}
	}
	if len(hint) != 1 || !strings.Contains(hint[0], "127.0.0.1:1") || !strings.Contains(hint[0], fleetHint) {
		t.Errorf("stderr lines about REDIS_ADDR: %q, want one naming 127.0.0.1:1 and %q\n%s", hint, fleetHint, stderr.String())
	}
	if !strings.Contains(stdout.String(), "local backends") || !strings.Contains(stdout.String(), "done in") {
		t.Errorf("tour with REDIS_ADDR did not run locally to the end:\n%s", stdout.String())
	}
}

// TestTourRefusesRedisFlags: -redis and -pods moved to the fleet tour; the
// local tour refuses them with a pointer there instead of running something
// else than was asked for.
func TestTourRefusesRedisFlags(t *testing.T) {
	bin := buildTour(t)
	for _, args := range [][]string{{"-redis", "127.0.0.1:6379"}, {"-pods", "4"}, {"-redis", ""}} {
		cmd := exec.Command(bin, append(args, "-d", "100ms")...)
		cmd.Env = append(os.Environ(), "REDIS_ADDR=")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("tour %q: %v, want exit status 2\n%s", args, err, out)
		}
		want := fleetHint + " " + args[0]
		if strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), want) {
			t.Errorf("tour %q said %q, want one line with %q", args, out, want)
		}
	}
}
