package otelfloodgate_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The repository's root (docs/), and where the floodgate package's words
// are declared (internal/core; package floodgate re-exports them, which its
// own TestReexportsEveryName checks).
const (
	root  = ".."
	words = "../internal/core"
)

// wordKeys are the attribute keys whose values are words of the vocabulary
// (the others, limiter and part, carry the user's names).
var wordKeys = []attribute.Key{otelfloodgate.KeyReason, otelfloodgate.KeySource, otelfloodgate.KeyComponent,
	otelfloodgate.KeyState, otelfloodgate.KeyOutcome, otelfloodgate.KeyKind}

// listedWords parses the Metric words section of docs/vocabulary.md: a
// table of "| `key` | `word`, `word`, ... |" rows.
func listedWords(t *testing.T) map[attribute.Key][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "vocabulary.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Metric words\n")
	if !ok {
		t.Fatal("docs/vocabulary.md has no section ## Metric words")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| (.*) \\|$")
	word := regexp.MustCompile("`([^`]*)`")
	out := map[attribute.Key][]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, w := range word.FindAllStringSubmatch(m[2], -1) {
			out[attribute.Key(m[1])] = append(out[attribute.Key(m[1])], w[1])
		}
	}
	for _, k := range wordKeys {
		if len(out[k]) == 0 {
			t.Errorf("docs/vocabulary.md, Metric words: no row for %s", k)
		}
	}
	for k := range out {
		if !slices.Contains(wordKeys, k) {
			t.Errorf("docs/vocabulary.md, Metric words: row %s is no attribute otelfloodgate records", k)
		}
	}
	return out
}

// rootWords returns the words the floodgate package declares, by the
// attribute they are values of: its constants of type Reason, Source and
// Component, its State constants, and the words of every Kind.
func rootWords(t *testing.T) map[attribute.Key][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(words, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the floodgate package's files: %v %v", files, err)
	}
	byType := map[string]attribute.Key{"Reason": otelfloodgate.KeyReason, "Source": otelfloodgate.KeySource,
		"Component": otelfloodgate.KeyComponent}
	out := map[attribute.Key][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				key, ok := attribute.Key(""), false
				if id, isIdent := vs.Type.(*ast.Ident); isIdent {
					key, ok = byType[id.Name]
				} else if vs.Type == nil && strings.HasPrefix(vs.Names[0].Name, "State") {
					key, ok = otelfloodgate.KeyState, true
				}
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					lit, isLit := v.(*ast.BasicLit)
					if !isLit || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", fset.Position(v.Pos()), vs.Names[0].Name)
						continue
					}
					w, _ := strconv.Unquote(lit.Value)
					out[key] = append(out[key], w)
				}
			}
		}
	}
	for _, k := range kinds() {
		out[otelfloodgate.KeyKind] = append(out[otelfloodgate.KeyKind], k.String())
	}
	out[otelfloodgate.KeyOutcome] = []string{otelfloodgate.OutcomeOK, otelfloodgate.OutcomeFailure}
	return out
}

// kinds returns every floodgate.Kind.
func kinds() []floodgate.Kind {
	var out []floodgate.Kind
	for k := floodgate.Kind(1); k.String() != "unknown"; k++ {
		out = append(out, k)
	}
	return out
}

// TestVocabularyListsEveryWord fails when the floodgate package declares a
// reason, source, component, state or kind that the Metric words section of
// docs/vocabulary.md does not list, or lists a word it does not declare;
// and when floodgate.Reasons is not every Reason constant.
func TestVocabularyListsEveryWord(t *testing.T) {
	listed, declared := listedWords(t), rootWords(t)
	for _, k := range wordKeys {
		for _, w := range declared[k] {
			if !slices.Contains(listed[k], w) {
				t.Errorf("%s: the floodgate package declares %q, docs/vocabulary.md (Metric words) does not list it", k, w)
			}
		}
		for _, w := range listed[k] {
			if !slices.Contains(declared[k], w) {
				t.Errorf("%s: docs/vocabulary.md lists %q, the floodgate package does not declare it", k, w)
			}
		}
	}
	var reasons []string
	for _, r := range floodgate.Reasons {
		reasons = append(reasons, string(r))
	}
	if a, b := slices.Sorted(slices.Values(reasons)), slices.Sorted(slices.Values(declared[otelfloodgate.KeyReason])); !slices.Equal(a, b) {
		t.Errorf("floodgate.Reasons = %v, the Reason constants are %v", a, b)
	}
}

// TestVocabularyCoversEveryRecordedValue drives every Kind × Reason ×
// Source × Component × state (each with values outside the vocabulary too)
// through an Observer and fails when a recorded attribute value is not a
// word docs/vocabulary.md lists, or when a declared reason, source,
// component or state is never recorded as itself.
func TestVocabularyCoversEveryRecordedValue(t *testing.T) {
	listed, declared := listedWords(t), rootWords(t)
	m, r := newMetrics(t)
	o := m.Observer("x")
	withOdd := func(words []string) []string { return append(slices.Clone(words), "", "not_a_word") }
	errFailed := errors.New("failed")
	i := 0
	for _, k := range append(kinds(), 0, 200) {
		for _, reason := range withOdd(declared[otelfloodgate.KeyReason]) {
			for _, source := range withOdd(declared[otelfloodgate.KeySource]) {
				for _, c := range declared[otelfloodgate.KeyComponent] {
					for _, state := range withOdd(declared[otelfloodgate.KeyState]) {
						i++
						e := floodgate.Event{Kind: k, Component: floodgate.Component(c), Part: "p", N: 1,
							Reason: floodgate.Reason(reason), Source: floodgate.Source(source), From: state, To: state}
						if i%2 == 1 {
							e.Duration, e.Err = time.Millisecond, errFailed
						}
						if i%3 == 0 {
							e.Class = "critical"
						}
						e.Shadow = i%5 == 0
						o.Observe(e)
					}
				}
			}
		}
	}
	recorded := map[attribute.Key]map[string]bool{}
	for _, md := range collect(t, r) {
		for _, s := range attributeSets(md) {
			for _, kv := range s.ToSlice() {
				switch kv.Key {
				case otelfloodgate.KeyLimiter, otelfloodgate.KeyPart, otelfloodgate.KeyClass:
					continue // the user's names
				case otelfloodgate.KeyShadow:
					if kv.Value.Type() != attribute.BOOL || !kv.Value.AsBool() {
						t.Errorf("%s: %s=%v, want only true", md.Name, kv.Key, kv.Value.String())
					}
					continue
				}
				if !slices.Contains(wordKeys, kv.Key) {
					t.Errorf("%s: attribute %s is not in docs/vocabulary.md's Metric words", md.Name, kv.Key)
					continue
				}
				v := kv.Value.AsString()
				if !slices.Contains(listed[kv.Key], v) {
					t.Errorf("%s: %s=%q is not a word docs/vocabulary.md lists", md.Name, kv.Key, v)
				}
				if recorded[kv.Key] == nil {
					recorded[kv.Key] = map[string]bool{}
				}
				recorded[kv.Key][v] = true
			}
		}
	}
	for _, k := range []attribute.Key{otelfloodgate.KeyReason, otelfloodgate.KeySource, otelfloodgate.KeyComponent, otelfloodgate.KeyState, otelfloodgate.KeyOutcome} {
		for _, w := range declared[k] {
			if !recorded[k][w] {
				t.Errorf("%s=%q is never recorded (dropped or renamed by otelfloodgate)", k, w)
			}
		}
	}
}

// attributeSets returns the attribute sets of md's points.
func attributeSets(md metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := md.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}
