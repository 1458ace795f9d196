package main

import (
	"slices"
	"strings"
	"testing"
)

// TestDocTargets reads bench/*_test.go as the report does: every target a
// benchmark's doc comment states must be in the form the report checks, or
// have its translation in pendingTargets, and no pendingTargets entry may
// stand for a doc comment that now says it so.
func TestDocTargets(t *testing.T) {
	ts, informal, err := docTargets("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range ts {
		if tg.err != nil {
			t.Errorf("%s: target %q: %v", tg.bench, tg.text, tg.err)
		}
	}
	for _, n := range informal {
		t.Errorf("%s: the doc comment mentions a target that is not a Target: sentence (write it as one, or add it to pendingTargets)", n)
	}
	var benches []string
	for _, tg := range ts {
		benches = append(benches, tg.bench)
		if !tg.pending && pendingTargets[tg.bench] != "" {
			t.Errorf("%s: pendingTargets entry is stale: the doc comment states its target as a Target: sentence", tg.bench)
		}
	}
	for b := range pendingTargets {
		if !slices.Contains(benches, b) {
			t.Errorf("pendingTargets names %s, which no bench/*_test.go declares", b)
		}
	}
	// The benchmarks whose targets the summary used to state in words must
	// still have them.
	for _, b := range []string{"BenchmarkSemaphoreAcquireRelease", "BenchmarkRateAllow", "BenchmarkKeyedMeter",
		"BenchmarkBreakerSuccess", "BenchmarkRedisMeter", "BenchmarkRedisLease", "BenchmarkDistsemRoundTrips",
		"BenchmarkBulkhead", "BenchmarkGRPC", "BenchmarkGRPCInterceptor", "BenchmarkOtelObserve", "BenchmarkOtelSemaphore"} {
		if !slices.Contains(benches, b) {
			t.Errorf("%s states no target", b)
		}
	}
}

func TestParseClause(t *testing.T) {
	for _, c := range []struct {
		in      string
		sel     string
		unit    string
		op      string
		value   float64
		peers   string
		wantErr bool
	}{
		{in: "impl=floodgate/timeout=off: ns/op ≤ 1.2× impl=gobreaker", sel: "impl=floodgate/timeout=off", unit: "ns/op", op: "≤", value: 1.2, peers: "impl=gobreaker"},
		{in: "rtt/acquire = 1", unit: "rtt/acquire", op: "=", value: 1},
		{in: "impl=distsem: pairs/s >= 55k", sel: "impl=distsem", unit: "pairs/s", op: "≥", value: 55000},
		{in: "metrics=otel: ns/op ≤ 1.10× (metrics=none + BenchmarkOtelObserve)", sel: "metrics=otel", unit: "ns/op", op: "≤", value: 1.1, peers: "metrics=none,BenchmarkOtelObserve"},
		{in: "impl=floodgate: allocs/op = 0 (a waiting Acquire included)", sel: "impl=floodgate", unit: "allocs/op", op: "=", value: 0},
		{in: "impl=floodgate: ns/op ≤ 1.05× impl=bare (within noise)", sel: "impl=floodgate", unit: "ns/op", op: "≤", value: 1.05, peers: "impl=bare"},
		{in: "pair ≤ 2× EVALSHA", wantErr: true},
		{in: "1 each", wantErr: true},
		{in: "≥ 55k pairs/s", wantErr: true},
		{in: "leasing ≥ 10× the per-request throughput", wantErr: true},
	} {
		got, err := parseClause(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("parseClause(%q) error = %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if s := strings.Join(got.sel, "/"); s != c.sel || got.unit != c.unit || got.op != c.op || got.value != c.value || strings.Join(got.peers, ",") != c.peers {
			t.Errorf("parseClause(%q) = sel %q unit %q op %q value %v peers %q, want %q %q %q %v %q",
				c.in, s, got.unit, got.op, got.value, strings.Join(got.peers, ","), c.sel, c.unit, c.op, c.value, c.peers)
		}
	}
}

func TestCheck(t *testing.T) {
	var r results
	r.add(0, parseOutput(strings.NewReader(`BenchmarkRedisLease/impl=per-request/conc=32-2 100 1 ns/op 9000 ops/s
BenchmarkRedisLease/impl=lease/conc=32-2 100 1 ns/op 99000 ops/s
BenchmarkRedisLease/impl=per-request/conc=1-2 100 1 ns/op 9000 ops/s
BenchmarkRedisLease/impl=lease/conc=1-2 100 1 ns/op 81000 ops/s
BenchmarkOtelObserve-2 100 30 ns/op 0 allocs/op
BenchmarkOtelSemaphore/metrics=none-2 100 20 ns/op 0 allocs/op
BenchmarkOtelSemaphore/metrics=otel-2 100 54 ns/op 1 allocs/op
`)))
	lease := parseTarget("BenchmarkRedisLease", "impl=lease: ops/s ≥ 10× impl=per-request", false)
	c := lease.clauses[0]
	if got := c.cases(&r, "BenchmarkRedisLease"); !slices.Equal(got, []string{"BenchmarkRedisLease/impl=lease/conc=32", "BenchmarkRedisLease/impl=lease/conc=1"}) {
		t.Fatalf("cases = %q", got)
	}
	if v := c.check(&r, "BenchmarkRedisLease/impl=lease/conc=32"); !v.ok || !v.met || v.measured != "11.0× decisions/s" {
		t.Errorf("conc=32: %+v, want met at 11.0×", v)
	}
	if v := c.check(&r, "BenchmarkRedisLease/impl=lease/conc=1"); !v.ok || v.met || v.measured != "9.00× decisions/s" {
		t.Errorf("conc=1: %+v, want missed at 9.00×", v)
	}
	otel := parseTarget("BenchmarkOtelSemaphore", "metrics=otel: ns/op ≤ 1.10× (metrics=none + BenchmarkOtelObserve); metrics=otel: allocs/op = 0", false)
	if v := otel.clauses[0].check(&r, "BenchmarkOtelSemaphore/metrics=otel"); !v.ok || !v.met || v.measured != "1.08× time" {
		t.Errorf("otel time: %+v, want met at 54/(20+30) = 1.08×", v)
	}
	if v := otel.clauses[1].check(&r, "BenchmarkOtelSemaphore/metrics=otel"); !v.ok || v.met {
		t.Errorf("otel allocs: %+v, want missed (1 alloc)", v)
	}
	if v := c.check(&r, "BenchmarkRedisLease/impl=lease/conc=128"); v.ok {
		t.Errorf("a case that did not run: %+v, want not ok", v)
	}
}
