-- refund_fixedwindow.lua: give back the cost n of an admission of
-- fixedwindow.lua stamped at (its window's start), for a caller whose request
-- was refused by a later step (shaper.FixedWindow's refund, see window.go):
-- n is uncounted if that window is still the key's and not over.
-- KEYS[1] = the state key (see fixedwindow.lua)
-- ARGV    = limit, n, at  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0}.
local key = KEYS[1]
local at = tonumber(ARGV[3])
if not at then return redis.error_reply('ERR shaper: invalid arguments') end
local v = redis.call('GET', key)
if not v or #v ~= 16 or n == 0 then return {0} end
local start, count = struct.unpack('<dd', v)
if start ~= at or count == 0 or now >= start + P then return {0} end
count = math.max(count - n, 0)
redis.call('SET', key, struct.pack('<dd', start, count), 'PX', ttlms(start + P - now))
return {1}
