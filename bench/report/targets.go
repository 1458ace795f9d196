package main

// Targets: what a benchmark's doc comment in bench/*_test.go says the library
// is held to, in a form the report checks. A target is a sentence of the doc
// comment that begins with "Target:" and ends with a full stop:
//
//	// Target: impl=floodgate/timeout=off: ns/op ≤ 1.2× impl=gobreaker;
//	// impl=floodgate/timeout=off: allocs/op = 0.
//
// Clauses are separated by ";". Each is
//
//	[case:] metric op bound
//
// case selects the cases of the benchmark it applies to: every "/"-separated
// key=value segment must be one of the case's (impl=floodgate matches
// impl=floodgate/conc=32 but not impl=floodgate-batch); without it the clause
// applies to every case. metric is a unit the benchmark reports (ns/op,
// allocs/op, ops/s, B/key, rtt/acquire, ...). op is ≤, ≥, =, <, > (or <=,
// >=). bound is a number (k and M allowed: 55k), or a factor and a peer:
// "1.2× impl=gobreaker", the peer being the case of that name, else the case
// with the peer's segments put in place of its own (impl=lease/conc=32 is
// compared with impl=per-request/conc=32); several peers joined by "+" in
// brackets add up ("1.10× (metrics=none + BenchmarkOtelObserve)"), a name
// starting with Benchmark being another benchmark's case. A relative bound is
// checked on the same-round ratios (their median), an absolute one on the
// median over the rounds; = allows 1% (none for 0).
//
// pendingTargets holds, for the doc comments that state a target in other
// words, the same target in this form, until the doc comment says it so
// (TestDocTargets keeps the two in step).

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// pendingTargets: benchmark → its target in the form above, for doc comments
// (in files this report does not own) whose target is not yet written so.
var pendingTargets = map[string]string{}

// A target is the stated target of one benchmark.
type target struct {
	bench   string
	text    string // as the doc comment states it (or pendingTargets)
	pending bool   // from pendingTargets
	clauses []clause
	err     error // the text is not in the form above
}

type clause struct {
	text  string
	sel   []string // key=value segments; none: every case
	unit  string
	op    string // "≤", "≥", "=", "<", ">"
	value float64
	peers []string // relative: the peers summed; none: absolute
}

var targetRe = regexp.MustCompile(`Target:\s+((?:[^.]|\.[^\s])*)\.(?:\s|$)`)

// informalRe finds a mention of a target that is not a Target: sentence.
var informalRe = regexp.MustCompile(`(?i)(^|[^/\w])target\b`)

// docTargets reads the doc comments of the benchmarks in the _test.go files
// of dir: the targets they state (Target: sentences, else pendingTargets),
// and the benchmarks whose doc comment mentions a target in other words with
// no pendingTargets entry.
func docTargets(dir string) (ts []target, informal []string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(files)
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Benchmark") {
				continue
			}
			name := fd.Name.Name
			doc := strings.Join(strings.Fields(fd.Doc.Text()), " ")
			var own []target
			parsed := true
			for _, m := range targetRe.FindAllStringSubmatch(doc, -1) {
				t := parseTarget(name, m[1], false)
				parsed = parsed && t.err == nil
				own = append(own, t)
			}
			if p, ok := pendingTargets[name]; ok && (len(own) == 0 || !parsed) {
				own = []target{parseTarget(name, p, true)}
			} else if informalRe.MatchString(targetRe.ReplaceAllString(doc, "")) {
				informal = append(informal, fmt.Sprintf("%s (%s)", name, filepath.Base(f)))
			}
			ts = append(ts, own...)
		}
	}
	return ts, informal, nil
}

func parseTarget(bench, text string, pending bool) target {
	t := target{bench: bench, text: text, pending: pending}
	for _, c := range strings.Split(text, ";") {
		cl, err := parseClause(strings.TrimSpace(c))
		if err != nil {
			t.err = fmt.Errorf("%q: %w", strings.TrimSpace(c), err)
			return t
		}
		t.clauses = append(t.clauses, cl)
	}
	return t
}

