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
-- ttlms converts a lifetime in µs to a PEXPIRE argument in ms (rounded up),
-- as a string (see common.lua's TTL note).
local function ttlms(us) return string.format('%d', math.max(ttlfloor, ceil(us / 1000))) end
-- pair parses reserve.lua's schedule, two integers: packed as little-endian
-- doubles (struct.pack '<dd', 16 bytes), as this version writes it, or the
-- string of two space-separated integers that the previous version wrote.
-- That version reads both too, so the two share one schedule during a
-- rolling deploy (a version that read the other's schedule as malformed
-- would take it for idle and reset it). The packed form is tried first: no
-- text parses as packed (an ASCII top byte makes a double of magnitude
-- below 1, not an integer, and a text schedule has no zero byte), but a
-- packed schedule may parse as text (about one in 3·10^7: tonumber reads a
-- string up to its first zero byte, so bytes "4 8\0..." are 4 and 8; the
-- previous version, which tries text first, misreads those). nil if
-- malformed.
local function pair(v)
  if #v == 16 then
    local a, b = struct.unpack('<dd', v)
    if a % 1 == 0 and b % 1 == 0 then return a, b end -- NaN and ±Inf fail
  end
  local sp = string.find(v, ' ', 1, true)
  if sp then
    local a, b = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
    if a and b then return a, b end
  end
  return nil
end
