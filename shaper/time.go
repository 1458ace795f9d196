package shaper

import "errors"

// ErrTimeRange is returned by the AllowNAt methods for a time they cannot
// represent exactly: before the Unix epoch (including the zero time.Time) or at
// or after 2^53 µs after it (about the year 2255). The limit is that of the
// Redis scripts, whose numbers are float64: every meter accepts the same range,
// so a local meter and its Redis twin decide alike. The state is unchanged.
var ErrTimeRange = errors.New("shaper: time out of range")

// validTime reports whether now (Unix µs) is in the meters' range [0, 2^53).
func validTime(now int64) bool { return now >= 0 && now < maxExact }
