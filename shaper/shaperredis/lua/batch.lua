-- batch.lua: the tail of a meter script's batch form, which decides several keys
-- in one call (RedisConfig.Batch on a client that is not a Cluster or a Ring).
-- The batch form is the prelude (common.lua), the meter's block as the body of
-- a function decide(key, n) (see scripts.go), then this file: the prelude
-- reads TIME and checks the limit and the first cost once, and decide runs
-- once per key.
-- KEYS[i] = the state key of the i-th decision (keys may repeat: the decisions
--           are made in order, each seeing the ones before it)
-- ARGV[i] = the head of the i-th decision (meterhead.lua: the limit, which
--           every decision of a batch shares, its cost n and its deadline;
--           see the deadline check in common.lua)
-- Returns the replies of the decisions, each packed as a single-key script's
-- (four little-endian 64-bit integers), one after the other: allowed,
-- remaining, retry_after_us, reset_after_us for each key in turn, all at one
-- time (now); -2, now, 0, 0 for a decision whose deadline has passed (nothing
-- decided or written: its caller has been answered with a timeout).
-- A decision that fails (a cost out of range, which the Go side never sends as
-- it validates every call first, or an error from Redis such as WRONGTYPE on a
-- key used by something else) replies -1, 0, 0, 0 and the others stand: the Go
-- side sends that call again alone for its own answer or error. A failed
-- decision has written nothing that changes a decision: decide's writes come
-- after its reads (which is where WRONGTYPE fails), and the sliding log's first
-- writes only drop entries that have left the window.
local out = {}
local k = #KEYS
for i = 1, k do
  local h = ARGV[i]
  local ok, a, r, ra, rs = false
  local c, dl
  if h and #h == 40 then
    local _
    _, _, _, c, dl = struct.unpack('<ddddd', h)
  end
  if dl and dl > 0 and now > dl then
    ok, a, r, ra, rs = true, -2, now, 0, 0
  elseif dl and dl >= 0 and dl % 1 == 0 and c >= 0 and c <= B and c % 1 == 0 then
    ok, a, r, ra, rs = pcall(decide, KEYS[i], c)
  end
  if not ok then a, r, ra, rs = -1, 0, 0, 0 end
  out[i] = struct.pack('<i8i8i8i8', a, r, ra, rs)
end
return table.concat(out)
