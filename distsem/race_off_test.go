//go:build !race

package distsem_test

const raceEnabled = false
