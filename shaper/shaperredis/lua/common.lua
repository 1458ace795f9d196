-- common.lua: prelude shared by every script of this package (see scripts.go),
-- after one of two heads that read the arguments:
-- limithead.lua (every script but the meter scripts):
-- KEYS[1] = the script's state key, "<prefix>{<key>}" (see Meter.Key)
-- ARGV[1] = the limit, packed as three little-endian doubles (struct.pack
--           '<ddd', 24 bytes: redisLimit.arg):
--           P, the rate's period in µs       (integer ≥ 1)
--           C, the rate's count per period   (integer ≥ 1)
--           B, the burst / capacity / count  (integer ≥ 1)
-- ARGV[2] = n, the cost of this call         (integer, 0 ≤ n ≤ B; 0 = peek)
-- ARGV[3..] = the script's own arguments, if any; for a script that spends
--           on a caller's behalf, the last is the call's deadline (see the
--           deadline check below)
-- meterhead.lua (a meter script, single-key or batch): ARGV[1] = the call's
--           head, P, C, B, n and the call's deadline dl packed in one
--           argument (see that file).
-- The prelude validates the arguments, then reads the time (the clock piece,
-- which scripts.go puts at "-- clock": Redis TIME, as now in Unix µs, and
-- ttlfloor = 1, the least TTL in ms; the tests assemble the same scripts with
-- a clock piece that reads a pinned time from one more argument instead).
-- A meter script (gcra, tokenbucket, fixedwindow, slidinglog, slidingcounter)
-- is this prelude, the deadline check, then its file as a block ("repeat ...
-- until true") that decides for the state key key at cost n, sets d_allowed,
-- d_remaining, d_retry and d_reset, and leaves the block early with break
-- (scripts.go). Its batch form (batch.lua) runs the same block as the body
-- of a function decide(key, n), once per key. Nothing here defines a
-- function: a script's local functions are closures made anew on every call,
-- which cost Redis more than the arithmetic they hold, so the meter scripts
-- write their few divisions out.
-- A single-key meter script replies allowed (0|1), remaining, retry_after µs,
-- reset_after µs, packed as four little-endian 64-bit integers (struct.pack
-- '<i8i8i8i8', 32 bytes: a string costs Redis less to return than an array),
-- or -2, now, 0, 0 without deciding once the call's deadline (dl, Unix µs in
-- Redis time, 0 for none) has passed; a batch script those four per key
-- (-1 first for a failed decision: see batch.lua).
-- All arithmetic is on integers below 2^53, so Lua's doubles are exact; the Go
-- side (shaper/*.go) runs the same lines and must give the same answers.
local EXACT = 9007199254740992
if not n or P < 1 or C < 1 or B < 1 or n < 0 or n > B
  or P % 1 ~= 0 or C % 1 ~= 0 or B % 1 ~= 0 or n % 1 ~= 0
  or B > EXACT / P or C > EXACT / P then
  return redis.error_reply('ERR shaper: invalid arguments')
end
-- clock
local floor, ceil = math.floor, math.ceil
-- A script that spends on a caller's behalf takes the call's deadline, in
-- Redis time (Unix µs, 0 for none: see storecall.Clock), as its last own
-- argument (a meter script: in its head, meterhead.lua), and once now is past
-- it, does nothing and replies -2 first and now second: the client has
-- answered its caller with a timeout (the call sat in the socket of a frozen
-- Redis, say). The check is written out in each script, as "local dl =
-- tonumber(ARGV[i])", nil an error (a meter script has dl from its head),
-- "if dl > 0 and now > dl".
-- Every ⌈a/b⌉ below is ceil(a / b) (exact for |a| < 2^53, b ≥ 1), every
-- truncated a/b of an a ≥ 0 is floor(a / b), and a TTL of us µs is
-- max(ttlfloor, ⌈us/1000⌉) ms, passed to Redis as string.format('%d', ttl):
-- a Lua number argument keeps its digits, but Redis 7.0 formats it with
-- snprintf %.17g, about 0.8k instructions more a call (measured on PSETEX).
