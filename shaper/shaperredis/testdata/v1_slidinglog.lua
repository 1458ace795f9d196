-- slidinglog.lua: one sliding-window-log decision (shaper.SlidingLog's arithmetic,
-- see slidinglog.go): the admitted events of the last P µs, at most C in total.
-- key     = the state key: a LIST of "ts n" entries, oldest first (events at the same µs
--           share one entry); at most C entries
-- ARGV    = P, C, B (= C), n  (see common.lua)
-- decide returns allowed, remaining, retry_after_us, reset_after_us;
-- an admission of n > 0 returns in place of its retry (always 0) its stamp,
-- the entry's time, which refund_slidinglog.lua needs (Meter.Refund).
-- Reads the whole list (O(C)); for n > 0 trims expired entries, appends on
-- admission, and sets a TTL that ends when the newest entry leaves the window;
-- a peek (n = 0) writes nothing. Waits count from the call's own time, even if
-- it is before the newest entry (the call is decided at that entry's time).
local N = C
local raw = redis.call('LRANGE', key, 0, -1)
local ts, cnt, len = {}, {}, 0
for i = 1, #raw do
  local s = ints(raw[i], 2)
  if s then
    len = len + 1
    ts[len], cnt[len] = s[1], s[2]
  end
end
local t0 = now
if len > 0 and ts[len] > now then now = ts[len] end
local first, sum = 1, 0
while first <= len and ts[first] <= now - P do first = first + 1 end
for i = first, len do sum = sum + cnt[i] end
local allowed, retry = 0, 0
if sum + n > N then
  local freed = 0
  for i = first, len do
    freed = freed + cnt[i]
    if sum - freed + n <= N then
      retry = ts[i] + P - t0
      break
    end
  end
else
  allowed = 1
end
local dropped = first - 1
if n > 0 and (dropped > 0 or #raw ~= len) then
  if dropped >= len or #raw ~= len then
    redis.call('DEL', key)
    for i = first, len do redis.call('RPUSH', key, string.format('%d %d', ts[i], cnt[i])) end
  else
    redis.call('LTRIM', key, dropped, -1)
  end
end
local newest = nil
if first <= len then newest = ts[len] end
if allowed == 1 and n > 0 then
  if newest == now then
    cnt[len] = cnt[len] + n
    redis.call('LSET', key, -1, string.format('%d %d', now, cnt[len]))
  else
    redis.call('RPUSH', key, string.format('%d %d', now, n))
  end
  newest = now
  sum = sum + n
  retry = now -- the stamp (see Meter.Refund)
end
local reset = 0
if newest then
  reset = newest + P - t0
  if n > 0 then redis.call('PEXPIRE', key, ttlms(newest + P - now)) end
end
return allowed, math.max(N - sum, 0), retry, reset

end
local dl = tonumber(ARGV[5])
if not dl then return redis.error_reply('ERR shaper: invalid arguments') end
if dl > 0 and now > dl then return {-2, now, 0, 0} end
return {decide(KEYS[1], n)}
