package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// num formats x with three significant digits, large values with k or M.
func num(x float64) string {
	switch a := math.Abs(x); {
	case math.IsNaN(x):
		return "?"
	case x == math.Trunc(x) && a < 1e4: // a count: allocations, round trips
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 1e6:
		return sig(x/1e6) + "M"
	case a >= 1e4:
		return sig(x/1e3) + "k"
	default:
		return sig(x)
	}
}

func integral(x float64) bool { return x == math.Trunc(x) }

// numFrac is num without the special case for counts.
func numFrac(x float64) string {
	if integral(x) && math.Abs(x) < 1e4 {
		return sig(x)
	}
	return num(x)
}

func sig(x float64) string {
	a := math.Abs(x)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case a >= 0.1:
		return strconv.FormatFloat(x, 'f', 3, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}

// spread is "median (min–max)", or the median alone when every round agreed
// or there was one round.
func spread(s stats) string {
	if s.n == 0 {
		return "?"
	}
	f := num
	if !integral(s.median) || !integral(s.min) || !integral(s.max) {
		f = numFrac // 0.997 (0.990–1.00), not (0.990–1)
	}
	m := f(s.median)
	lo, hi := f(s.min), f(s.max)
	if s.n == 1 || lo == hi {
		return m
	}
	return m + " (" + lo + "–" + hi + ")"
}

// labels names a metric in a cell; the unit is put after the value.
var labels = map[string]string{
	"ns/op":               " ns",
	"ops/s":               " decisions/s",
	"pairs/s":             " pairs/s",
	"grants/s":            " grants/s",
	"req/s":               " requests/s",
	"achieved/target":     " of the rate",
	"allocs/op":           " allocs",
	"p50-µs":              " µs p50",
	"p99-µs":              " µs p99",
	"roundtrips/op":       " round trips",
	"redis-µs/op":         " µs Redis CPU",
	"redis-proc-µs/op":    " µs Redis process CPU",
	"rtt/acquire":         " round trips per Acquire",
	"rtt/release":         " per Release",
	"acquire-calls/grant": " acquire calls per grant",
	"p50-wait-ms":         " ms p50 wait",
	"p99-wait-ms":         " ms p99 wait",
	"ideal-fifo-wait-ms":  " ms ideal FIFO wait",
	"B/key":               " B/key",
	"rejected/op":         " rejected",
	"denied":              " denied",
}

var perCPU = map[string]string{"pairs/redis-cpu-s": "pair", "grants/redis-cpu-s": "grant"}

// cell describes one case: its primary metric with the spread, then its
// other metrics' medians. The full tables have every metric.
func cell(r *results, name string) string {
	if !r.has(name) {
		return "not run"
	}
	p := r.primary(name)
	st, l := r.stat(name, p), label(p)
	if p == "ns/op" && st.median >= 1e4 {
		st, l = stats{st.n, st.median / 1e3, st.min / 1e3, st.max / 1e3}, " µs"
	}
	parts := []string{spread(st) + l}
	if p == "achieved/target" {
		return parts[0] // its allocations are those of a whole paced run
	}
	for _, u := range r.units(name) {
		if u == p || u == "B/op" || u == "redis-proc-µs/op" || (u == "ns/op" && p != "ns/op") {
			continue
		}
		m := r.stat(name, u).median
		if per, ok := perCPU[u]; ok { // shown as its inverse: Redis CPU per pair or grant
			if m > 0 {
				parts = append(parts, num(1e6/m)+" µs Redis CPU per "+per)
			}
			continue
		}
		parts = append(parts, num(m)+label(u))
	}
	return strings.Join(parts, ", ")
}

func label(u string) string {
	if l, ok := labels[u]; ok {
		return l
	}
	return " " + u
}

// ratioCell is the same-round ratio floodgate/peer of the primary metric.
func ratioCell(r *results, fg, peer string) string {
	if !r.has(fg) || !r.has(peer) {
		return "—"
	}
	u := r.primary(fg)
	if r.primary(peer) != u {
		return "—"
	}
	s := r.ratio(fg, peer, u)
	if s.n == 0 {
		return "—"
	}
	what := "time"
	if u != "ns/op" {
		what = strings.TrimSpace(label(u))
	}
	return ratioText(s) + " " + what
}

// ratioText is "median× (min–max)".
func ratioText(s stats) string {
	t := sig(s.median) + "×"
	if s.n > 1 && sig(s.min) != sig(s.max) {
		t += " (" + sig(s.min) + "–" + sig(s.max) + ")"
	}
	return t
}

// impl returns the implementation named by a case, for the peer column.
func implName(name string) string {
	_, impl, key := splitCase(name)
	if impl == "" {
		return ""
	}
	_, rest, _ := strings.Cut(key, "/")
	if rest != "" {
		if _, own, ok := strings.Cut(name, "impl="+impl+"/"); ok && strings.HasPrefix(rest, own) {
			return impl + "/" + own
		}
	}
	return impl
}

func writeSummary(w io.Writer, r *results) {
	covered := map[string]bool{}
	for _, sec := range sections {
		var lines []string
		for _, row := range sec.rows {
			top, _, _ := splitCase(row.fg)
			covered[top] = true
			for _, p := range row.peers {
				t, _, _ := splitCase(p)
				covered[t] = true
			}
			if !r.has(row.fg) {
				continue
			}
			peers := row.peers
			if len(peers) == 0 {
				peers = []string{""}
			}
			for i, p := range peers {
				what, fgCell, target := "", "", ""
				if i == 0 {
					what, fgCell, target = row.what, cell(r, row.fg), targetCell(r, r.targets, row.fg)
				}
				peerCell, ratio := "—", "—"
				if p != "" {
					peerCell = "**" + implName(p) + "**: " + cell(r, p)
					if !row.noRatio {
						ratio = ratioCell(r, row.fg, p)
					}
				}
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s |", what, fgCell, peerCell, ratio, target))
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "### %s\n\n| what | floodgate | peer (same rounds) | floodgate/peer | target |\n|---|---|---|---|---|\n", sec.title)
		fmt.Fprintln(w, strings.Join(lines, "\n"))
		fmt.Fprintln(w)
	}
	// Benchmarks no row names: every floodgate impl against every other impl
	// of the same case.
	for _, top := range r.tops() {
		if covered[top] {
			continue
		}
		pairs := r.genericPairs(top)
		if len(pairs) == 0 {
			continue // no floodgate case beside a peer: the full table has it
		}
		fmt.Fprintf(w, "### %s\n\n", strings.TrimPrefix(top, "Benchmark"))
		fmt.Fprintf(w, "| case | floodgate | peer (same rounds) | floodgate/peer |\n|---|---|---|---|\n")
		for _, p := range pairs {
			_, _, key := splitCase(p[0])
			fmt.Fprintf(w, "| %s | **%s**: %s | **%s**: %s | %s |\n", key, implName(p[0]), cell(r, p[0]), implName(p[1]), cell(r, p[1]), ratioCell(r, p[0], p[1]))
		}
		fmt.Fprintln(w)
	}
}

// writeFull writes one table per benchmark: every case, every metric, median
// (min–max) over the rounds.
func writeFull(w io.Writer, r *results) {
	for _, top := range r.tops() {
		var cases []string
		var units []string
		for _, n := range r.names {
			if t, _, _ := splitCase(n); t == top {
				cases = append(cases, n)
				for _, u := range r.units(n) {
					if !slices.Contains(units, u) {
						units = append(units, u)
					}
				}
			}
		}
		// Keep unitOrder across cases.
		slices.SortStableFunc(units, func(a, b string) int { return unitRank(a) - unitRank(b) })
		fmt.Fprintf(w, "#### %s\n\n| case | %s |\n|---|%s\n", strings.TrimPrefix(top, "Benchmark"), strings.Join(units, " | "), strings.Repeat("---|", len(units)))
		for _, c := range cases {
			cells := make([]string, len(units))
			for i, u := range units {
				if s := r.stat(c, u); s.n > 0 {
					cells[i] = spread(s)
				}
			}
			name := strings.TrimPrefix(strings.TrimPrefix(c, top), "/")
			if name == "" {
				name = "(one case)"
			}
			fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
		}
		fmt.Fprintln(w)
	}
}

func unitRank(u string) int {
	if i := slices.Index(unitOrder, u); i >= 0 {
		return i
	}
	return len(unitOrder)
}
