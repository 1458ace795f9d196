package tour

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
)

func secs(d time.Duration) int { return int(d / time.Second) }

// TestNumbersAgreeWithREADME: every number README.md's three jobs state is
// the one the tour runs with and prints.
func TestNumbersAgreeWithREADME(t *testing.T) {
	ra := 60 / pdfPerMin // the export rate's Retry-After, in seconds
	bad, err := examplekit.ReadmeDisagreements("../../../README.md", map[string][]int{
		"job1.prose":       {reportsCap, secs(reportsMaxWait)},
		"job1.cap":         {reportsCap},
		"job1.maxwait":     {secs(reportsMaxWait)},
		"job1.err":         {secs(reportsMaxWait)},
		"job1.local":       {reportsCap},
		"job2.prose":       {exportRate, exportCap},
		"job2.limit":       {exportCap},
		"job2.interactive": {interactiveRsv, interactiveQueue, interactiveRsv},
		"job2.background":  {backgroundQueue},
		"job2.pace":        {exportRate},
		"job2.gate":        {exportCap, exportCap},
		"job2.local":       {exportRate},
		"job3.prose":       {pdfPerMin, pdfRunning},
		"job3.global":      {globalCap, secs(globalMaxWait)},
		"job3.free":        {freePerMin, freePerMin},
		"job3.gold":        {goldPerMin, goldPerMin},
		"job3.export":      {int(pdfMaxWait)},
		"job3.exportrate":  {pdfPerMin, pdfPerMin},
		"job3.running":     {pdfRunning},
		"job3.retryafter":  {ra, ra, ra},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bad {
		t.Error(l)
	}
	// And the report says so.
	for i, want := range [][]string{
		{fmt.Sprintf("%d at once", reportsCap), fmt.Sprintf("within %ds", secs(reportsMaxWait))},
		{fmt.Sprintf("%d/s", exportRate), fmt.Sprintf("%d at once", exportCap), fmt.Sprintf("%d reserved", interactiveRsv)},
		{fmt.Sprintf("%d/min", pdfPerMin), fmt.Sprintf("%d at once per tenant", pdfRunning)},
	} {
		for _, w := range want {
			if !strings.Contains(jobs[i].title, w) {
				t.Errorf("job %d title %q does not say %q", i+1, jobs[i].title, w)
			}
		}
	}
}
