-- tokenbucket.lua: one token-bucket decision (shaper.TokenBucket's arithmetic, see
-- tokenbucket.go). The reference behaviour is the seed document's script: a bucket
-- starts full, refills at the rate up to its capacity, never moves time backwards,
-- writes the refill even on a denial, and keeps the key for max(60 s, twice the
-- time to fill an empty bucket). Differences from the seed, each shown by a test:
-- integer µs instead of float tokens per ms (the seed's repeated float refills
-- lose tokens: ten refills of 0.1 make 0.9999999999999999, and a call made when
-- its retry_after said is denied), a cost of 0 is a peek that writes nothing
-- instead of an error, and a call dated before the last one is told its wait
-- from its own time.
-- key     = the state key: the string "tokens last per" (tokens scaled by per = P µs)
-- ARGV    = P, C, B (capacity), n  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us.
local full = B * P
local tokens, last, per
local fresh = true
local v = redis.call('GET', key)
if v then
  local s = ints(v, 3)
  if s and s[3] > 0 then
    tokens, last, per, fresh = s[1], s[2], s[3], false
  end
end
if not fresh or n > 0 then
  if fresh then
    tokens, last, per = full, now, P
  else
    -- tbrefill.lua: the token bucket's refill (tokenbucket.go's refill), the one
-- copy that scripts.go puts at the line "-- refill" of tokenbucket.lua and
-- refund_tokenbucket.lua: brings tokens (scaled by per), last and per, read
-- from a state that is not fresh, up to now under the current P, C and full
-- (= B·P).
if per ~= P then
  tokens = idiv(tokens, per) * P
  per = P
end
tokens = math.min(tokens, full)
local t = now
if t < last then t = last end
local e = t - last
if e >= ceildiv(full - tokens, C) then
  tokens = full
else
  tokens = tokens + e * C
end
last = t
  end
else
  tokens, last = full, now -- a peek at a fresh key
end
-- A call dated before last was decided at last: its waits count from its own time.
local late = math.max(last - now, 0)
local need = n * P
local allowed = 0
local retry = 0
if tokens < need then
  retry = late + ceildiv(need - tokens, C)
else
  tokens = tokens - need
  allowed = 1
end
if n > 0 then -- a peek (n = 0) writes nothing, not even its time
  local fill = ceildiv(full, C)
  redis.call('SET', key, string.format('%d %d %d', tokens, last, per),
    'PX', math.max(ttlms(0), 60000, 2 * math.ceil(fill / 1000)))
end
return allowed, idiv(tokens, P), retry, late + ceildiv(full - tokens, C)

end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
