-- refund_tokenbucket.lua: give back the cost n of an admission of
-- tokenbucket.lua, for a caller whose request was refused by a later step
-- (shaper.TokenBucket's refund, see tokenbucket.go): refill up to now, then
-- n tokens back, up to the capacity.
-- KEYS[1] = the state key (see tokenbucket.lua)
-- ARGV    = P, C, B, n, at (unused by the token bucket)  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0} (no state, or full).
local key = KEYS[1]
local full = B * P
local v = redis.call('GET', key)
if not v or n == 0 then return {0} end
local s = ints(v, 3)
if not s or s[3] <= 0 then return {0} end
local tokens, last, per = s[1], s[2], s[3]
-- refill
if tokens == full then return {0} end
tokens = math.min(tokens + n * P, full)
local fill = ceildiv(full, C)
redis.call('SET', key, string.format('%d %d %d', tokens, last, per),
  'PX', math.max(ttlms(0), 60000, 2 * math.ceil(fill / 1000)))
return {1}
