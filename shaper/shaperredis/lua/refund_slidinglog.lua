-- refund_slidinglog.lua: give back the cost n of an admission of
-- slidinglog.lua stamped at (its entry's time), for a caller whose request
-- was refused by a later step (shaper.SlidingLog's refund, see
-- slidinglog.go): n is taken off the entry at that time, and the entry is
-- removed if nothing is left in it. An entry no longer in the list has
-- nothing left to give back.
-- KEYS[1] = the state key (see slidinglog.lua)
-- ARGV    = limit, n, at  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0}.
local key = KEYS[1]
local at = tonumber(ARGV[3])
if not at then return redis.error_reply('ERR shaper: invalid arguments') end
if n == 0 then return {0} end
local raw = redis.call('LRANGE', key, 0, -1)
for i = #raw, 1, -1 do
  if #raw[i] == 16 then
    local t, c = struct.unpack('<dd', raw[i])
    if t < at then return {0} end
    if t == at then
      local left = c - math.min(n, c)
      if left > 0 then
        redis.call('LSET', key, i - 1, struct.pack('<dd', at, left))
      else
        -- Entries are unique by time: mark this one, then remove the mark.
        redis.call('LSET', key, i - 1, '-')
        redis.call('LREM', key, 1, '-')
      end
      return {1}
    end
  end
end
return {0}
