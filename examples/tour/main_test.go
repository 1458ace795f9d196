package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/internal/redistest"
)

// section is one job of the report read back: its rows by label, cells
// split on runs of two or more spaces, and its other lines.
type section struct {
	rows  map[string][]string
	lines []string
}

var cellSep = regexp.MustCompile(`\s{2,}`)

func parse(t *testing.T, out string) []section {
	t.Helper()
	var secs []section
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if regexp.MustCompile(`^\d\. `).MatchString(line) {
			secs = append(secs, section{rows: map[string][]string{}})
			continue
		}
		if len(secs) == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		s := &secs[len(secs)-1]
		s.lines = append(s.lines, strings.TrimSpace(line))
		f := cellSep.Split(strings.TrimSpace(line), -1)
		s.rows[f[0]] = f[1:]
	}
	if len(secs) != 3 {
		t.Fatalf("report has %d job sections, want 3:\n%s", len(secs), out)
	}
	return secs
}

// cell returns the cell of row label in column col (-1: the last).
func (s section) cell(t *testing.T, label string, col int) string {
	t.Helper()
	r, ok := s.rows[label]
	if !ok || len(r) == 0 {
		t.Fatalf("report has no row %q; rows: %v", label, s.lines)
	}
	if col < 0 {
		col = len(r) - 1
	}
	return r[col]
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	m := regexp.MustCompile(`[0-9.]+`).FindString(s)
	f, err := strconv.ParseFloat(m, 64)
	if err != nil {
		t.Fatalf("no number in %q", s)
	}
	return f
}

// peakUnderCap checks "peak / cap n" in column col.
func peakUnderCap(t *testing.T, s section, label string, col int) (peak, cp int) {
	t.Helper()
	c := s.cell(t, label, col)
	if _, err := fmtSscanf(c, &peak, &cp); err != nil {
		t.Fatalf("%s = %q, want \"N / cap M\"", label, c)
	}
	return peak, cp
}

func fmtSscanf(s string, peak, cp *int) (int, error) {
	m := regexp.MustCompile(`^(\d+) / cap (\d+)$`).FindStringSubmatch(s)
	if m == nil {
		return 0, strconv.ErrSyntax
	}
	*peak, _ = strconv.Atoi(m[1])
	*cp, _ = strconv.Atoi(m[2])
	return 2, nil
}

func runTour(t *testing.T, cfg config) []section {
	t.Helper()
	var out bytes.Buffer
	start := time.Now()
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("tour took %v:\n%s", time.Since(start), out.String())
	return parse(t, out.String())
}

// checkShared checks the invariants of the column that enforces the limits
// (the only one locally, the Redis one with -redis).
func checkShared(t *testing.T, secs []section, d time.Duration) {
	for i, s := range secs {
		if a := num(t, s.cell(t, "admitted", -1)); a < 1 {
			t.Errorf("job %d admitted %v, want some", i+1, a)
		}
		if p, c := peakUnderCap(t, s, "peak concurrency", -1); p > c || p < 1 {
			t.Errorf("job %d peak concurrency %d, want 1..%d", i+1, p, c)
		}
		if !regexp.MustCompile(`^\d+(\.\d+)?(ms|s|µs) / \d+(\.\d+)?(ms|s|µs)$`).MatchString(s.cell(t, "wait p50 / p99", -1)) {
			t.Errorf("job %d wait row %q", i+1, s.cell(t, "wait p50 / p99", -1))
		}
	}
	// Job 1: 50 at once, 1s each: at most 50/s, and calls asked for before
	// the end may start up to 2s (the max wait) after it.
	if a, most := num(t, secs[0].cell(t, "admitted", -1)), 50*(d.Seconds()+2)+50; a > most {
		t.Errorf("job 1 admitted %v in %v, want at most %v", a, d, most)
	}
	// 160 callers: a refused one comes back after its RetryAfter, not in a
	// loop (at most one refusal per caller per 100ms).
	if r := num(t, secs[0].cell(t, "rejected", -1)); r > 160*(d.Seconds()+2)/0.1 {
		t.Errorf("job 1 rejected %v in %v: refused callers must wait their RetryAfter", r, d)
	}
	// Job 2: 5/s starts; interactive jobs wait less than background ones.
	if r := num(t, secs[1].cell(t, "start rate", -1)); r > 5*1.25 || r < 5*0.5 {
		t.Errorf("job 2 start rate %v/s, want about 5/s", r)
	}
	// 2s jobs at 5/s fill the 8 slots after 1.6s: from then on background
	// jobs queue, interactive ones start first.
	ia := strings.Split(secs[1].cell(t, "interactive started, longest wait", -1), ", ")
	bg := strings.Split(secs[1].cell(t, "background started, longest wait", -1), ", ")
	iw, _ := time.ParseDuration(ia[len(ia)-1])
	bw, _ := time.ParseDuration(bg[len(bg)-1])
	if num(t, ia[0]) < 1 || (d >= 3*time.Second && iw >= bw) {
		t.Errorf("job 2 interactive %q, background %q: want interactive started, waiting less", ia, bg)
	}
	// Job 3: 5/min per tenant, at most one more within a short run.
	adm := secs[2].cell(t, "per tenant admitted", -1)
	for _, m := range regexp.MustCompile(`(\w+) (\d+)`).FindAllStringSubmatch(adm, -1) {
		if n, _ := strconv.Atoi(m[2]); n < 1 || n > 6 {
			t.Errorf("job 3 tenant %s admitted %d, want 1..6 (5/min)", m[1], n)
		}
	}
	if p, c := peakUnderCap(t, secs[2], "per tenant peak", -1); p > c {
		t.Errorf("job 3 per tenant peak %d > cap %d", p, c)
	}
	check429(t, secs[2])
}

