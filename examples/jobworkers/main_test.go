package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "jobworkers"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// buildOnce compiles the example once for every test.
var buildOnce = sync.OnceValues(func() ([]byte, error) {
	return exec.Command("go", "build", "-o", filepath.Join(binDir, "jobworkers"), ".").CombinedOutput()
})

// build compiles the example, since the parent re-executes itself.
func build(t *testing.T) string {
	t.Helper()
	if out, err := buildOnce(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(binDir, "jobworkers")
}

var fleetLine = regexp.MustCompile(`fleet started (\d+) jobs at ([0-9.]+)/s \(limit (\d+)/s\)`)

func TestFleetRate(t *testing.T) {
	db := redistest.Connect(t)
	bin := build(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "-workers", "3", "-rate", "10", "-cap", "4", "-d", "3s", "-job", "200ms", "-background", "2", "-interactive", "500ms",
		"-redis", db.Client.Options().Addr, "-name", db.Prefix+"jw")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("jobworkers: %v\n%s%s", err, out.String(), errb.String())
	}
	t.Logf("output:\n%s", out.String())
	if n := strings.Count(out.String(), "\nworker "); n != 3 {
		t.Errorf("%d worker lines, want 3", n)
	}
	m := fleetLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no fleet line")
	}
	n, _ := strconv.Atoi(m[1])
	r, _ := strconv.ParseFloat(m[2], 64)
	// 10/s shared by 3 processes that each could start 20/s alone (4 at once, 200ms).
	if r > 10*1.2 || r < 10*0.6 {
		t.Errorf("fleet start rate %v/s, want about 10/s", r)
	}
	if n < 20 || n > 10*3+1+3*5 { // 3s at 10/s, plus the backlogs drained at 10/s (under 1.5s)
		t.Errorf("fleet started %d jobs in 3s at 10/s", n)
	}
}

// TestClassesAndReservation runs two workers with the README's two classes:
// interactive jobs start ahead of the background backlog, and background jobs
// never take a worker's last 2 slots.
func TestClassesAndReservation(t *testing.T) {
	db := redistest.Connect(t)
	bin := build(t)
	var out, errb bytes.Buffer
	const capN = 4
	cmd := exec.Command(bin, "-workers", "2", "-rate", "20", "-cap", strconv.Itoa(capN), "-d", "2s", "-job", "300ms",
		"-background", "8", "-interactive", "200ms", "-redis", db.Client.Options().Addr, "-name", db.Prefix+"jw")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("jobworkers: %v\n%s%s", err, out.String(), errb.String())
	}
	t.Logf("output:\n%s", out.String())
	workers := 0
	for line := range strings.Lines(out.String()) {
		if !strings.HasPrefix(line, "worker ") {
			continue
		}
		workers++
		got := map[string][]string{}
		for _, m := range classRE.FindAllStringSubmatch(line, -1) {
			got[m[1]] = m[2:]
		}
		ia, bg := got["interactive"], got["background"]
		if ia == nil || bg == nil {
			t.Fatalf("worker line without both classes: %q", line)
		}
		if n, _ := strconv.Atoi(ia[0]); n < 1 {
			t.Errorf("no interactive job started: %q", line)
		}
		if p, _ := strconv.Atoi(bg[1]); p > capN-reserved || p < 1 {
			t.Errorf("background ran %d at once in one worker, want 1..%d (%d of %d reserved): %q", p, capN-reserved, reserved, capN, line)
		}
		iw, _ := time.ParseDuration(ia[2])
		bw, _ := time.ParseDuration(bg[2])
		if iw >= bw {
			t.Errorf("interactive waited up to %v, background up to %v: interactive must start first", iw, bw)
		}
	}
	if workers != 2 {
		t.Errorf("%d worker lines, want 2", workers)
	}
}

// TestMetricsInParentRole: -metrics in the default role gives every worker an
// endpoint, instead of being ignored.
func TestMetricsInParentRole(t *testing.T) {
	db := redistest.Connect(t)
	bin := build(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "-workers", "2", "-d", "1s", "-job", "100ms", "-metrics", "127.0.0.1:0",
		"-redis", db.Client.Options().Addr, "-name", db.Prefix+"jw")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("jobworkers: %v\n%s%s", err, out.String(), errb.String())
	}
	if n := strings.Count(errb.String(), "metrics on http://127.0.0.1:"); n != 2 {
		t.Errorf("%d workers serve /metrics, want 2; stderr:\n%s", n, errb.String())
	}
}

func TestInterrupt(t *testing.T) {
	db := redistest.Connect(t)
	bin := build(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "-workers", "2", "-d", "1m", "-redis", db.Client.Options().Addr, "-name", db.Prefix+"jw")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // let it start jobs; the bound below is what is tested
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGINT: %v\n%s%s", err, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 20s after SIGINT")
	}
	if !fleetLine.MatchString(out.String()) {
		t.Errorf("no fleet line after SIGINT:\n%s", out.String())
	}
}

func TestNoRedis(t *testing.T) {
	bin := build(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "-workers", "2", "-d", "1s", "-redis", "127.0.0.1:1")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("without Redis: %v, want a non-zero exit", err)
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "unreachable") || strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
		t.Errorf("stderr %q, want one line saying Redis is unreachable", msg)
	}
}
