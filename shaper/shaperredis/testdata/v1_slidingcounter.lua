-- slidingcounter.lua: one sliding-window-counter decision (shaper.SlidingCounter's
-- arithmetic, see window.go): counts of the current and previous fixed window,
-- the previous weighted by the part of it still inside the rolling window.
-- key     = the state key: the string "start prev cur"
-- ARGV    = P, C, B (= C), n  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us;
-- an admission of n > 0 returns in place of its retry (always 0) its stamp,
-- the window's start, which refund_slidingcounter.lua needs (Meter.Refund).
-- Writes when n > 0 (a peek records nothing); the TTL ends when both windows
-- have passed.
local N = C
local NP = N * P
local start, prev, cur
local fresh = true
local v = redis.call('GET', key)
if v then
  local s = ints(v, 3)
  if s then start, prev, cur, fresh = s[1], s[2], s[3], false end
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
now = math.max(t0, start)
local late = now - t0
local e = now - start
local weighted = prev * (P - e)
if allowed == 0 then
  local r = N - cur - n
  if r >= 0 then
    retry = P - e - idiv(r * P, prev)
  else
    retry = P - e + math.max(0, P - idiv((N - n) * P, cur))
  end
  retry = retry + late
end
local remaining = math.max(0, idiv(NP - weighted, P) - cur)
local reset = 0
if cur > 0 then
  reset = late + start + 2 * P - now
elseif prev > 0 then
  reset = late + start + P - now
end
if n > 0 then
  redis.call('SET', key, string.format('%d %d %d', start, prev, cur), 'PX', ttlms(start + 2 * P - now))
  if allowed == 1 then retry = start end -- the stamp (see Meter.Refund)
end
return allowed, remaining, retry, reset

end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
