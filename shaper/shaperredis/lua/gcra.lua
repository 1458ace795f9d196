-- gcra.lua: one GCRA decision (shaper.Meter's arithmetic, see meter.go).
-- key     = the state key: tat, rem, last (theoretical arrival time tat + rem/C
--           µs, written by the admission at time last), packed (arrival.lua)
-- ARGV    = limit, n  (see common.lua)
-- Decides allowed, remaining, retry_after_us, reset_after_us (common.lua).
-- A denial or n = 0 writes nothing. An admission writes the new state with a TTL
-- that ends just after the theoretical arrival time, when the key is idle. The
-- debt is not clamped: a call dated before the state's time (a test time, or a
-- Redis clock that stepped back) owes all of it.
local tau = B * P
-- arrival
local dt = tat - now
if dt >= tc + 1 then
  -- d = dt*C + rem > tau, computed without dt*C
  d_allowed, d_remaining, d_retry, d_reset = 0, 0, dt + ceil((rem + n * P - tau) / C), dt + ceil(rem / C)
  break
end
local d = 0
if dt >= 0 then d = dt * C + rem end
local nd = d + n * P
if nd > tau then
  local r = tau - d
  if r < 0 then r = 0 end
  d_allowed, d_remaining, d_retry, d_reset = 0, floor(r / P), ceil((nd - tau) / C), ceil(d / C)
  break
end
if n > 0 then
  local q = nd / C
  q = q - q % 1
  local ttl = ceil((q + 1) / 1000)
  if not (ttl > ttlfloor) then ttl = ttlfloor end
  redis.call('PSETEX', key, string.format('%d', ttl), struct.pack('<ddd', now + q, nd - q * C, now))
end
local r = (tau - nd) / P
d_allowed, d_remaining, d_retry, d_reset = 1, r - r % 1, 0, ceil(nd / C)
