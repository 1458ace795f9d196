package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A fragment is a section of the report written by a test of the bench
// package rather than measured from benchmark output: the adaptive
// concurrency simulator's tables and charts, the fleet's.
type fragment struct {
	heading string // without the leading "## "
	body    string
}

// adaptiveTests are the tests whose markdown the report includes, each
// writing its fragment to the file named by env (a test that does not run,
// or does not write it, contributes nothing).
var adaptiveTests = []struct{ test, env, heading string }{
	{"TestAdaptiveSim", "ADAPTIVE_SIM_OUT", "Adaptive concurrency (simulator)"},
	{"TestAdaptiveFleetReport", "ADAPTIVE_FLEET_OUT", "Adaptive concurrency (fleet of 4, real Redis)"},
	{"TestShedSim", "SHED_SIM_OUT", "Overload: shedding by criticality (simulator)"},
	{"TestBackoffReport", "BACKOFF_OUT", "Backing-off client (SRE throttle, retry budget)"},
}

// runAdaptive runs the adaptive tests of the benchmark binary bin once, with
// fragments written under tmp, and returns the sections they wrote and notes
// on failures. With quick the simulator runs 3 times per scenario instead of
// 20.
func runAdaptive(ctx context.Context, bin, tmp string, env []string, quick bool) ([]fragment, []string, error) {
	var names []string
	env = append([]string(nil), env...)
	for _, a := range adaptiveTests {
		names = append(names, a.test)
		env = append(env, a.env+"="+filepath.Join(tmp, a.test+".md"))
	}
	if quick {
		env = append(env, "ADAPTIVE_SIM_SEEDS=3")
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run=^("+strings.Join(names, "|")+")$", "-test.count=1", "-test.timeout=30m")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var o bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &o
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	var notes []string
	if err != nil {
		notes = append(notes, fmt.Sprintf("the adaptive concurrency tests (%s) exited with %v after %s; the sections they wrote are kept",
			strings.Join(names, ", "), err, time.Since(start).Round(time.Second)))
		os.Stderr.Write(lastLines(o.Bytes(), 30))
	}
	var secs []fragment
	for _, a := range adaptiveTests {
		b, err := os.ReadFile(filepath.Join(tmp, a.test+".md"))
		if err != nil {
			continue // not run, or wrote nothing
		}
		if body := fragmentBody(string(b)); body != "" {
			secs = append(secs, fragment{heading: a.heading, body: body})
		}
	}
	return secs, notes, nil
}

// fragmentBody is a test's fragment without surrounding blank lines and
// without a leading level-1 or level-2 heading: the report gives each
// section its own.
func fragmentBody(s string) string {
	s = strings.TrimSpace(s)
	if first, rest, _ := strings.Cut(s, "\n"); strings.HasPrefix(first, "# ") || strings.HasPrefix(first, "## ") {
		s = strings.TrimSpace(rest)
	}
	return s
}

func writeSection(b *strings.Builder, s fragment) {
	b.WriteString("## " + s.heading + "\n\n" + s.body + "\n\n")
}

// spliceSections returns doc with each section in place of the section of
// the same heading, or, if doc has none, inserted before "## Notes from this
// run" or "## Every case" (else at the end). A section of doc runs from its
// "## " heading to the next one outside a code block.
func spliceSections(doc string, secs []fragment) string {
	for _, s := range secs {
		lines := strings.SplitAfter(doc, "\n")
		var b strings.Builder
		writeSection(&b, s)
		start, end := -1, len(lines)
		insert := -1
		fence := false
		for i, l := range lines {
			t := strings.TrimRight(l, "\n")
			if strings.HasPrefix(t, "```") {
				fence = !fence
			}
			if fence || !strings.HasPrefix(t, "## ") {
				continue
			}
			switch {
			case t == "## "+s.heading && start < 0:
				start = i
			case start >= 0 && end == len(lines):
				end = i
			}
			if insert < 0 && (t == "## Notes from this run" || t == "## Every case") {
				insert = i
			}
		}
		switch {
		case start >= 0:
			doc = strings.Join(lines[:start], "") + b.String() + strings.Join(lines[end:], "")
		case insert >= 0:
			doc = strings.Join(lines[:insert], "") + b.String() + strings.Join(lines[insert:], "")
		default:
			if doc != "" && !strings.HasSuffix(doc, "\n\n") {
				doc = strings.TrimRight(doc, "\n") + "\n\n"
			}
			doc += b.String()
		}
	}
	return strings.TrimRight(doc, "\n") + "\n"
}
