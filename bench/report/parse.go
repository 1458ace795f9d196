package main

import (
	"bufio"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A sample is one run of one benchmark case: its metrics by unit
// ("ns/op", "allocs/op", "ops/s", ...).
type sample map[string]float64

// A parsed run of a benchmark binary: the cases it printed, in order, and the
// skips and failures with their messages.
type parsed struct {
	names   []string
	samples map[string]sample
	notes   []string // "BenchmarkX: skipped: reason"
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// caseName strips the -GOMAXPROCS suffix the testing package appends.
func caseName(s string) string { return procsSuffix.ReplaceAllString(s, "") }

// parseOutput reads the text output of `go test -bench` (one -count). Lines it
// does not understand are ignored.
func parseOutput(r io.Reader) parsed {
	p := parsed{samples: map[string]sample{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var pending string // the SKIP/FAIL line whose reason follows, indented
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if pending != "" && trimmed != "" && line != trimmed {
			p.notes = append(p.notes, pending+": "+trimmed)
			pending = ""
			continue
		}
		pending = ""
		if k, rest, ok := strings.Cut(trimmed, ": "); ok && (k == "--- SKIP" || k == "--- FAIL") {
			name := caseName(strings.Fields(rest)[0])
			verb := "skipped"
			if k == "--- FAIL" {
				verb = "FAILED"
			}
			pending = name + " " + verb
			continue
		}
		name, s, ok := parseLine(line)
		if !ok {
			continue
		}
		if _, dup := p.samples[name]; !dup {
			p.names = append(p.names, name)
		}
		p.samples[name] = s
	}
	return p
}

// parseLine parses one result line: name, iterations, then value-unit pairs.
func parseLine(line string) (string, sample, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return "", nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	s := sample{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		s[f[i+1]] = v
	}
	return caseName(f[0]), s, true
}

// stats is the median and the range of a metric over the rounds.
type stats struct {
	n                int
	median, min, max float64
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{median: math.NaN(), min: math.NaN(), max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{n: len(s), median: m, min: s[0], max: s[len(s)-1]}
}

// splitCase splits "BenchmarkX/impl=a/conc=32" into the benchmark, the impl
// ("a", or "" if none) and the case with the impl segment removed
// ("BenchmarkX/conc=32"), which is what the implementations of one row share.
func splitCase(name string) (top, impl, key string) {
	segs := strings.Split(name, "/")
	top = segs[0]
	rest := []string{top}
	for _, s := range segs[1:] {
		if v, ok := strings.CutPrefix(s, "impl="); ok && impl == "" {
			impl = v
			continue
		}
		rest = append(rest, s)
	}
	return top, impl, strings.Join(rest, "/")
}
