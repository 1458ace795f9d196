package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// build compiles the example, since the parent re-executes itself.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jobworkers")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var fleetLine = regexp.MustCompile(`fleet started (\d+) jobs at ([0-9.]+)/s \(limit (\d+)/s\)`)

func TestFleetRate(t *testing.T) {
	db := redistest.Connect(t)
	bin := build(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "-workers", "3", "-rate", "10", "-cap", "4", "-d", "3s", "-job", "200ms",
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
	if n < 20 || n > 10*3+1+3*5 { // 3s at 10/s, plus each worker's drained backlog (5)
		t.Errorf("fleet started %d jobs in 3s at 10/s", n)
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
