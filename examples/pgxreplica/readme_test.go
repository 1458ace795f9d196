package main

import (
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/examples/internal/examplekit"
)

// TestNumbersAgreeWithREADME: the example's defaults are the README's job 1.
func TestNumbersAgreeWithREADME(t *testing.T) {
	s := int(maxWait / time.Second)
	bad, err := examplekit.ReadmeDisagreements("../../README.md", map[string][]int{
		"job1.prose":   {defaultCap, s},
		"job1.cap":     {defaultCap},
		"job1.maxwait": {s},
		"job1.err":     {s},
		"job1.local":   {defaultCap},
		"job1.share":   {defaultShare, defaultCap, 12},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bad {
		t.Error(l)
	}
	if defaultShare != (defaultCap+6)/12 {
		t.Errorf("a share of %d is not about %d / 12 pods", defaultShare, defaultCap)
	}
}
