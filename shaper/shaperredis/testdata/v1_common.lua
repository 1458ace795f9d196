-- common.lua: prelude shared by every meter script (see shaper/scripts.go).
-- KEYS[1] = the meter's state key for one user key, "<prefix>{<key>}"
-- ARGV[1] = P, the rate's period in µs          (integer ≥ 1)
-- ARGV[2] = C, the rate's count per period       (integer ≥ 1)
-- ARGV[3] = B, the burst / capacity / count      (integer ≥ 1)
-- ARGV[4] = n, the cost of this call             (integer, 0 ≤ n ≤ B; 0 = peek)
-- ARGV[5..] = the script's own arguments, if any; for a script that spends
--           on a caller's behalf, the last is the call's deadline (see the
--           deadline check below)
-- The prelude validates the arguments, then reads the time (the clock piece,
-- which scripts.go puts at "-- clock": Redis TIME, as now in Unix µs, and
-- ttlfloor = 1, the least TTL in ms; the tests assemble the same scripts with
-- a clock piece that reads a pinned time from one more argument instead),
-- then defines the helpers. A meter script (gcra, tokenbucket, fixedwindow,
-- slidinglog, slidingcounter) is this prelude, then its file as the body of
-- "local function decide(key, n)" (with "local now = now" first, as a body may
-- move its own now), then "return {decide(KEYS[1], n)}": decide makes one
-- decision for the state key key at cost n and returns its four integers. The
-- batch form (batch.lua) calls decide once per key instead.
-- A single-key script replies {allowed (0|1), remaining, retry_after µs,
-- reset_after µs}, or {-2, now, 0, 0} without deciding once the call's
-- deadline (ARGV[5], Unix µs in Redis time, 0 for none) has passed; a batch
-- script those four per key (-1 first for a failed decision: see batch.lua).
-- All arithmetic is on integers below 2^53, so Lua's doubles are exact; the Go
-- side (shaper/*.go) runs the same lines and must give the same answers.
local P = tonumber(ARGV[1])
local C = tonumber(ARGV[2])
local B = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local EXACT = 9007199254740992
if not (P and C and B and n) or P < 1 or C < 1 or B < 1 or n < 0 or n > B
  or P % 1 ~= 0 or C % 1 ~= 0 or B % 1 ~= 0 or n % 1 ~= 0
  or B > EXACT / P or C > EXACT / P then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttlfloor = 1
-- A script that spends on a caller's behalf takes the call's deadline, in
-- Redis time (Unix µs, 0 for none: see storecall.Clock), as its last own
-- argument, and once now is past it, does nothing and replies -2 first and
-- now second: the client has answered its caller with a timeout (the call sat
-- in the socket of a frozen Redis, say). The check is written out in each
-- script, as "local dl = tonumber(ARGV[i])", nil an error, "if dl > 0 and now
-- > dl": a helper function would cost every call its closure.
-- idiv is Go's integer division (truncated toward zero).
local function idiv(a, b)
  local q = a / b
  if q >= 0 then return math.floor(q) end
  return math.ceil(q)
end
-- ceildiv is ⌈a/b⌉ for b > 0 (exact for |a| < 2^53).
local function ceildiv(a, b) return math.ceil(a / b) end
-- ttlms converts a lifetime in µs to a PEXPIRE argument in ms (rounded up).
local function ttlms(us) return math.max(ttlfloor, math.ceil(us / 1000)) end
-- pair parses a state string of two space-separated integers; nil if malformed.
local function pair(v)
  local sp = string.find(v, ' ', 1, true)
  if not sp then return nil end
  local a, b = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  if not a or not b then return nil end
  return a, b
end
-- ints parses a state string of space-separated integers; nil if malformed.
local function ints(v, k)
  local out, i = {}, 0
  for w in string.gmatch(v, '%S+') do
    i = i + 1
    out[i] = tonumber(w)
    if not out[i] then return nil end
  end
  if i ~= k then return nil end
  return out
end

-- The GCRA state (gcra.lua, lease.lua) is tat, rem and last packed as three
-- little-endian doubles (24 bytes; every value an integer below 2^53, so exact):
-- struct.pack and struct.unpack cost Redis a fraction of formatting and parsing
-- the three as decimal text. gcra_state returns the string to store.
local function gcra_state(tat, rem, last) return struct.pack('<ddd', tat, rem, last) end

-- gcra_arrival reads the GCRA state (tat, rem, last) at key (gcra.lua,
-- lease.lua) and returns the theoretical arrival time tat + rem/C under the
-- current limit (meter.go's arrival): as stored, but at most last + tau/C, as
-- if the debt had been capped to the current burst when it was written. A
-- missing or malformed state (not 24 bytes) is fresh (0 0 0).
local function gcra_arrival(key, tau)
  local v = redis.call('GET', key)
  if not v or #v ~= 24 then
    return 0, 0
  end
  local tat, rem, last = struct.unpack('<ddd', v)
  rem = math.min(rem, C - 1)
  local dt = tat - last
  if dt >= math.floor(tau / C) + 1 or dt * C + rem > tau then
    return last + math.floor(tau / C), tau % C
  end
  return tat, rem
end
local function decide(key, n)
local now = now
