-- release.lua: give back a held token, or withdraw a queued one, and hand the
-- freed capacity to the head of the queue. Writes a tombstone for the token, so
-- that an acquire of it that runs later (a go-redis retry, or a call that timed
-- out at the client but was still queued in Redis) is refused instead of
-- granted: always for the cleanup of a failed or cancelled acquire (ARGV[8] =
-- 1), and otherwise only when the token was not held (ARGV[8] = 0: the release
-- of a permit whose grant the client saw; skipping its tombstone saves a write
-- and memory per release at full throughput).
-- Idempotent: a second release changes nothing but the tombstone's expiry.
-- KEYS, ARGV[1..5]: see head.lua (ARGV[1] may be "" to only set the limit).
-- ARGV[6] = tombstone TTL ms, ARGV[7] = new limit to store, or 0 to keep it,
-- ARGV[8] = 1 to always write the tombstone, 0 to write it unless held,
-- ARGV[9] = the weight the token was granted with, or 0 if unknown (the fast
-- path then reads it). It is trusted, to save a read: only Permit.Release
-- sends it, with the weight of the grant; a wrong one would free weight still
-- held until a reap finds the holders gone.
-- Returns {was, limit, used}: was = 1 held, 2 queued, 0 neither.
-- Fast path: the release of a held token with the queue empty, no tombstone
-- to write or reap and the limit kept, as below, but without reading the
-- time: it skips only what the time could call for, and nothing of that is
-- due for this call's outcome. Reaping expired holders waits for the next
-- call that needs it (every capacity decision and hand-off forces it), as
-- does the TTL refresh (this call creates no key; each holder, waiter and
-- tombstone left keeps the keys alive with calls of its own; without any,
-- the keys may as well expire). With a tombstone it takes the general path,
-- which sweeps expired ones.
if settled and he0 ~= -1 and tn0 == -1 and tok ~= '' and ARGV[8] ~= '1' and tonumber(ARGV[7]) <= 0
  and redis.call('ZREM', H, tok) == 1 then
  local wk = 'w:' .. tok
  local w = tonumber(ARGV[9] or '0') or 0
  if w < 1 then
    w = tonumber(redis.call('HGET', D, wk) or '0')
  end
  local used = used0 - w
  redis.call('HDEL', D, wk, 'f:' .. tok)
  if used < 0 then
    used = 0 -- self-heal
  end
  if used ~= used0 then
    redis.call('HSET', S, 'used', int(used))
  end
  return {1, limit0, used}
end

-- @common
local tomb_ttl = tonumber(ARGV[6])
local new_limit = tonumber(ARGV[7])
local always_tomb = ARGV[8] == '1'

reap(nq > 0)
if tn ~= -1 and tn <= now then
  local old = redis.call('ZRANGEBYSCORE', T, '-inf', int(now), 'LIMIT', '0', BOUND_S)
  if #old > 0 then
    redis.call('ZREM', T, unpack(old))
  end
  tn = tonumber(redis.call('ZRANGE', T, '0', '0', 'WITHSCORES')[2] or '-1')
  dirty = true
end
if new_limit > 0 then
  limit = new_limit
  dirty = true
end
local was = 0
if tok ~= '' then
  if redis.call('ZREM', H, tok) == 1 then
    local wk = 'w:' .. tok
    local w = tonumber(ARGV[9] or '0') or 0
    if w < 1 then
      w = tonumber(redis.call('HGET', D, wk) or '0')
    end
    used = used - w
    d_dead[nd_dead + 1], d_dead[nd_dead + 2] = wk, 'f:' .. tok -- by finish, with the hand-off's
    nd_dead = nd_dead + 2
    d_tok = tok
    dirty = true
    h_n = h_n - 1
    was = 1
  elseif nq > 0 and redis.call('ZSCORE', Q, tok) then
    drop_waiter(tok)
    was = 2
  end
  if always_tomb or was ~= 1 then
    local expiry = now + tomb_ttl
    redis.call('ZADD', T, int(expiry), tok)
    touched[T] = true
    if tn == -1 or expiry < tn then
      tn = expiry
      dirty = true
    end
  end
end
handoff()
finish()
return {was, limit, used}
