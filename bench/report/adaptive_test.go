package main

import (
	"strings"
	"testing"
)

func TestFragmentBody(t *testing.T) {
	for in, want := range map[string]string{
		"\n\nbody\n\n":                   "body",
		"## Adaptive\n\nbody\n### sub\n": "body\n### sub",
		"# Title\nbody":                  "body",
		"### sub\nbody":                  "### sub\nbody",
		"a\n## not first\n":              "a\n## not first",
		"":                               "",
		"## only a heading\n":            "",
	} {
		if got := fragmentBody(in); got != want {
			t.Errorf("fragmentBody(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSpliceSections(t *testing.T) {
	sim := fragment{heading: "Adaptive concurrency (simulator)", body: "new sim\n\n```\n## in a code block\n```"}
	fleet := fragment{heading: "Adaptive concurrency (fleet of 4, real Redis)", body: "new fleet"}
	const (
		head  = "# Report\n\n## Summary\n\nrows\n\n"
		notes = "## Notes from this run\n\n- a note\n\n"
		every = "## Every case\n\ntables\n"
	)
	for _, tc := range []struct {
		name, doc string
		secs      []fragment
		want      string
	}{
		{"inserted before the notes", head + notes + every, []fragment{sim},
			head + "## Adaptive concurrency (simulator)\n\n" + sim.body + "\n\n" + notes + every},
		{"inserted before every case", head + every, []fragment{sim, fleet},
			head + "## Adaptive concurrency (simulator)\n\n" + sim.body + "\n\n" +
				"## Adaptive concurrency (fleet of 4, real Redis)\n\nnew fleet\n\n" + every},
		{"appended", "# Report\n\ntext\n", []fragment{fleet},
			"# Report\n\ntext\n\n## Adaptive concurrency (fleet of 4, real Redis)\n\nnew fleet\n"},
		{"replaced, a heading in its old code block ignored",
			head + "## Adaptive concurrency (simulator)\n\nold\n```\n## Every case\n```\nold\n\n" + notes + every, []fragment{sim},
			head + "## Adaptive concurrency (simulator)\n\n" + sim.body + "\n\n" + notes + every},
		{"replaced at the end",
			head + "## Adaptive concurrency (simulator)\n\nold\n", []fragment{sim},
			head + "## Adaptive concurrency (simulator)\n\n" + sim.body + "\n"},
		{"replaced twice over: idempotent",
			spliceSections(head+notes+every, []fragment{sim, fleet}), []fragment{sim, fleet},
			head + "## Adaptive concurrency (simulator)\n\n" + sim.body + "\n\n" +
				"## Adaptive concurrency (fleet of 4, real Redis)\n\nnew fleet\n\n" + notes + every},
	} {
		if got := spliceSections(tc.doc, tc.secs); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestWriteReportSections: the full report puts the adaptive sections after
// the narrative and before the notes and the full tables.
func TestWriteReportSections(t *testing.T) {
	var b strings.Builder
	r := &results{notes: []string{"a note"}, sections: []fragment{{heading: "Adaptive concurrency (simulator)", body: "sim body"}}}
	writeReport(&b, &machine{}, r)
	doc := b.String()
	i, j, k := strings.Index(doc, "## What the numbers mean"), strings.Index(doc, "## Adaptive concurrency (simulator)\n\nsim body\n\n"), strings.Index(doc, "## Notes from this run")
	if i < 0 || j < 0 || k < 0 || !(i < j && j < k) {
		t.Errorf("narrative at %d, section at %d, notes at %d: want them in that order", i, j, k)
	}
}
