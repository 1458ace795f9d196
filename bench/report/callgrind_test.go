package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCallgrindTotal(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok", "# callgrind format\nversion: 1\nevents: Ir\nsummary: 124583761\n\nfn=(1) x\n1 5\ntotals: 124583761\n")
	if n, err := callgrindTotal(ok); err != nil || n != 124583761 {
		t.Fatalf("callgrindTotal = %d, %v; want 124583761", n, err)
	}
	totalsOnly := write("totals", "events: Ir\nfn=(1) x\ntotals: 77\n")
	if n, err := callgrindTotal(totalsOnly); err != nil || n != 77 {
		t.Fatalf("callgrindTotal(totals only) = %d, %v; want 77", n, err)
	}
	for _, body := range []string{"events: Ir\n", "summary:\n", "summary: x\n"} {
		if n, err := callgrindTotal(write("bad", body)); err == nil {
			t.Fatalf("callgrindTotal(%q) = %d, nil; want an error", body, n)
		}
	}
	if _, err := callgrindTotal(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("callgrindTotal of a missing file: no error")
	}
}

func TestCallgrindTable(t *testing.T) {
	got := callgrindTable(map[string]float64{
		"RedisMeterScript redis_rate":             64000,
		"RedisMeterScript gcra":                   48000,
		"RedisMeterScript floor (TIME, GET, SET)": 40000,
		"DistsemScriptCPU floodgate-pair":         224600, // its references are missing: no ratio
		"BreakerSuccess gobreaker":                600,
		"BreakerSuccess floodgate, timeout off":   690,
	})
	for _, want := range []string{
		"| RedisMeterScript gcra | 48.0k | 0.75× RedisMeterScript redis_rate; 1.2× RedisMeterScript floor (TIME, GET, SET) |",
		"| RedisMeterScript redis_rate | 64.0k |  |",
		"| DistsemScriptCPU floodgate-pair | 224.6k |  |",
		"| BreakerSuccess floodgate, timeout off | 690 | 1.15× BreakerSuccess gobreaker |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	// The in-process rows are a table of their own, after the Redis one.
	if r, l := strings.Index(got, "| RedisMeterScript gcra"), strings.Index(got, "| BreakerSuccess gobreaker"); r < 0 || l < r || !strings.Contains(got[r:l], "benchmark process") {
		t.Errorf("the in-process rows are not in a table of their own after the Redis rows:\n%s", got)
	}
	if strings.Contains(got, "tokenbucket") {
		t.Errorf("table has a row for a case not measured:\n%s", got)
	}
}
