package shaperredis

import (
	_ "embed"
	"strconv"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// Each Redis script is "local NARGS = k", the prelude lua/common.lua (argument
// validation, TIME, helpers), one algorithm's file wrapped as the function
// decide(key, n) (decideFunc), and one call of it (newMeterScript); the batch
// form calls it once per key (batch.lua, newBatchScript). The result is what
// Redis caches (EVALSHA, then EVAL on NOSCRIPT: redisscript). See the header of
// each file for its contract.

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

//go:embed lua/refund_gcra.lua
var refundGCRALua string

//go:embed lua/refund_tokenbucket.lua
var refundTokenBucketLua string

//go:embed lua/refund_fixedwindow.lua
var refundFixedWindowLua string

//go:embed lua/refund_slidingcounter.lua
var refundSlidingCounterLua string

//go:embed lua/refund_slidinglog.lua
var refundSlidingLogLua string

//go:embed lua/lease.lua
var leaseLua string

//go:embed lua/batch.lua
var batchLua string

// newScript returns the script prelude + body, where the body takes nargs ARGV.
func newScript(nargs int, body string) *redisscript.Script {
	return redisscript.New("local NARGS = " + strconv.Itoa(nargs) + "\n" + commonLua + body)
}

// decideFunc wraps a meter script's body as the function decide(key, n) (see
// common.lua).
func decideFunc(body string) string {
	return "local function decide(key, n)\nlocal now = now\n" + body + "\nend\n"
}

// newMeterScript returns a meter script: the prelude, decide, and one call of
// it, unless the call's deadline (ARGV[5]) has passed (see real in
// common.lua).
func newMeterScript(body string) *redisscript.Script {
	return newScript(5, decideFunc(body)+meterCall)
}

const meterCall = `local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if real and dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
`

// newBatchScript returns the batch form of a meter script (see batch.lua).
func newBatchScript(body string) *redisscript.Script {
	return redisscript.New("local NARGS = 3 + 2 * #KEYS\n" + commonLua + decideFunc(body) + batchLua)
}

var (
	gcraScript           = newMeterScript(gcraLua)
	tokenBucketScript    = newMeterScript(tokenBucketLua)
	fixedWindowScript    = newMeterScript(fixedWindowLua)
	slidingCounterScript = newMeterScript(slidingCounterLua)
	slidingLogScript     = newMeterScript(slidingLogLua)
	reserveScript        = newScript(6, reserveLua)
	unreserveScript      = newScript(8, unreserveLua)
	leaseScript          = newScript(7, leaseLua)

	// Refund scripts take P, C, B, n, at and no deadline (see Meter.Refund).
	refundGCRAScript           = newScript(5, refundGCRALua)
	refundTokenBucketScript    = newScript(5, refundTokenBucketLua)
	refundFixedWindowScript    = newScript(5, refundFixedWindowLua)
	refundSlidingCounterScript = newScript(5, refundSlidingCounterLua)
	refundSlidingLogScript     = newScript(5, refundSlidingLogLua)

	gcraBatchScript           = newBatchScript(gcraLua)
	tokenBucketBatchScript    = newBatchScript(tokenBucketLua)
	fixedWindowBatchScript    = newBatchScript(fixedWindowLua)
	slidingCounterBatchScript = newBatchScript(slidingCounterLua)
	slidingLogBatchScript     = newBatchScript(slidingLogLua)
)
