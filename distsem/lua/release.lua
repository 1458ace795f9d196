-- release.lua: give back a held token, or withdraw a queued one, and hand the
-- freed capacity to the head of the queue. Always writes a tombstone for the
-- token, so an acquire of it that runs later (a retry, or a call that timed out
-- at the client but was still queued in Redis) is refused instead of granted.
-- Idempotent: a second release changes nothing but the tombstone's expiry.
-- KEYS, ARGV[1..5]: see common.lua (ARGV[1] may be "" to only set the limit).
-- ARGV[6] = tombstone TTL ms, ARGV[7] = new limit to store, or 0 to keep it.
-- Returns {was, limit, used}: was = 1 held, 2 queued, 0 neither.
local tomb_ttl = tonumber(ARGV[6])
local new_limit = tonumber(ARGV[7])

reap()
local old = redis.call('ZRANGEBYSCORE', T, '-inf', now, 'LIMIT', 0, BOUND)
if #old > 0 then
  redis.call('ZREM', T, unpack(old))
end
if new_limit > 0 then
  limit = new_limit
  dirty = true
end
local was = 0
if tok ~= '' then
  if redis.call('ZSCORE', H, tok) then
    drop_holder(tok)
    was = 1
  elseif redis.call('ZSCORE', Q, tok) then
    drop_waiter(tok)
    was = 2
  end
  redis.call('ZADD', T, now + tomb_ttl, tok)
  touch(T, S)
end
handoff()
finish()
return {was, limit, used}