var clauseRe = regexp.MustCompile(`^(?:(\S+=\S*):\s+)?(\S+)\s+(≤|≥|<=|>=|=|<|>)\s+(.+)$`)

func parseClause(s string) (clause, error) {
	m := clauseRe.FindStringSubmatch(s)
	if m == nil {
		return clause{}, errors.New("not [case:] metric op bound")
	}
	c := clause{text: s, unit: m[2], op: m[3]}
	if !strings.Contains(c.unit, "/") {
		return clause{}, fmt.Errorf("metric %q is not a unit (ns/op, allocs/op, ops/s, ...)", c.unit)
	}
	if m[1] != "" {
		c.sel = strings.Split(m[1], "/")
	}
	switch c.op {
	case "<=":
		c.op = "≤"
	case ">=":
		c.op = "≥"
	}
	bound := m[4]
	// A trailing remark in brackets, "= 0 (a waiting Acquire included)", is
	// not part of the bound (a bracketed sum of peers follows a ×).
	if i := strings.LastIndex(bound, " ("); i > 0 && strings.HasSuffix(bound, ")") && !strings.HasSuffix(strings.TrimSpace(bound[:i]), "×") {
		bound = bound[:i]
	}
	factor, peers, rel := strings.Cut(bound, "×")
	v, err := parseNumber(strings.TrimSpace(factor))
	if err != nil {
		return clause{}, err
	}
	c.value = v
	if rel {
		ps := strings.TrimSpace(peers)
		if strings.HasPrefix(ps, "(") && strings.HasSuffix(ps, ")") {
			ps = ps[1 : len(ps)-1]
		}
		for _, p := range strings.Split(ps, "+") {
			p = strings.TrimSpace(p)
			if strings.ContainsAny(p, " ()") || !strings.HasPrefix(p, "Benchmark") && !strings.Contains(p, "=") {
				return clause{}, fmt.Errorf("peer %q is not a case (key=value segments, or a Benchmark name)", p)
			}
			c.peers = append(c.peers, p)
		}
	}
	return c, nil
}

func parseNumber(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		s, mult = strings.TrimSuffix(s, "k"), 1e3
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1e6
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bound %q is not a number", s)
	}
	return v * mult, nil
}

// cases returns the cases of bench that clause c applies to.
func (c clause) cases(r *results, bench string) []string {
	var out []string
	for _, n := range r.names {
		segs := strings.Split(n, "/")
		if segs[0] != bench {
			continue
		}
		ok := true
		for _, s := range c.sel {
			ok = ok && slices.Contains(segs[1:], s)
		}
		if ok {
			out = append(out, n)
		}
	}
	return out
}

// peerCase returns the case peer names for case fg: the case of that name,
// else fg with the peer's segments in place of its own.
func peerCase(r *results, fg, peer string) string {
	if strings.HasPrefix(peer, "Benchmark") {
		return peer
	}
	segs := strings.Split(fg, "/")
	if n := segs[0] + "/" + peer; r.has(n) {
		return n
	}
	for _, p := range strings.Split(peer, "/") {
		k, _, _ := strings.Cut(p, "=")
		i := slices.IndexFunc(segs[1:], func(s string) bool { return strings.HasPrefix(s, k+"=") })
		if i >= 0 {
			segs[i+1] = p
		} else {
			segs = append(segs, p)
		}
	}
	return strings.Join(segs, "/")
}

// A verdict is one clause checked on one case.
type verdict struct {
	measured string // the median (and range) it was checked on
	met      bool
	ok       bool // measured: the case and its peers ran
}

