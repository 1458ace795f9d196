package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
)

// TestNumbersAgreeWithREADME: the example's layers are the README's job 3,
// and its own README states the same numbers.
func TestNumbersAgreeWithREADME(t *testing.T) {
	ra := 60 / exportPerMin
	bad, err := examplekit.ReadmeDisagreements("../../README.md", map[string][]int{
		"job3.prose":      {exportPerMin, exportRunning},
		"job3.global":     {globalCap, int(globalWait / time.Second)},
		"job3.free":       {freePerMin, freePerMin},
		"job3.gold":       {goldPerMin, goldPerMin},
		"job3.export":     {int(exportWait)},
		"job3.exportrate": {exportPerMin, exportPerMin},
		"job3.running":    {exportRunning},
		"job3.retryafter": {ra, ra, ra},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bad {
		t.Error(l)
	}
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	own := string(b)
	for _, w := range []string{
		fmt.Sprintf("| %d at once (waits up to %d s) | 503 |", globalCap, int(globalWait/time.Second)),
		fmt.Sprintf("| free %d/min, gold %d/min | 429 |", freePerMin, goldPerMin),
		fmt.Sprintf("| %d/min, and %d at once (a third at once is refused, never queued: `MaxWait: %d`) | 429 |", exportPerMin, exportRunning, int(exportWait)),
		fmt.Sprintf("Retry-After: %d\n", ra),
		fmt.Sprintf(`"retry_after_seconds":%d}`, ra),
		fmt.Sprintf("due in %d s at %d/min", ra, exportPerMin),
	} {
		if !strings.Contains(own, w) {
			t.Errorf("examples/reportexport/README.md does not say %q", w)
		}
	}
}
