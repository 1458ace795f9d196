// Command testreport reads the output of go test -json on standard input and
// prints what go test prints without it: each package's result line, and the
// output of every test that failed. It also prints the output of the tests
// that were still running when their package failed, which go test alone
// loses: a test binary that exceeds -timeout panics with a goroutine dump, and
// the messages that a test running then had logged (a t.Fatal whose cleanup
// then hangs) are printed only in -json or -v mode. scripts/test.sh uses it;
// it always exits 0 (go test's status is the suite's).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of go test -json (cmd/test2json's TestEvent), with the
// build events of go test -json (ImportPath, build-output).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type pkg struct {
	out     strings.Builder             // output not of a test: the result line, a panic and its dump
	tests   map[string]*strings.Builder // output of each test without a result yet
	running []string                    // those tests, in the order they started
}

func main() {
	report(os.Stdin, os.Stdout)
}

func report(r io.Reader, w io.Writer) {
	pkgs := map[string]*pkg{}
	get := func(name string) *pkg {
		p := pkgs[name]
		if p == nil {
			p = &pkg{tests: map[string]*strings.Builder{}}
			pkgs[name] = p
		}
		return p
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // not an event: go test's own message
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Package == "":
		case e.Test == "":
			p := get(e.Package)
			switch e.Action {
			case "output":
				p.out.WriteString(e.Output)
			case "pass", "skip", "fail":
				if e.Action == "fail" {
					for _, name := range p.running {
						fmt.Fprintf(w, "--- UNFINISHED: %s (running when the package failed); its output:\n%s", name, filter(p.tests[name].String()))
					}
				}
				out := p.out.String()
				if e.Action == "pass" {
					out = okLines(out) // go test prints only its "ok" line then
				}
				fmt.Fprint(w, out)
				delete(pkgs, e.Package)
			}
		default:
			p := get(e.Package)
			b := p.tests[e.Test]
			if b == nil {
				b = &strings.Builder{}
				p.tests[e.Test] = b
				p.running = append(p.running, e.Test)
			}
			switch e.Action {
			case "output":
				b.WriteString(e.Output)
			case "pass", "skip", "fail":
				if e.Action == "fail" {
					fmt.Fprint(w, filter(b.String()))
				}
				delete(p.tests, e.Test)
				p.running = slices.DeleteFunc(p.running, func(s string) bool { return s == e.Test })
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testreport: %v\n", err)
	}
}

// okLines returns the lines of s that start with "ok" (a passing package's
// result), without what its binary printed (PASS, -test.shuffle, logs).
func okLines(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "ok") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// filter drops the progress lines of -json mode (=== RUN and the like), which
// go test without -v does not print.
func filter(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(line, "=== ") {
			b.WriteString(line)
		}
	}
	return b.String()
}
