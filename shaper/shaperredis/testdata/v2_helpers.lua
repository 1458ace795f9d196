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
-- pair parses a state of two integers (reserve.lua's schedule): the string
-- of two space-separated integers that this version writes, or the same two
-- packed as little-endian doubles (struct.pack '<dd', 16 bytes), which a
-- later version is to write (every other state is packed already). Reading
-- both first keeps a rolling deploy of that version safe: a version that
-- read a packed schedule as malformed would take it for idle and reset it.
-- No valid packed schedule parses as text (its bytes are not digits). nil
-- if malformed.
local function pair(v)
  local sp = string.find(v, ' ', 1, true)
  if sp then
    local a, b = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
    if a and b then return a, b end
  end
  if #v == 16 then
    local a, b = struct.unpack('<dd', v)
    if a % 1 == 0 and b % 1 == 0 then return a, b end -- NaN and ±Inf fail
  end
  return nil
end
