//go:build race

package distsem_test

// raceEnabled: the race detector slows goroutine wake-ups several-fold; a few
// wall-clock bounds are widened under it (and say so).
const raceEnabled = true
