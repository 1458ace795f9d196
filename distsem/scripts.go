package distsem

import (
	_ "embed"
	"strings"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// The three scripts share a prelude (head.lua: key layout, TIME, the state) and
// functions (common.lua: reaping, the hand-off loop, write-back and TTLs). Each
// script is head.lua, its own fast path (its file up to the line "-- @common"),
// common.lua and the rest of its file, so that the common calls (the
// uncontended ones, a queued wait, the release that hands the permit to the
// head waiter) return before Lua creates the shared functions; the resulting
// source is what Redis caches (EVALSHA, then EVAL on NOSCRIPT). Their replies
// are packed (redisscript.NewPacked: a string of little-endian int64s, which
// Redis sends for less than an array; see head.lua).

//go:embed lua/head.lua
var headLua string

//go:embed lua/common.lua
var commonLua string

//go:embed lua/acquire.lua
var acquireLua string

//go:embed lua/renew.lua
var renewLua string

//go:embed lua/release.lua
var releaseLua string

var (
	acquireSource = assemble(acquireLua)
	renewSource   = assemble(renewLua)
	releaseSource = assemble(releaseLua)

	acquireScript = redisscript.NewPacked(acquireSource)
	renewScript   = redisscript.NewPacked(renewSource)
	releaseScript = redisscript.NewPacked(releaseSource)
)

// assemble returns head.lua + the fast path of script + common.lua + the rest
// of script. It panics if script has no "-- @common" line.
func assemble(script string) string {
	return assembleWith(headLua, commonLua, script)
}

// assembleWith is assemble with the given head.lua and common.lua (the tests
// assemble previous versions' scripts with it).
func assembleWith(head, common, script string) string {
	fast, rest, ok := strings.Cut(script, "\n-- @common\n")
	if !ok {
		panic("distsem: script without a -- @common line")
	}
	return head + fast + "\n" + common + rest
}

// Status codes returned by the scripts (see the header of each .lua file).
const (
	stGranted  = 1
	stQueued   = 0
	stBusy     = 2
	stTomb     = -1
	stTooHeavy = -2
	stExpired  = -3

	stRenewed   = 1
	stReadopted = 2
	stLost      = 0
)
