// Package storeprobe lets floodgate's Redis-backed limiters give a
// breaker.Breaker that has no Config.Probe a probe of their own client (a
// PING), so that a half-open breaker probes Redis itself instead of making a
// caller wait on it. Package breaker installs Install when it is initialised:
// a func(*breaker.Breaker, func(context.Context) error) that sets the probe
// only if the breaker has none. (This package cannot name breaker's type:
// breaker imports it.)
package storeprobe

// Install is installed by package breaker's init.
var Install any
