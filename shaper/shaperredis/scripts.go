package shaperredis

import (
	_ "embed"
	"encoding/binary"
	"math"
	"strings"

	"github.com/floodgate-go/floodgate/internal/redisscript"
)

// Each Redis script is assembled from pieces: a head that reads the
// arguments (lua/meterhead.lua for a meter script, single-key or batch: the
// limit, the cost and the deadline packed in one argument; lua/limithead.lua
// for every other script), the prelude lua/common.lua (argument validation,
// then the clock piece at its line "-- clock", then local names), then either one algorithm's file as a block (meterBlock) with
// the reply of one decision (newMeterScript), or the same block as the body
// of the function decide(key, n) with batch.lua, which calls it once per key
// (newBatchScript); or lua/helpers.lua and a script's own file. Two pieces
// have one copy each, put at a line of the files that run them: the GCRA state
// read (lua/arrival.lua, at "-- arrival") and the token bucket's refill
// (lua/tbrefill.lua, at "-- refill"). The result is what Redis caches
// (EVALSHA, then EVAL on NOSCRIPT: redisscript). See the header of each file
// for its contract.
//
// The clock piece of the production scripts is Redis TIME. The tests
// assemble the same scripts with a clock piece that reads a pinned time from
// one argument more (newScriptSet with their clock), and check that the two
// sets differ in that piece only: the production scripts carry no test
// argument.

//go:embed lua/common.lua
var commonLua string

//go:embed lua/limithead.lua
var limitHeadLua string

//go:embed lua/meterhead.lua
var meterHeadLua string

//go:embed lua/helpers.lua
var helpersLua string

//go:embed lua/arrival.lua
var arrivalLua string

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
	return "local t = redis.call('TIME')\nlocal now = t[1] * 1000000 + t[2]\nlocal ttlfloor = 1\n"
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
	args, names, ok := strings.Cut(commonLua, "-- clock\n")
	if !ok {
		panic("shaperredis: common.lua has no clock line")
	}
	piece := func(body, line, piece string) string {
		out := strings.Replace(body, line, piece, 1)
		if out == body {
			panic("shaperredis: no " + strings.TrimSpace(line) + " line")
		}
		return out
	}
	script := func(nargs, body string) *redisscript.Script {
		return redisscript.New(limitHeadLua + args + clock(nargs) + names + helpersLua + body)
	}
	// The meter script: unless the call's deadline (in its head) has passed
	// (see the deadline check in common.lua), one decision, its reply packed.
	meter := func(body string) *redisscript.Script {
		return redisscript.NewPacked(meterHeadLua + args + clock("1") + names + meterCall + meterBlock(body) + meterReply)
	}
	batch := func(body string) *redisscript.Script {
		return redisscript.NewPacked(meterHeadLua + args + clock("#KEYS") + names +
			"local function decide(key, n)\nlocal now = now\n" + meterBlock(body) + meterResults + "end\n" + batchLua)
	}
	s := &scriptSet{
		reserve:   script("4", reserveLua),
		unreserve: script("6", unreserveLua),
		lease:     script("5", piece(leaseLua, "-- arrival\n", arrivalLua)),
	}
	refill := func(body string) string { return piece(body, "-- refill\n", tbRefillLua) }
	gcra := piece(gcraLua, "-- arrival\n", arrivalLua)
	for kind, body := range [len(kinds)]string{gcra, refill(tokenBucketLua), fixedWindowLua, slidingLogLua, slidingCounterLua} {
		s.meter[kind], s.batch[kind] = meter(body), batch(body)
	}
	// Refund scripts take the limit, n and at, and no deadline (see Meter.Refund).
	for kind, body := range [len(kinds)]string{piece(refundGCRALua, "-- arrival\n", arrivalLua), refill(refundTokenBucketLua), refundFixedWindowLua, refundSlidingLogLua, refundSlidingCounterLua} {
		s.refund[kind] = script("3", body)
	}
	return s
}

// packLimit returns P, C and B as the scripts take them: three little-endian
// doubles (struct.pack('<ddd'), see common.lua), exact as all are below 2^53.
func packLimit(p, c, b int64) string {
	var buf [24]byte
	for i, x := range [3]int64{p, c, b} {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(float64(x)))
	}
	return string(buf[:])
}

// meterBlock wraps a meter script's file as the block that decides (see
// common.lua): it sets d_allowed, d_remaining, d_retry and d_reset, and may
// leave early with break. A block, not a function: a single-key script makes
// no closure.
func meterBlock(body string) string {
	return "local d_allowed, d_remaining, d_retry, d_reset\nrepeat\n" + body + "\nuntil true\n"
}

// meterCall opens a single-key meter script: its key, and the deadline check
// (dl is from the head, meterhead.lua).
const meterCall = `local key = KEYS[1]
if dl > 0 and now > dl then return struct.pack('<i8i8i8i8', -2, now, 0, 0) end
`

// meterReply ends a single-key meter script: its decision, packed.
const meterReply = "return struct.pack('<i8i8i8i8', d_allowed, d_remaining, d_retry, d_reset)\n"

// meterResults ends decide in a batch script: its decision.
const meterResults = "return d_allowed, d_remaining, d_retry, d_reset\n"

// The scripts of a Queue and a Lease.
var (
	reserveScript   = scripts.reserve
	unreserveScript = scripts.unreserve
	leaseScript     = scripts.lease
)
