package main

import (
	"testing"

	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
)

// TestNumbersAgreeWithREADME: the example's defaults and classes are the
// README's job 2.
func TestNumbersAgreeWithREADME(t *testing.T) {
	bad, err := examplekit.ReadmeDisagreements("../../README.md", map[string][]int{
		"job2.prose":       {defaultRate, defaultCap},
		"job2.limit":       {defaultCap},
		"job2.interactive": {int(classes[0].Reserved), classes[0].MaxQueue, reserved},
		"job2.background":  {classes[1].MaxQueue},
		"job2.pace":        {defaultRate},
		"job2.gate":        {defaultCap, defaultCap},
		"job2.local":       {defaultRate},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bad {
		t.Error(l)
	}
}
