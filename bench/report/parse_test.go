package main

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		name string
		s    sample
		ok   bool
	}{
		{"BenchmarkSemaphoreAcquireRelease/impl=floodgate-2   \t100000000\t        10.90 ns/op\t       0 B/op\t       0 allocs/op",
			"BenchmarkSemaphoreAcquireRelease/impl=floodgate", sample{"ns/op": 10.9, "B/op": 0, "allocs/op": 0}, true},
		{"BenchmarkRedisMeter/impl=redis_rate/conc=32-2  5000  41000 ns/op  25000 ops/s  1.000 roundtrips/op  9.5 redis-µs/op",
			"BenchmarkRedisMeter/impl=redis_rate/conc=32", sample{"ns/op": 41000, "ops/s": 25000, "roundtrips/op": 1, "redis-µs/op": 9.5}, true},
		// No -GOMAXPROCS suffix with one CPU; a name ending in a digit after "=" is kept.
		{"BenchmarkShaperAccuracy/impl=uber/rate=1000 1 300000000 ns/op 0.998 achieved/target",
			"BenchmarkShaperAccuracy/impl=uber/rate=1000", sample{"ns/op": 3e8, "achieved/target": 0.998}, true},
		{"BenchmarkDistsemRoundTrips-8 10 5 ns/op 1.000 rtt/acquire", "BenchmarkDistsemRoundTrips", sample{"ns/op": 5, "rtt/acquire": 1}, true},
		{"goos: linux", "", nil, false},
		{"BenchmarkX-2 notanumber 1 ns/op", "", nil, false},
		{"BenchmarkX-2 10 1 ns/op dangling", "", nil, false},
		{"BenchmarkX-2 10 x ns/op", "", nil, false},
		{"PASS", "", nil, false},
	} {
		name, s, ok := parseLine(tc.line)
		if ok != tc.ok || name != tc.name || !reflect.DeepEqual(s, tc.s) {
			t.Errorf("parseLine(%q) = %q, %v, %v; want %q, %v, %v", tc.line, name, s, ok, tc.name, tc.s, tc.ok)
		}
	}
}

func TestParseOutputNotes(t *testing.T) {
	out := `goos: linux
BenchmarkA/impl=floodgate-2 	 100	 12.0 ns/op
--- SKIP: BenchmarkPgx
    pgx_test.go:20: DATABASE_URL is not set
--- FAIL: BenchmarkB/impl=x-2
    b_test.go:9: boom
BenchmarkA/impl=xsync-2 	 100	 15.0 ns/op
PASS
`
	p := parseOutput(strings.NewReader(out))
	if want := []string{"BenchmarkA/impl=floodgate", "BenchmarkA/impl=xsync"}; !reflect.DeepEqual(p.names, want) {
		t.Errorf("names = %q, want %q", p.names, want)
	}
	want := []string{"BenchmarkPgx skipped: pgx_test.go:20: DATABASE_URL is not set", "BenchmarkB/impl=x FAILED: b_test.go:9: boom"}
	if !reflect.DeepEqual(p.notes, want) {
		t.Errorf("notes = %q, want %q", p.notes, want)
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want stats
	}{
		{[]float64{3}, stats{1, 3, 3, 3}},
		{[]float64{5, 1, 3}, stats{3, 3, 1, 5}},
		{[]float64{4, 1, 3, 2}, stats{4, 2.5, 1, 4}},
		{[]float64{10, 10, 1, 10, 100}, stats{5, 10, 1, 100}},
	} {
		in := append([]float64(nil), tc.in...)
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.in) {
			t.Errorf("summarize reordered its input: %v", tc.in)
		}
	}
	if s := summarize(nil); s.n != 0 || !math.IsNaN(s.median) {
		t.Errorf("summarize(nil) = %+v", s)
	}
}

func TestSplitCase(t *testing.T) {
	for _, tc := range []struct{ in, top, impl, key string }{
		{"BenchmarkRedisMeter/impl=floodgate/conc=32", "BenchmarkRedisMeter", "floodgate", "BenchmarkRedisMeter/conc=32"},
		{"BenchmarkRateAllow/impl=xtime", "BenchmarkRateAllow", "xtime", "BenchmarkRateAllow"},
		{"BenchmarkMemoryLatency/size=1MB/pages=4k", "BenchmarkMemoryLatency", "", "BenchmarkMemoryLatency/size=1MB/pages=4k"},
		{"BenchmarkDistsemContended", "BenchmarkDistsemContended", "", "BenchmarkDistsemContended"},
	} {
		top, impl, key := splitCase(tc.in)
		if top != tc.top || impl != tc.impl || key != tc.key {
			t.Errorf("splitCase(%q) = %q, %q, %q; want %q, %q, %q", tc.in, top, impl, key, tc.top, tc.impl, tc.key)
		}
	}
}

