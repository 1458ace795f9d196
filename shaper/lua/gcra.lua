-- gcra.lua: one GCRA decision (shaper.Meter's arithmetic, see meter.go).
-- key     = the state key: the string "tat rem" (theoretical arrival time tat + rem/C µs)
-- ARGV    = P, C, B, n [, now]  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us.
-- A denial or n = 0 writes nothing. An admission writes the new state with a TTL
-- that ends just after the theoretical arrival time, when the key is idle.
local tau = B * P
local d = gcra_debt(key, tau)
local nd = d + n * P
if nd > tau then
  return 0, idiv(tau - d, P), ceildiv(nd - tau, C), ceildiv(d, C)
end
if n > 0 then
  local q = math.floor(nd / C)
  redis.call('SET', key, string.format('%d %d', now + q, nd - q * C), 'PX', ttlms(q + 1))
end
return 1, idiv(tau - nd, P), 0, ceildiv(nd, C)
