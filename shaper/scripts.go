package shaper

import (
	_ "embed"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Each Redis script is the prelude lua/common.lua (argument validation, TIME,
// helpers) followed by one algorithm's file; the result is what Redis caches
// (EVALSHA, then EVAL on NOSCRIPT). See the header of each file for its contract.

//go:embed lua/common.lua
var commonLua string

//go:embed lua/gcra.lua
var gcraLua string

//go:embed lua/tokenbucket.lua
var tokenBucketLua string

//go:embed lua/fixedwindow.lua
var fixedWindowLua string

//go:embed lua/slidingcounter.lua
var slidingCounterLua string

//go:embed lua/slidinglog.lua
var slidingLogLua string

//go:embed lua/reserve.lua
var reserveLua string

//go:embed lua/unreserve.lua
var unreserveLua string

//go:embed lua/lease.lua
var leaseLua string

// newScript returns the script prelude + body, where the body takes nargs ARGV.
func newScript(nargs int, body string) *redis.Script {
	return redis.NewScript("local NARGS = " + strconv.Itoa(nargs) + "\n" + commonLua + body)
}

var (
	gcraScript           = newScript(4, gcraLua)
	tokenBucketScript    = newScript(4, tokenBucketLua)
	fixedWindowScript    = newScript(4, fixedWindowLua)
	slidingCounterScript = newScript(4, slidingCounterLua)
	slidingLogScript     = newScript(4, slidingLogLua)
	reserveScript        = newScript(5, reserveLua)
	unreserveScript      = newScript(8, unreserveLua)
	leaseScript          = newScript(6, leaseLua)
)