func check429(t *testing.T, s section) {
	t.Helper()
	var status, retry, body string
	for _, l := range s.lines {
		switch {
		case strings.HasPrefix(l, "HTTP/"):
			status = l
		case strings.HasPrefix(l, "Retry-After: "):
			retry = strings.TrimPrefix(l, "Retry-After: ")
		case strings.HasPrefix(l, "{"):
			body = l
		}
	}
	if !strings.Contains(status, " 429 ") {
		t.Errorf("sample status line %q, want a 429", status)
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 {
		t.Errorf("sample Retry-After %q, want whole seconds ≥ 1", retry)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("sample body %q: %v", body, err)
	}
	for _, k := range []string{"error", "message", "retry_after_seconds"} {
		if _, ok := b[k]; !ok {
			t.Errorf("sample body %s has no %q", body, k)
		}
	}
	if v, _ := b["retry_after_seconds"].(float64); strconv.Itoa(int(v)) != retry {
		t.Errorf("body retry_after_seconds %v, header Retry-After %q", b["retry_after_seconds"], retry)
	}
}

func TestTourLocal(t *testing.T) {
	const d = 3 * time.Second // the default: long enough for job 2's cap to bind
	secs := runTour(t, config{Duration: d})
	for i, s := range secs {
		if got := s.rows["limiters"]; len(got) != 1 || got[0] != "this process" {
			t.Errorf("job %d columns %q, want [this process]", i+1, got)
		}
	}
	checkShared(t, secs, d)
}

func TestTourRedis(t *testing.T) {
	db := redistest.Connect(t) // skips, or fails under CI=true, without REDIS_ADDR
	const d = time.Second
	secs := runTour(t, config{Redis: db.Client.Options().Addr, Pods: 3, Duration: d})
	for i, s := range secs {
		if got := s.rows["limiters"]; len(got) != 2 || got[0] != "per-process limits" || got[1] != "shared (Redis)" {
			t.Errorf("job %d columns %q", i+1, got)
		}
		if _, ok := s.rows["pod 3 admitted"]; !ok {
			t.Errorf("job %d has no per-pod rows", i+1)
		}
	}
	checkShared(t, secs, d)
	// Per-process limits let the fleet through several times over: 3 pods × 5/min.
	adm := secs[2].cell(t, "per tenant admitted", 0)
	if n := num(t, adm); n <= 6 {
		t.Errorf("job 3 per-process column admitted %q: want more than the shared limit", adm)
	}
	if p, c := peakUnderCap(t, secs[0], "peak concurrency", 0); p <= c {
		t.Logf("job 1 per-process peak %d did not exceed cap %d (possible on a slow machine)", p, c)
	}
}

// TestTourReadsREDIS_ADDR: the built tour, run with REDIS_ADDR and no flag,
// uses that Redis (here a dead one: it must say so, not run locally).
func TestTourReadsREDIS_ADDR(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tour")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-d", "100ms")
	cmd.Env = append(os.Environ(), "REDIS_ADDR=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "127.0.0.1:1") || !strings.Contains(string(out), "unreachable") {
		t.Errorf("tour with REDIS_ADDR=127.0.0.1:1: %v\n%s\nwant it to use that Redis and say it is unreachable", err, out)
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
