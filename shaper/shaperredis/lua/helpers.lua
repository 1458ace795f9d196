-- helpers.lua: functions for the scripts that are not meter decisions (lease,
-- reserve, unreserve, the refunds), put after the prelude (see scripts.go).
-- idiv is Go's integer division (truncated toward zero).
local function idiv(a, b)
  local q = a / b
  if q >= 0 then return floor(q) end
  return ceil(q)
end
-- ceildiv is ⌈a/b⌉ for b > 0 (exact for |a| < 2^53).
local function ceildiv(a, b) return ceil(a / b) end
-- ttlms converts a lifetime in µs to a PEXPIRE argument in ms (rounded up).
local function ttlms(us) return math.max(ttlfloor, ceil(us / 1000)) end
-- pair parses a state string of two space-separated integers; nil if malformed.
local function pair(v)
  local sp = string.find(v, ' ', 1, true)
  if not sp then return nil end
  local a, b = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  if not a or not b then return nil end
  return a, b
end
