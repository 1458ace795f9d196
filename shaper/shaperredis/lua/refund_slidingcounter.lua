-- refund_slidingcounter.lua: give back the cost n of an admission of
-- slidingcounter.lua stamped at (its window's start), for a caller whose
-- request was refused by a later step (shaper.SlidingCounter's refund, see
-- window.go): n is uncounted from that window, whether it is still the
-- current one or has become the previous one.
-- KEYS[1] = the state key (see slidingcounter.lua)
-- ARGV    = limit, n, at  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0}.
local key = KEYS[1]
local at = tonumber(ARGV[3])
if not at then return redis.error_reply('ERR shaper: invalid arguments') end
local v = redis.call('GET', key)
if not v or #v ~= 24 or n == 0 then return {0} end
local start, prev, cur = struct.unpack('<ddd', v)
if start == at and cur > 0 then
  cur = math.max(cur - n, 0)
elseif start == at + P and prev > 0 then
  prev = math.max(prev - n, 0)
else
  return {0}
end
local ttl = start + 2 * P - now
if ttl <= 0 then return {0} end
redis.call('SET', key, struct.pack('<ddd', start, prev, cur), 'PX', ttlms(ttl))
return {1}
