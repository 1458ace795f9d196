-- refund_tokenbucket.lua: give back the cost n of an admission of
-- tokenbucket.lua, for a caller whose request was refused by a later step
-- (shaper.TokenBucket's refund, see tokenbucket.go): refill up to now, then
-- n tokens back, up to the capacity.
-- KEYS[1] = the state key (see tokenbucket.lua)
-- ARGV    = limit, n, at (unused by the token bucket)  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0} (no state, or full).
local key = KEYS[1]
local full = B * P
local v = redis.call('GET', key)
if not v or #v ~= 24 or n == 0 then return {0} end
local tokens, last, per = struct.unpack('<ddd', v)
if not (per > 0) then return {0} end
-- refill
if tokens == full then return {0} end
tokens = math.min(tokens + n * P, full)
local fill = ceildiv(full, C)
redis.call('SET', key, struct.pack('<ddd', tokens, last, per),
  'PX', string.format('%d', math.max(ttlfloor, 60000, 2 * math.ceil(fill / 1000))))
return {1}
