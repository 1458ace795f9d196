-- slidinglog.lua: one sliding-window-log decision (shaper.SlidingLog's arithmetic,
-- see slidinglog.go): the admitted events of the last P µs, at most C in total.
-- key     = the state key: a LIST of entries ts, n (events at the same µs share
--           one entry), each packed as two little-endian doubles (struct.pack
--           '<dd', 16 bytes), oldest first; at most C entries; an entry of
--           another length is malformed and skipped
-- ARGV    = limit (B = C), n  (see common.lua)
-- Decides allowed, remaining, retry_after_us, reset_after_us (common.lua);
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
  local e = raw[i]
  if #e == 16 then
    len = len + 1
    ts[len], cnt[len] = struct.unpack('<dd', e)
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
    for i = first, len do redis.call('RPUSH', key, struct.pack('<dd', ts[i], cnt[i])) end
  else
    redis.call('LTRIM', key, dropped, -1)
  end
end
local newest = nil
if first <= len then newest = ts[len] end
if allowed == 1 and n > 0 then
  if newest == now then
    cnt[len] = cnt[len] + n
    redis.call('LSET', key, -1, struct.pack('<dd', now, cnt[len]))
  else
    redis.call('RPUSH', key, struct.pack('<dd', now, n))
  end
  newest = now
  sum = sum + n
  retry = now -- the stamp (see Meter.Refund)
end
local reset = 0
if newest then
  reset = newest + P - t0
  if n > 0 then
    local ttl = ceil((newest + P - now) / 1000)
    if not (ttl > ttlfloor) then ttl = ttlfloor end
    redis.call('PEXPIRE', key, string.format('%d', ttl))
  end
end
local r = N - sum
if r < 0 then r = 0 end
d_allowed, d_remaining, d_retry, d_reset = allowed, r, retry, reset
