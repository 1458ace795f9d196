package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/tour/tourcheck"
	"github.com/floodgate-go/floodgate/internal/redistest"
)

func TestTourRedis(t *testing.T) {
	db := redistest.Connect(t) // skips, or fails under CI=true, without REDIS_ADDR
	const d = time.Second
	var out bytes.Buffer
	start := time.Now()
	if err := run(t.Context(), config{Redis: db.Client.Options().Addr, Pods: 3, Duration: d}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("tour took %v:\n%s", time.Since(start), out.String())
	secs := tourcheck.Parse(t, out.String(), 3)
	for i, s := range secs {
		if got := s.Rows["limiters"]; len(got) != 2 || got[0] != "per-process limits" || got[1] != "shared (Redis)" {
			t.Errorf("job %d columns %q", i+1, got)
		}
		if _, ok := s.Rows["pod 3 admitted"]; !ok {
			t.Errorf("job %d has no per-pod rows", i+1)
		}
	}
	tourcheck.CheckShared(t, secs, d)
	// Per-process limits let the fleet through several times over: 3 pods × 5/min.
	adm := secs[2].Cell(t, "per tenant admitted", 0)
	if n := tourcheck.Num(t, adm); n <= 6 {
		t.Errorf("job 3 per-process column admitted %q: want more than the shared limit", adm)
	}
	if p, c := tourcheck.PeakUnderCap(t, secs[0], "peak concurrency", 0); p <= c {
		t.Logf("job 1 per-process peak %d did not exceed cap %d (possible on a slow machine)", p, c)
	}
}

// TestTourReadsREDIS_ADDR: the built fleet tour, run with REDIS_ADDR and no
// flag, uses that Redis (here a dead one: it must say so in one line).
func TestTourReadsREDIS_ADDR(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-d", "100ms")
	cmd.Env = append(os.Environ(), "REDIS_ADDR=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "127.0.0.1:1") || !strings.Contains(string(out), "unreachable") {
		t.Errorf("fleet tour with REDIS_ADDR=127.0.0.1:1: %v\n%s\nwant it to use that Redis and say it is unreachable", err, out)
	}
	if strings.Count(string(out), "\n") != 1 {
		t.Errorf("fleet tour with a dead Redis said %d lines, want 1:\n%s", strings.Count(string(out), "\n"), out)
	}
}

func TestTourRedisUnreachable(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := run(ctx, config{Redis: "127.0.0.1:1", Pods: 2, Duration: time.Second}, &out)
	if err == nil || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("run with a dead Redis = %v, want a one-line unreachable error", err)
	}
	if strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("error has several lines: %q", err)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, cfg := range []config{
		{Redis: "", Pods: 3, Duration: time.Second},
		{Redis: "127.0.0.1:1", Pods: 1, Duration: time.Second},
		{Redis: "127.0.0.1:1", Pods: 3},
	} {
		var out bytes.Buffer
		err := run(t.Context(), cfg, &out)
		if err == nil || strings.Contains(err.Error(), "unreachable") {
			t.Errorf("run(%+v) = %v, want it refused before dialling", cfg, err)
		}
		if out.Len() != 0 {
			t.Errorf("run(%+v) wrote %q", cfg, out.String())
		}
	}
}
