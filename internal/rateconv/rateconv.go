// Package rateconv holds the limit arithmetic that shaper's in-process meters
// and shaperredis's Lua scripts must agree on: the conversion of a limit to
// integer microseconds and the range every number crossing into Lua must stay
// in, so that a float64 holds it exactly.
package rateconv

import "time"

// MaxExact is 2^53, the first integer above which a Lua number (a float64) no
// longer holds every integer exactly. Every value passed to a script, and
// every scaled quantity a script computes, stays below it.
const MaxExact = 1 << 53

// InRange reports whether |x| < 2^53, so that x crosses into Lua exactly.
func InRange(x int64) bool { return x > -MaxExact && x < MaxExact }

// Burst returns burst, or count if burst is zero (the meters' default).
func Burst(count, burst int64) int64 {
	if burst == 0 {
		return count
	}
	return burst
}

// Validate returns a limit's period in whole microseconds, its count and its
// explicit burst, panicking on a limit no meter can enforce. pkg and what
// prefix the message ("shaper: NewMeter: ..."); window requires burst to be 0
// or count. Burst·P and Count·P stay below 2^53.
func Validate(pkg, what string, count int64, period time.Duration, burst int64, window bool) (periodUS, c, b int64) {
	if count <= 0 {
		panic(pkg + ": " + what + ": Rate.Count <= 0")
	}
	if period < time.Microsecond {
		panic(pkg + ": " + what + ": Rate.Period < 1µs")
	}
	if burst < 0 {
		panic(pkg + ": " + what + ": negative Burst")
	}
	periodUS = int64(period / time.Microsecond)
	c, b = count, Burst(count, burst)
	if window && b != c {
		panic(pkg + ": " + what + ": Burst must be 0 or Rate.Count for a window meter")
	}
	if periodUS >= MaxExact || b > (MaxExact-1)/periodUS || c > (MaxExact-1)/periodUS {
		panic(pkg + ": " + what + ": Burst×Period or Count×Period reaches 2^53 µs")
	}
	return periodUS, c, b
}
