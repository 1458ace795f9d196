package shaperredis

import (
	_ "embed"
	"strings"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// Each Redis script is assembled from pieces: the prelude lua/common.lua
// (argument validation, then the clock piece at its line "-- clock", then the
// helpers), and either one algorithm's file wrapped as the function
// decide(key, n) (decideFunc) with one call of it (newMeterScript) or with
// batch.lua, which calls it once per key (newBatchScript), or a script's own
// file. The token bucket's refill, which its decision and its refund both
// run, is one piece (lua/tbrefill.lua) put at their line "-- refill". The
// result is what Redis caches (EVALSHA, then EVAL on NOSCRIPT: redisscript).
// See the header of each file for its contract.
//
// The clock piece of the production scripts is Redis TIME. The tests
// assemble the same scripts with a clock piece that reads a pinned time from
// one argument more (newScriptSet with their clock), and check that the two
// sets differ in that piece only: the production scripts carry no test
// argument.

//go:embed lua/common.lua
var commonLua string

//go:embed lua/gcra.lua
var gcraLua string

//go:embed lua/tokenbucket.lua
var tokenBucketLua string

//go:embed lua/tbrefill.lua
var tbRefillLua string

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

// A clockPiece returns the Lua that sets now (Unix µs) and ttlfloor (the least
// TTL a key gets, in ms) for a script whose own arguments are ARGV[1..nargs],
// nargs a Lua expression.
type clockPiece func(nargs string) string

// timeClock is the production clock piece: Redis TIME.
func timeClock(string) string {
	return "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])\nlocal ttlfloor = 1\n"
}

// A scriptSet is every script of the package, assembled with one clock piece.
type scriptSet struct {
	meter, batch, refund      [len(kinds)]*redisscript.Script // by algoKind
	reserve, unreserve, lease *redisscript.Script
}

// scripts are the production scripts.
var scripts = newScriptSet(timeClock)

// newScriptSet assembles every script with clock.
func newScriptSet(clock clockPiece) *scriptSet {
	args, helpers, ok := strings.Cut(commonLua, "-- clock\n")
	if !ok {
		panic("shaperredis: common.lua has no clock line")
	}
	script := func(nargs, body string) *redisscript.Script {
		return redisscript.New(args + clock(nargs) + helpers + body)
	}
	refill := func(body string) string {
		out := strings.Replace(body, "-- refill\n", tbRefillLua, 1)
		if out == body {
			panic("shaperredis: no refill line")
		}
		return out
	}
	// The meter script: decide and one call of it, unless the call's
	// deadline (ARGV[5]) has passed (see the deadline check in common.lua).
	meter := func(body string) *redisscript.Script { return script("5", decideFunc(body)+meterCall) }
	batch := func(body string) *redisscript.Script { return script("3 + 2 * #KEYS", decideFunc(body)+batchLua) }
	s := &scriptSet{
		reserve:   script("6", reserveLua),
		unreserve: script("8", unreserveLua),
		lease:     script("7", leaseLua),
	}
	for kind, body := range [len(kinds)]string{gcraLua, refill(tokenBucketLua), fixedWindowLua, slidingLogLua, slidingCounterLua} {
		s.meter[kind], s.batch[kind] = meter(body), batch(body)
	}
	// Refund scripts take P, C, B, n, at and no deadline (see Meter.Refund).
	for kind, body := range [len(kinds)]string{refundGCRALua, refill(refundTokenBucketLua), refundFixedWindowLua, refundSlidingLogLua, refundSlidingCounterLua} {
		s.refund[kind] = script("5", body)
	}
	return s
}

// decideFunc wraps a meter script's body as the function decide(key, n) (see
// common.lua).
func decideFunc(body string) string {
	return "local function decide(key, n)\nlocal now = now\n" + body + "\nend\n"
}

const meterCall = `local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
`

// The scripts of a Queue and a Lease.
var (
	reserveScript   = scripts.reserve
	unreserveScript = scripts.unreserve
	leaseScript     = scripts.lease
)
