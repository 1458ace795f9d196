// Package tourcheck reads the tour's report back for the tests of both tour
// commands, and checks what every run must show.
package tourcheck

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Section is one job of the report read back: its rows by label, cells
// split on runs of two or more spaces, and its other lines.
type Section struct {
	Rows  map[string][]string
	Lines []string
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// Parse splits the report out into its sections: the three jobs, and the
// adaptive gate's when the tour ran in one process. It fails t if there are
// not want.
func Parse(t testing.TB, out string, want int) []Section {
	t.Helper()
	var secs []Section
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if regexp.MustCompile(`^\d\. `).MatchString(line) {
			secs = append(secs, Section{Rows: map[string][]string{}})
			continue
		}
		if len(secs) == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		s := &secs[len(secs)-1]
		s.Lines = append(s.Lines, strings.TrimSpace(line))
		f := cellSep.Split(strings.TrimSpace(line), -1)
		s.Rows[f[0]] = f[1:]
	}
	if len(secs) != want {
		t.Fatalf("report has %d sections, want %d:\n%s", len(secs), want, out)
	}
	return secs
}

// Cell returns the cell of row label in column col (-1: the last).
func (s Section) Cell(t testing.TB, label string, col int) string {
	t.Helper()
	r, ok := s.Rows[label]
	if !ok || len(r) == 0 {
		t.Fatalf("report has no row %q; Rows: %v", label, s.Lines)
	}
	if col < 0 {
		col = len(r) - 1
	}
	return r[col]
}

// Num is the first number in s.
func Num(t testing.TB, s string) float64 {
	t.Helper()
	m := regexp.MustCompile(`[0-9.]+`).FindString(s)
	f, err := strconv.ParseFloat(m, 64)
	if err != nil {
		t.Fatalf("no number in %q", s)
	}
	return f
}