func (c clause) check(r *results, fg string) verdict {
	if len(c.peers) == 0 {
		s := r.stat(fg, c.unit)
		if s.n == 0 {
			return verdict{}
		}
		return verdict{measured: spread(s) + label(c.unit), met: compare(s.median, c.op, c.value), ok: true}
	}
	var peers []string
	for _, p := range c.peers {
		peers = append(peers, peerCase(r, fg, p))
	}
	var xs []float64
	for _, round := range r.rounds {
		x, ok := round[fg][c.unit]
		var y float64
		for _, p := range peers {
			v, okP := round[p][c.unit]
			ok = ok && okP
			y += v
		}
		if ok && y != 0 {
			xs = append(xs, x/y)
		}
	}
	s := summarize(xs)
	if s.n == 0 {
		return verdict{}
	}
	what := "time"
	if c.unit != "ns/op" {
		what = strings.TrimSpace(label(c.unit))
	}
	return verdict{measured: ratioText(s) + " " + what, met: compare(s.median, c.op, c.value), ok: true}
}

func compare(x float64, op string, v float64) bool {
	switch op {
	case "≤":
		return x <= v
	case "≥":
		return x >= v
	case "<":
		return x < v
	case ">":
		return x > v
	default: // =
		return math.Abs(x-v) <= 0.01*math.Abs(v)
	}
}

func verdictWord(v verdict) string {
	switch {
	case !v.ok:
		return "not run"
	case v.met:
		return "**met**"
	default:
		return "**missed**"
	}
}

// targetCell is the summary's target column for case fg: every clause that
// applies to it, with its verdict and number.
func targetCell(r *results, ts []target, fg string) string {
	top, _, _ := splitCase(fg)
	var parts []string
	for _, t := range ts {
		if t.bench != top || t.err != nil {
			continue
		}
		for _, c := range t.clauses {
			if !slices.Contains(c.cases(r, top), fg) {
				continue
			}
			v := c.check(r, fg)
			if !v.ok {
				parts = append(parts, c.show()+": not run")
				continue
			}
			parts = append(parts, c.show()+": "+verdictWord(v)+" ("+v.measured+")")
		}
	}
	return strings.Join(parts, "; ")
}

// show is the clause without its case selector.
func (c clause) show() string {
	if _, rest, ok := strings.Cut(c.text, ": "); ok && len(c.sel) > 0 {
		return rest
	}
	return c.text
}

// writeTargets writes the Targets section: every stated target, each case it
// applies to, the number and met or missed.
func writeTargets(w io.Writer, r *results, ts []target, informal []string) {
	fmt.Fprint(w, tick(`## Targets

Every target a benchmark's doc comment in bench/*_test.go states (a
´Target:´ sentence; for a doc comment that says it in other words, the same
target as the report's ´pendingTargets´ writes it, marked *), checked on each
case it applies to. A bound relative to a peer is checked on the median of
the same-round ratios, an absolute one on the median over the rounds; =
allows 1%.

| benchmark | target | case | measured | verdict |
|---|---|---|---|---|
`))
	for _, t := range ts {
		name := strings.TrimPrefix(t.bench, "Benchmark")
		if t.pending {
			name += " *"
		}
		if t.err != nil {
			fmt.Fprintf(w, "| %s | %s | — | — | not checked: %v |\n", name, t.text, t.err)
			continue
		}
		for _, c := range t.clauses {
			cs := c.cases(r, t.bench)
			if len(cs) == 0 {
				fmt.Fprintf(w, "| %s | %s | — | — | not run |\n", name, c.text)
				continue
			}
			for _, fg := range cs {
				v := c.check(r, fg)
				caseName := strings.TrimPrefix(strings.TrimPrefix(fg, t.bench), "/")
				if caseName == "" {
					caseName = "(one case)"
				}
				m := v.measured
				if !v.ok {
					m = "—"
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, c.text, caseName, m, verdictWord(v))
			}
		}
	}
	fmt.Fprintln(w)
	if len(informal) > 0 {
		fmt.Fprintf(w, "Doc comments that mention a target the report cannot check (not a ´Target:´ sentence): %s.\n\n", strings.Join(informal, ", "))
	}
}

// cpuOnceWired reports whether a benchmark outside rediscpu_test.go calls
// redisCPUOnce, that is whether the Redis benchmarks' redis-µs/op counts a
// script's inner commands once, as the report says.
func cpuOnceWired(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "rediscpu") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		if strings.Contains(string(b), "redisCPUOnce(") {
			return true, nil
		}
	}
	return false, nil
}
