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
-- key     = the state key: tokens, last, per (tokens scaled by per = P µs)
--           packed as three little-endian doubles (struct.pack '<ddd'); a
--           missing or malformed state (not 24 bytes, or per ≤ 0) is fresh
-- ARGV    = limit, n  (see common.lua)
-- Decides allowed, remaining, retry_after_us, reset_after_us (common.lua).
local full = B * P
local tokens, last, per
local fresh = true
local v = redis.call('GET', key)
if v and #v == 24 then
  tokens, last, per = struct.unpack('<ddd', v)
  fresh = not (per > 0)
end
if not fresh then
  -- refill
elseif n > 0 then
  tokens, last, per = full, now, P
else
  tokens, last = full, now -- a peek at a fresh key
end
-- A call dated before last was decided at last: its waits count from its own time.
local late = last - now
if late < 0 then late = 0 end
local need = n * P
local allowed = 0
local retry = 0
if tokens < need then
  retry = late + ceil((need - tokens) / C)
else
  tokens = tokens - need
  allowed = 1
end
if n > 0 then -- a peek (n = 0) writes nothing, not even its time
  local ttl = 2 * ceil(ceil(full / C) / 1000)
  if ttl < 60000 then ttl = 60000 end
  if not (ttl > ttlfloor) then ttl = ttlfloor end
  redis.call('PSETEX', key, string.format('%d', ttl), struct.pack('<ddd', tokens, last, per))
end
local r = tokens / P -- truncated toward zero, as Go's integer division
if r >= 0 then r = floor(r) else r = ceil(r) end
d_allowed, d_remaining, d_retry, d_reset = allowed, r, retry, late + ceil((full - tokens) / C)
