-- meterhead.lua: the head of a meter script's prelude, single-key or batch
-- (see common.lua). ARGV[1] = the call's head, five little-endian doubles
-- (struct.pack '<ddddd', 40 bytes: evalBuf.fill): P, C and B (the limit, as
-- in limithead.lua), n (the call's cost) and dl (the call's deadline, Unix µs
-- in Redis time, 0 for none: see the deadline check in common.lua), all
-- integers below 2^53, so exact. One argument where the other scripts take
-- three saves Redis reading two and Lua converting two on every decision (a
-- measurable share of a decision's script time: see bench/RESULTS.md).
-- A batch script takes one head per decision (batch.lua); this reads the
-- first, whose limit every decision of the batch shares.
local L = ARGV[1]
if not L or #L ~= 40 then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local P, C, B, n, dl = struct.unpack('<ddddd', L)
if dl < 0 or dl % 1 ~= 0 then
  return redis.error_reply('ERR shaper: invalid arguments')
end
