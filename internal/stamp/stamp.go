// Package stamp lets shaperredis read and write the refund stamp that a
// shaper.Decision carries unexported (the window or log entry time an
// admission was counted under), so that a Redis meter's Decisions can be
// refunded as the in-process meters' are. Package shaper installs the two
// functions when it is initialised: Set is a func(*shaper.Decision, int64),
// Get a func(*shaper.Decision) int64. (This package cannot name shaper's
// type: shaper imports it.)
package stamp

// Set and Get are installed by package shaper's init.
var Set, Get any
