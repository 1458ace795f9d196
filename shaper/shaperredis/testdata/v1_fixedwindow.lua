-- fixedwindow.lua: one fixed-window decision (shaper.FixedWindow's arithmetic, see
-- window.go). Windows of P µs are aligned to the Unix epoch; B must equal C.
-- key     = the state key: the string "start count"
-- ARGV    = P, C, B (= C), n  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us; an
-- admission of n > 0 returns in place of its retry (always 0) its stamp, the
-- window's start, which refund_fixedwindow.lua needs (see Meter.Refund).
-- Writes only on an admission with n > 0 (a denial or a peek records nothing);
-- the TTL ends with the window.
local N = C
local start, count
local fresh = true
local v = redis.call('GET', key)
if v then
  local s = ints(v, 2)
  if s then start, count, fresh = s[1], s[2], false end
end
local t0 = now
if not fresh and now < start then now = start end
local w = now - (now % P)
if fresh or w ~= start then
  start, count = w, 0
end
-- The waits count from the call's own time, even if it is before start.
local stop = start + P - t0
if count + n > N then
  return 0, math.max(N - count, 0), stop, stop
end
count = count + n
if count == 0 then stop = 0 end
if n > 0 then
  redis.call('SET', key, string.format('%d %d', start, count), 'PX', ttlms(stop))
  return 1, math.max(N - count, 0), start, stop
end
return 1, math.max(N - count, 0), 0, stop

end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
