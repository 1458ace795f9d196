package main

import (
	"slices"
	"strings"
)

// results holds every round: for each round, each case's sample.
type results struct {
	rounds []map[string]sample
	names  []string // cases in the order first seen
	notes  []string
	// sections are the adaptive concurrency tests' markdown.
	sections []fragment
	// targets are the benchmarks' stated targets; informal, the doc
	// comments that mention one the report cannot check.
	targets  []target
	informal []string
}

func (r *results) add(round int, p parsed) {
	for len(r.rounds) <= round {
		r.rounds = append(r.rounds, map[string]sample{})
	}
	for _, n := range p.names {
		if !r.has(n) {
			r.names = append(r.names, n)
		}
		r.rounds[round][n] = p.samples[n]
	}
	for _, n := range p.notes {
		if !slices.Contains(r.notes, n) {
			r.notes = append(r.notes, n)
		}
	}
}

func (r *results) has(name string) bool { return slices.Contains(r.names, name) }

// values returns the metric unit of case name in every round that measured it.
func (r *results) values(name, unit string) []float64 {
	var xs []float64
	for _, round := range r.rounds {
		if v, ok := round[name][unit]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

func (r *results) stat(name, unit string) stats { return summarize(r.values(name, unit)) }

// ratio is a/b of the metric unit, taken within each round in which both
// cases ran (so both saw the same machine state), then summarized.
func (r *results) ratio(a, b, unit string) stats {
	var xs []float64
	for _, round := range r.rounds {
		x, okA := round[a][unit]
		y, okB := round[b][unit]
		if okA && okB && y != 0 {
			xs = append(xs, x/y)
		}
	}
	return summarize(xs)
}

// units returns the metrics case name reported, in the order they are
// shown.
func (r *results) units(name string) []string {
	seen := map[string]bool{}
	for _, round := range r.rounds {
		for u := range round[name] {
			seen[u] = true
		}
	}
	var us []string
	for _, u := range unitOrder {
		if seen[u] {
			us = append(us, u)
			delete(seen, u)
		}
	}
	var rest []string
	for u := range seen {
		rest = append(rest, u)
	}
	slices.Sort(rest)
	return append(us, rest...)
}

// unitOrder: the primary metrics first, then the rest in reading order. B/op
// is left to the full tables.
var unitOrder = []string{
	"ops/s", "pairs/s", "grants/s", "req/s", "achieved/target", "ns/op",
	"allocs/op", "B/op", "p50-µs", "p99-µs", "roundtrips/op", "redis-µs/op", "redis-proc-µs/op",
	"rtt/acquire", "rtt/release", "acquire-calls/grant", "pairs/redis-cpu-s", "grants/redis-cpu-s",
	"p50-wait-ms", "p99-wait-ms", "ideal-fifo-wait-ms", "B/key", "rejected/op", "denied",
}

// primary is the metric a case's ratio is taken on: its throughput if it
// reports one (decisions, pairs, grants or requests per second), its accuracy, else its
// time per operation.
func (r *results) primary(name string) string {
	us := r.units(name)
	for _, u := range []string{"ops/s", "pairs/s", "grants/s", "req/s", "achieved/target", "ns/op"} {
		if slices.Contains(us, u) {
			return u
		}
	}
	if len(us) > 0 {
		return us[0]
	}
	return "ns/op"
}

// tops returns the top-level benchmarks seen, in order.
func (r *results) tops() []string {
	var ts []string
	for _, n := range r.names {
		top, _, _ := splitCase(n)
		if !slices.Contains(ts, top) {
			ts = append(ts, top)
		}
	}
	return ts
}

// genericPairs pairs, within benchmark top, every case whose impl names
// floodgate with every case of another impl that shares the rest of its name
// (the same conc=, order=, ... parameters).
func (r *results) genericPairs(top string) [][2]string {
	var pairs [][2]string
	for _, a := range r.names {
		ta, ia, ka := splitCase(a)
		if ta != top || !strings.Contains(ia, "floodgate") {
			continue
		}
		for _, b := range r.names {
			tb, ib, kb := splitCase(b)
			if tb == top && kb == ka && ib != "" && !strings.Contains(ib, "floodgate") {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	return pairs
}
