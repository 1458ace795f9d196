-- lease.lua: take up to n tokens at once from a GCRA meter's key (the same key and
-- arithmetic as gcra.lua), after giving back unused ones (shaper.Lease).
-- KEYS[1] = state: tat, rem, last packed (arrival.lua), shared with gcra.lua
-- ARGV    = limit, n (most to take, ≤ B), giveback (≥ 0), least (0..n: take
--           nothing unless at least this many are available), the call's
--           deadline (see the deadline check in common.lua; the client sends
--           0, none, for a give-back only, n = 0, a refund that must run
--           however late)
-- Returns {taken, remaining, retry_after_us, reset_after_us}: retry_after_us is
-- 0 if taken > 0, else the wait until max(least, 1) tokens are available; or
-- {-2, now, 0, 0}, having done nothing, once the deadline has passed.
-- Writes only if it took or gave back something. A call that finds a debt above
-- the burst (a Redis clock that stepped back) takes nothing and writes nothing
-- (a giveback is then dropped, which never admits more).
local giveback = tonumber(ARGV[3])
local least = tonumber(ARGV[4])
if not giveback or not least or giveback < 0 or giveback % 1 ~= 0 or giveback > B
  or least < 0 or least > n or least % 1 ~= 0 then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
local key = KEYS[1]
local tau = B * P
-- arrival
local dt = tat - now
if dt >= tc + 1 then
  return {0, 0, dt + ceildiv(rem + math.max(least, 1) * P - tau, C), dt + ceildiv(rem, C)}
end
local d = 0
if dt >= 0 then d = dt * C + rem end
if giveback > 0 then d = math.max(0, d - giveback * P) end
local k = math.min(n, idiv(tau - d, P))
if k < least or k < 0 then k = 0 end
local nd = d + k * P
if k > 0 or giveback > 0 then
  local q = math.floor(nd / C)
  if nd > 0 then
    redis.call('SET', KEYS[1], struct.pack('<ddd', now + q, nd - q * C, now), 'PX', ttlms(q + 1))
  else
    redis.call('DEL', KEYS[1])
  end
end
local retry = 0
if k == 0 then retry = ceildiv(math.max(0, nd + math.max(least, 1) * P - tau), C) end
return {k, idiv(math.max(tau - nd, 0), P), retry, ceildiv(nd, C)}
