-- slidingcounter.lua: one sliding-window-counter decision (shaper.SlidingCounter's
-- arithmetic, see window.go): counts of the current and previous fixed window,
-- the previous weighted by the part of it still inside the rolling window.
-- key     = the state key: start, prev, cur packed as three little-endian
--           doubles (struct.pack '<ddd'); a missing or malformed state (not
--           24 bytes) is fresh
-- ARGV    = limit (B = C), n  (see common.lua)
-- Decides allowed, remaining, retry_after_us, reset_after_us (common.lua);
-- an admission of n > 0 returns in place of its retry (always 0) its stamp,
-- the window's start, which refund_slidingcounter.lua needs (Meter.Refund).
-- Writes when n > 0 (a peek records nothing); the TTL ends when both windows
-- have passed.
local N = C
local NP = N * P
local start, prev, cur
local fresh = true
local v = redis.call('GET', key)
if v and #v == 24 then
  start, prev, cur = struct.unpack('<ddd', v)
  fresh = false
end
local t0 = now
if not fresh and now < start then now = start end
local w = now - (now % P)
if fresh or w ~= start then
  if not fresh and w == start + P then
    prev = cur
  else
    prev = 0
  end
  start, cur = w, 0
end
local allowed, retry = 0, 0
if (cur + n) * P + prev * (P - (now - start)) <= NP then
  cur = cur + n
  allowed = 1
end
-- The answer is computed at the call's time clamped to the (new) window start,
-- and its waits count from the call's own time.
now = t0
if now < start then now = start end
local late = now - t0
local e = now - start
local weighted = prev * (P - e)
if allowed == 0 then
  local r = N - cur - n
  local q
  if r >= 0 then
    q = r * P / prev -- truncated toward zero, as Go's integer division
    if q >= 0 then q = floor(q) else q = ceil(q) end
    retry = P - e - q
  else
    q = (N - n) * P / cur
    if q >= 0 then q = floor(q) else q = ceil(q) end
    q = P - q
    if not (q > 0) then q = 0 end -- math.max(0, q)
    retry = P - e + q
  end
  retry = retry + late
end
local remaining = (NP - weighted) / P
if remaining >= 0 then remaining = floor(remaining) else remaining = ceil(remaining) end
remaining = remaining - cur
if not (remaining > 0) then remaining = 0 end -- math.max(0, remaining)
local reset = 0
if cur > 0 then
  reset = late + start + 2 * P - now
elseif prev > 0 then
  reset = late + start + P - now
end
if n > 0 then
  local ttl = ceil((start + 2 * P - now) / 1000)
  if not (ttl > ttlfloor) then ttl = ttlfloor end
  redis.call('PSETEX', key, string.format('%d', ttl), struct.pack('<ddd', start, prev, cur))
  if allowed == 1 then retry = start end -- the stamp (see Meter.Refund)
end
d_allowed, d_remaining, d_retry, d_reset = allowed, remaining, retry, reset
