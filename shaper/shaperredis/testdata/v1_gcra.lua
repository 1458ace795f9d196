-- gcra.lua: one GCRA decision (shaper.Meter's arithmetic, see meter.go).
-- key     = the state key: tat, rem, last (theoretical arrival time tat + rem/C
--           µs, written by the admission at time last), packed by gcra_state
-- ARGV    = P, C, B, n  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us.
-- A denial or n = 0 writes nothing. An admission writes the new state with a TTL
-- that ends just after the theoretical arrival time, when the key is idle. The
-- debt is not clamped: a call dated before the state's time (a test time, or a
-- Redis clock that stepped back) owes all of it.
local tau = B * P
local tat, rem = gcra_arrival(key, tau)
local dt = tat - now
if dt >= math.floor(tau / C) + 1 then
  -- d = dt*C + rem > tau, computed without dt*C
  return 0, 0, dt + ceildiv(rem + n * P - tau, C), dt + ceildiv(rem, C)
end
local d = 0
if dt >= 0 then d = dt * C + rem end
local nd = d + n * P
if nd > tau then
  return 0, idiv(math.max(tau - d, 0), P), ceildiv(nd - tau, C), ceildiv(d, C)
end
if n > 0 then
  local q = math.floor(nd / C)
  redis.call('SET', key, gcra_state(now + q, nd - q * C, now), 'PX', ttlms(q + 1))
end
return 1, idiv(tau - nd, P), 0, ceildiv(nd, C)

end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