// PeakUnderCap checks "peak / cap n" in column col.
func PeakUnderCap(t testing.TB, s Section, label string, col int) (peak, cp int) {
	t.Helper()
	c := s.Cell(t, label, col)
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

// CheckShared checks the invariants of the column that enforces the limits
// (the only one locally, the Redis one in the fleet tour), for jobs that ran d
// each: secs[:3] are the three jobs.
func CheckShared(t testing.TB, secs []Section, d time.Duration) {
	for i, s := range secs[:3] {
		if a := Num(t, s.Cell(t, "admitted", -1)); a < 1 {
			t.Errorf("job %d admitted %v, want some", i+1, a)
		}
		if p, c := PeakUnderCap(t, s, "peak concurrency", -1); p > c || p < 1 {
			t.Errorf("job %d peak concurrency %d, want 1..%d", i+1, p, c)
		}
		if !regexp.MustCompile(`^\d+(\.\d+)?(ms|s|µs) / \d+(\.\d+)?(ms|s|µs)$`).MatchString(s.Cell(t, "wait p50 / p99", -1)) {
			t.Errorf("job %d wait row %q", i+1, s.Cell(t, "wait p50 / p99", -1))
		}
	}
	// Job 1: 50 at once, 1s each: at most 50/s, and calls asked for before
	// the end may start up to 2s (the max wait) after it.
	if a, most := Num(t, secs[0].Cell(t, "admitted", -1)), 50*(d.Seconds()+2)+50; a > most {
		t.Errorf("job 1 admitted %v in %v, want at most %v", a, d, most)
	}
	// 160 callers: a refused one comes back after its RetryAfter, not in a
	// loop (at most one refusal per caller per 100ms).
	if r := Num(t, secs[0].Cell(t, "rejected", -1)); r > 160*(d.Seconds()+2)/0.1 {
		t.Errorf("job 1 rejected %v in %v: refused callers must wait their RetryAfter", r, d)
	}
	// Job 2: 5/s starts; interactive jobs wait less than background ones.
	if r := Num(t, secs[1].Cell(t, "start rate", -1)); r > 5*1.25 || r < 5*0.5 {
		t.Errorf("job 2 start rate %v/s, want about 5/s", r)
	}
	// 2s jobs at 5/s fill the 8 slots after 1.6s: from then on background
	// jobs queue, interactive ones start first.
	ia := strings.Split(secs[1].Cell(t, "interactive started, longest wait", -1), ", ")
	bg := strings.Split(secs[1].Cell(t, "background started, longest wait", -1), ", ")
	iw, _ := time.ParseDuration(ia[len(ia)-1])
	bw, _ := time.ParseDuration(bg[len(bg)-1])
	if Num(t, ia[0]) < 1 || (d >= 3*time.Second && iw >= bw) {
		t.Errorf("job 2 interactive %q, background %q: want interactive started, waiting less", ia, bg)
	}
	// Job 3: 5/min per tenant, at most one more within a short run.
	adm := secs[2].Cell(t, "per tenant admitted", -1)
	for _, m := range regexp.MustCompile(`(\w+) (\d+)`).FindAllStringSubmatch(adm, -1) {
		if n, _ := strconv.Atoi(m[2]); n < 1 || n > 6 {
			t.Errorf("job 3 tenant %s admitted %d, want 1..6 (5/min)", m[1], n)
		}
	}
	if p, c := PeakUnderCap(t, secs[2], "per tenant peak", -1); p > c {
		t.Errorf("job 3 per tenant peak %d > cap %d", p, c)
	}
	Check429(t, secs[2])
}

// Check429 checks job 3's sample refusal: a 429 whose Retry-After and JSON
// body agree.
func Check429(t testing.TB, s Section) {
	t.Helper()
	var status, retry, body string
	for _, l := range s.Lines {
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

// CheckAdaptive checks the adaptive gate's section: a backend of `workers`
// workers, halved half-way. Its rows show the workers going from workers to
// half as many, and the limit it prints as settled in each phase (the mean
// of the phase's second half) is within a factor of slack of the workers
// and lower after the halving than before: the gate found each capacity
// and followed the step down. The tour runs in real time, on a machine the
// rest of the test suite keeps busy, hence the slack; the step down is
// judged only when the first phase settled within ¾ of its capacity.
func CheckAdaptive(t testing.TB, s Section, workers int, slack float64) {
	t.Helper()
	if h := s.Rows["at"]; len(h) != 5 || h[1] != "limit" {
		t.Fatalf("adaptive section header %q, want at, workers, limit, in flight, latency, baseline", h)
	}
	at := regexp.MustCompile(`^\d+\.\d\ds$`)
	var seen []int
	for _, l := range s.Lines {
		f := cellSep.Split(l, -1)
		if !at.MatchString(f[0]) {
			continue
		}
		if len(f) != 6 {
			t.Errorf("adaptive row %q: want 6 cells", l)
			continue
		}
		w, _ := strconv.Atoi(f[1])
		if n := len(seen); n == 0 || seen[n-1] != w {
			seen = append(seen, w)
		}
		if lim, err := strconv.Atoi(f[2]); err != nil || lim < 1 {
			t.Errorf("adaptive row %q: limit %q", l, f[2])
		}
	}
	if len(seen) != 2 || seen[0] != workers || seen[1] != workers/2 {
		t.Errorf("adaptive rows' workers went %v, want [%d %d]", seen, workers, workers/2)
	}
	settled := map[int]float64{}
	for _, c := range s.Rows["mean limit, last half"] {
		var w int
		var m float64
		if _, err := fmt.Sscanf(c, "%d workers: %g", &w, &m); err != nil {
			t.Errorf("mean limit cell %q: %v", c, err)
		}
		settled[w] = m
	}
	for _, w := range []int{workers, workers / 2} {
		m, ok := settled[w]
		if !ok || m < float64(w)/slack || m > float64(w)*slack {
			t.Errorf("adaptive gate settled at %v (reported: %v) with %d workers, want within ×%v of %d", m, ok, w, slack, w)
		}
	}
	if settled[workers] < 0.75*float64(workers) {
		// The first phase never came near its capacity (a machine too busy
		// for the real-time latencies the gate reads): whether the limit
		// then followed the step down cannot be told from the two means.
		t.Logf("adaptive gate settled at %v with %d workers (below ¾ of it): the step down is not judged", settled[workers], workers)
		return
	}
	if settled[workers/2] >= settled[workers] {
		t.Errorf("adaptive gate settled at %v with %d workers, not below the %v with %d: it did not follow the step down",
			settled[workers/2], workers/2, settled[workers], workers)
	}
	// "within ±25% from Xs after": every row of that capacity from then on is.
	halved := regexp.MustCompile(`workers from (\d+\.\d\d)s`).FindStringSubmatch(strings.Join(s.Lines, "\n"))
	if halved == nil {
		t.Fatalf("adaptive section does not say when the workers were halved: %q", s.Lines)
	}
	began := map[int]float64{workers: 0}
	began[workers/2], _ = strconv.ParseFloat(halved[1], 64)
	found := s.Rows["limit found"]
	if len(found) != 2 {
		t.Errorf("limit found row %q, want a cell per capacity", found)
	}
	for _, c := range found {
		var w int
		var from float64
		if _, err := fmt.Sscanf(c, "%d workers: within ±25%% from %gs after", &w, &from); err != nil {
			continue // not within ±25%: nothing claimed
		}
		for _, l := range s.Lines {
			f := cellSep.Split(l, -1)
			if !at.MatchString(f[0]) || len(f) != 6 || f[1] != strconv.Itoa(w) {
				continue
			}
			when, _ := strconv.ParseFloat(strings.TrimSuffix(f[0], "s"), 64)
			lim, _ := strconv.Atoi(f[2])
			if when >= began[w]+from && (float64(lim) > 1.25*float64(w) || float64(lim) < 0.75*float64(w)) {
				t.Errorf("adaptive section claims %q, but prints %q", c, l)
			}
		}
	}
	if r := Num(t, s.Cell(t, "rounds", 0)); r < 10 {
		t.Errorf("adaptive gate decided %v rounds, want some tens", r)
	}
}
