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

//go:embed lua/batch.lua
var batchLua string

// scriptSrc maps each script to its source, for EVAL after NOSCRIPT when the
// command is built by hand (evalHead).
var scriptSrc = map[*redis.Script]string{}

// newScript returns the script prelude + body, where the body takes nargs ARGV.
// The prelude's first line declares NARGS and TIME0 (see common.lua).
func newScript(nargs int, body string) *redis.Script {
	return register(scriptHeader(nargs) + commonLua + body)
}

// newBatchScript returns the batch form of a meter script (see batch.lua): the
// prelude and body become a function called once per key.
func newBatchScript(nargs int, body string) *redis.Script {
	return register(scriptHeader(nargs) + "local function decide(KEYS, ARGV)\n" + commonLua + body + "\nend\n" + batchLua)
}

func scriptHeader(nargs int) string {
	return "local NARGS, TIME0 = " + strconv.Itoa(nargs) + ", nil\n"
}

func register(src string) *redis.Script {
	s := redis.NewScript(src)
	scriptSrc[s] = src
	return s
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

	gcraBatchScript           = newBatchScript(4, gcraLua)
	tokenBucketBatchScript    = newBatchScript(4, tokenBucketLua)
	fixedWindowBatchScript    = newBatchScript(4, fixedWindowLua)
	slidingCounterBatchScript = newBatchScript(4, slidingCounterLua)
	slidingLogBatchScript     = newBatchScript(4, slidingLogLua)
)
