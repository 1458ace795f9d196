-- reserve.lua: reserve the next slot of a GCRA schedule shared by a fleet of
-- queues (shaper.RedisQueue). Unlike gcra.lua, the debt is not clamped to the
-- burst: reservations already handed out are in the future, and they are kept.
-- KEYS[1] = state: the schedule's end tat + rem/C µs, packed as two
--           little-endian doubles (struct.pack '<dd', 16 bytes); the text
--           "tat rem" of the previous version is read too (pair, helpers.lua)
-- ARGV    = limit (B the burst), n (cost), maxwait_us, the call's deadline (see
--           the deadline check in common.lua)
-- Returns {taken (0|1), wait_us, reset_after_us, end_tat, end_rem, prev_tat,
-- prev_rem}: when taken, the caller may start after wait_us, and the schedule
-- went from prev (prev_tat = -1: idle) to end, which unreserve.lua can undo;
-- when not taken (the wait would exceed maxwait_us), nothing is written and
-- wait_us is the wait the slot would have had. Once the deadline has passed
-- it returns {-2, now, 0, 0, 0, 0, 0} and does nothing.
local maxwait = tonumber(ARGV[3])
if not maxwait or maxwait < 0 or maxwait % 1 ~= 0 or maxwait > EXACT / C then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local dl = tonumber(ARGV[4])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0, 0, 0, 0} end
local tau = B * P
local d = 0
local pt, pr = -1, 0
local v = redis.call('GET', KEYS[1])
if v then
  local tat, rem = pair(v)
  if tat and tat >= now then
    d = (tat - now) * C + math.min(rem, C - 1)
    pt, pr = tat, rem
  end
end
local nd = d + n * P
local wait = 0
if nd > tau then wait = ceildiv(nd - tau, C) end
if wait > maxwait then
  return {0, wait, ceildiv(d, C), pt, pr, pt, pr}
end
local q = math.floor(nd / C)
local et, er = now + q, nd - q * C
if n > 0 then
  redis.call('SET', KEYS[1], struct.pack('<dd', et, er), 'PX', ttlms(q + 1))
end
return {1, wait, ceildiv(nd, C), et, er, pt, pr}
