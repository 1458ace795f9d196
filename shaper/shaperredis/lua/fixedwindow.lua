-- fixedwindow.lua: one fixed-window decision (shaper.FixedWindow's arithmetic, see
-- window.go). Windows of P µs are aligned to the Unix epoch; B must equal C.
-- key     = the state key: start, count packed as two little-endian doubles
--           (struct.pack '<dd'); a missing or malformed state (not 16 bytes)
--           is fresh
-- ARGV    = limit (B = C), n  (see common.lua)
-- Decides allowed, remaining, retry_after_us, reset_after_us (common.lua); an
-- admission of n > 0 returns in place of its retry (always 0) its stamp, the
-- window's start, which refund_fixedwindow.lua needs (see Meter.Refund).
-- Writes only on an admission with n > 0 (a denial or a peek records nothing);
-- the TTL ends with the window.
local N = C
local start, count = 0, 0
local fresh = true
local v = redis.call('GET', key)
if v and #v == 16 then
  start, count = struct.unpack('<dd', v)
  fresh = false
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
  local r = N - count
  if r < 0 then r = 0 end
  d_allowed, d_remaining, d_retry, d_reset = 0, r, stop, stop
  break
end
count = count + n
if count == 0 then stop = 0 end
local r = N - count
if r < 0 then r = 0 end
if n > 0 then
  local ttl = ceil(stop / 1000)
  if not (ttl > ttlfloor) then ttl = ttlfloor end
  redis.call('PSETEX', key, string.format('%d', ttl), struct.pack('<dd', start, count))
  d_allowed, d_remaining, d_retry, d_reset = 1, r, start, stop
  break
end
d_allowed, d_remaining, d_retry, d_reset = 1, r, 0, stop
