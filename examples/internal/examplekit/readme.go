package examplekit

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// readmeFacts are the numbers the README's three jobs state, each found by a
// pattern whose groups are the numbers. The examples' tests compare them with
// the examples' own constants, so that the README and the examples agree.
var readmeFacts = []struct {
	name    string
	pattern string
}{
	{"job1.prose", `at most (\d+) expensive report queries against the replica\s+across all pods; cheap queries are not limited; a report query that cannot start within\s+(\d+) s fails fast`},
	{"job1.cap", `distsem\.New\(rdb, "replica-reports", (\d+), distsem\.Config\{`},
	{"job1.share", `LocalShare: (\d+), +// about (\d+) / (\d+) pods`},
	{"job1.maxwait", `\{Name: "reports", Gate: fleet, MaxWait: (\d+) \* time\.Second\}`},
	{"job1.err", `when no permit came within (\d+) s`},
	{"job1.local", `semaphore\.New\((\d+), semaphore\.Config\{\}\)`},
	{"job2.prose", `export jobs start at most (\d+)/s fleet-wide, smoothly; at most\s+(\d+) run at once`},
	{"job2.limit", `bulkhead\.NewWorkers\((\d+), bulkhead\.WorkersConfig\{`},
	{"job2.interactive", `\{Name: "interactive", Reserved: (\d+), MaxQueue: (\d+)\}, // background can never take these (\d+)`},
	{"job2.background", `\{Name: "background", MaxQueue: (\d+)\}`},
	{"job2.pace", `shaperredis\.NewQueue\(rdb, "exports", shaper\.PerSecond\((\d+)\)`},
	{"job2.gate", `distsem\.New\(rdb, "exports", (\d+), distsem\.Config\{\}\), // (\d+) at once across the fleet`},
	{"job2.local", `Pace: shaper\.NewQueue\(shaper\.PerSecond\((\d+)\)`},
	{"job3.prose", `tenant acme may start (\d+) PDF exports a minute\s+and run (\d+) at once`},
	{"job3.global", `\{Name: "global", Gate: distsem\.New\(rdb, "api", (\d+), distsem\.Config\{\}\), MaxWait: (\d*) ?\*? ?time\.Second\}`},
	{"job3.free", `"free": shaperredis\.NewMeter\(rdb, shaper\.Limit\{Rate: shaper\.PerMinute\((\d+)\), Burst: (\d+)\}`},
	{"job3.gold", `"gold": shaperredis\.NewMeter\(rdb, shaper\.Limit\{Rate: shaper\.PerMinute\((\d+)\), Burst: (\d+)\}`},
	{"job3.export", `\{Name: "export", Route: "POST /reports/export-pdf", Key: bulkhead\.ByTenant, MaxWait: (-?\d+), // never queue`},
	{"job3.exportrate", `shaper\.Limit\{Rate: shaper\.PerMinute\((\d+)\), Burst: (\d+)\}, shaperredis\.Config\{Prefix: "export:"\}`},
	{"job3.running", `distsem\.NewKeyed\(rdb, "export", (\d+), distsem\.KeyedConfig\{\}\)`},
	{"job3.retryafter", `Retry-After: (\d+)\n\n\{"error":"limited","message":"Quota exceeded\. Retry in (\d+)s\.","retry_after_seconds":(\d+)\}`},
}

// ReadmeNumbers reads the README at path and returns, for each fact the
// README's three jobs state, its numbers (an empty group, as in
// "MaxWait: time.Second", reads as 1). It fails if the README no longer
// states one of them in the expected words: then the README and the examples
// must be brought back into agreement, and this list with them.
func ReadmeNumbers(path string) (map[string][]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(b), "\t", " ")
	facts := map[string][]int{}
	var missing []string
	for _, f := range readmeFacts {
		m := regexp.MustCompile(f.pattern).FindStringSubmatch(text)
		if m == nil {
			missing = append(missing, f.name)
			continue
		}
		for _, g := range m[1:] {
			n := 1
			if g != "" {
				if n, err = strconv.Atoi(g); err != nil {
					return nil, fmt.Errorf("%s: %v", f.name, err)
				}
			}
			facts[f.name] = append(facts[f.name], n)
		}
	}
	if missing != nil {
		return nil, fmt.Errorf("%s no longer states %s in the words examplekit/readme.go expects", path, strings.Join(missing, ", "))
	}
	return facts, nil
}

// ReadmeDisagreements compares want (fact name → the numbers an example
// uses) with the README at path, and returns one line per disagreement.
func ReadmeDisagreements(path string, want map[string][]int) ([]string, error) {
	facts, err := ReadmeNumbers(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range readmeFacts {
		w, ok := want[f.name]
		if !ok {
			continue
		}
		if fmt.Sprint(w) != fmt.Sprint(facts[f.name]) {
			out = append(out, fmt.Sprintf("%s: README states %v (%s), the example uses %v", f.name, facts[f.name], f.pattern, w))
		}
	}
	for name := range want {
		if _, ok := facts[name]; !ok {
			out = append(out, fmt.Sprintf("%s: no such README fact", name))
		}
	}
	return out, nil
}