// Ratios are taken within a round: a round where only one side ran does not
// count, and the median is of the per-round ratios, not a ratio of medians.
func TestRatioWithinRounds(t *testing.T) {
	var r results
	fg, peer := "BenchmarkA/impl=floodgate", "BenchmarkA/impl=xsync"
	r.add(0, parsed{names: []string{fg, peer}, samples: map[string]sample{fg: {"ns/op": 10}, peer: {"ns/op": 20}}})
	r.add(1, parsed{names: []string{fg, peer}, samples: map[string]sample{fg: {"ns/op": 30}, peer: {"ns/op": 30}}})
	r.add(2, parsed{names: []string{fg}, samples: map[string]sample{fg: {"ns/op": 1}}})
	r.add(3, parsed{names: []string{fg, peer}, samples: map[string]sample{fg: {"ns/op": 40}, peer: {"ns/op": 50}}})
	got := r.ratio(fg, peer, "ns/op")
	if want := (stats{3, 0.8, 0.5, 1}); got != want {
		t.Errorf("ratio = %+v, want %+v", got, want)
	}
	if got := r.stat(fg, "ns/op"); got != (stats{4, 20, 1, 40}) {
		t.Errorf("stat = %+v", got)
	}
	if got, want := ratioCell(&r, fg, peer), "0.800× (0.500–1.00) time"; got != want {
		t.Errorf("ratioCell = %q, want %q", got, want)
	}
}

func TestGenericPairs(t *testing.T) {
	var r results
	names := []string{"BenchmarkPgx/impl=floodgate/rows=1", "BenchmarkPgx/impl=pgxpool/rows=1", "BenchmarkPgx/impl=floodgate/rows=100", "BenchmarkPgx/impl=pgxpool/rows=100", "BenchmarkOther/impl=x"}
	p := parsed{names: names, samples: map[string]sample{}}
	for _, n := range names {
		p.samples[n] = sample{"ns/op": 1}
	}
	r.add(0, p)
	want := [][2]string{{names[0], names[1]}, {names[2], names[3]}}
	if got := r.genericPairs("BenchmarkPgx"); !reflect.DeepEqual(got, want) {
		t.Errorf("genericPairs = %q, want %q", got, want)
	}
}

func TestPrimaryAndCell(t *testing.T) {
	var r results
	n := "BenchmarkRedisMeter/impl=floodgate/conc=1"
	for i, ops := range []float64{20000, 30000, 25000} {
		r.add(i, parsed{names: []string{n}, samples: map[string]sample{n: {"ns/op": 4e4, "ops/s": ops, "allocs/op": 6, "roundtrips/op": 1, "redis-µs/op": 12.5}}})
	}
	if p := r.primary(n); p != "ops/s" {
		t.Errorf("primary = %q", p)
	}
	want := "25.0k (20.0k–30.0k) decisions/s, 6 allocs, 1 round trips, 12.5 µs Redis CPU"
	if got := cell(&r, n); got != want {
		t.Errorf("cell = %q\nwant   %q", got, want)
	}
}

func TestCPUModel(t *testing.T) {
	in := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	for _, tc := range []struct {
		s    stats
		want string
	}{
		{stats{3, 2, 1, 5}, "2 (1–5)"},
		{stats{3, 0.997, 0.99, 1}, "0.997 (0.990–1.00)"},
		{stats{1, 42.5, 42.5, 42.5}, "42.5"},
		{stats{3, 25000, 20000, 30000}, "25.0k (20.0k–30.0k)"},
		{stats{}, "?"},
	} {
		if got := spread(tc.s); got != tc.want {
			t.Errorf("spread(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := cpuModel(strings.NewReader(in)); got != "Intel(R) Xeon(R) CPU @ 2.20GHz" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := infoField("# Server\r\nredis_version:7.2.4\r\nredis_mode:standalone\r\n", "redis_version"); got != "7.2.4" {
		t.Errorf("infoField = %q", got)
	}
}
