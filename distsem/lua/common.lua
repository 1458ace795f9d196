-- common.lua: shared prelude of acquire.lua, renew.lua and release.lua (prepended to
-- each script in scripts.go; the three files are never run alone).
--
-- KEYS (all under one hash tag, built by the client, never in Lua):
--   KEYS[1] = {name}:s   HASH  limit, used (weight held), seq (last queue number),
--                              fence (last fencing number)
--   KEYS[2] = {name}:h   ZSET  holder token -> lease expiry (ms, Redis TIME)
--   KEYS[3] = {name}:q   ZSET  waiter token -> queue number (FIFO order)
--   KEYS[4] = {name}:qe  ZSET  waiter token -> heartbeat expiry (ms)
--   KEYS[5] = {name}:d   HASH  w:<tok> weight, f:<tok> fence (holders),
--                              c:<tok> notify id, l:<tok> claim ms (waiters)
--   KEYS[6] = {name}:t   ZSET  tombstone token -> expiry (ms)
-- ARGV (common part):
--   ARGV[1] = token ("" for none), ARGV[2] = configured limit (used only when the
--   semaphore has no stored limit yet), ARGV[3] = key TTL ms, ARGV[4] = "publish" or
--   "spublish", ARGV[5] = notify channel prefix ({name}:n:), the channel of a waiter is
--   prefix .. its notify id. Script-specific arguments start at ARGV[6].
--
-- Time comes only from TIME. Numbers that can exceed 1e14 (fences in µs) are written
-- with string.format('%d') so Lua never formats them in scientific notation. The
-- scripts have no error paths after their first write: every input is validated by
-- the Go caller.
local S, H, Q, QE, D, T = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local tok = ARGV[1]
local key_ttl = tonumber(ARGV[3])
local pub = ARGV[4]
local chan_prefix = ARGV[5]

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local now_us = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local BOUND = 64 -- at most this many expired entries of each kind reaped per call

local function fmt(n)
  return string.format('%d', n)
end

-- The stored limit wins; the configured one initialises a new semaphore.
local limit = tonumber(redis.call('HGET', S, 'limit') or '0')
if limit < 1 then
  limit = tonumber(ARGV[2])
  redis.call('HSET', S, 'limit', fmt(limit))
end

local function weight_of(t)
  return tonumber(redis.call('HGET', D, 'w:' .. t) or '0')
end

-- used: the weight held; recomputed from the holders when the state hash was lost.
local used
do
  local u = redis.call('HGET', S, 'used')
  if u then
    used = tonumber(u)
  else
    used = 0
    for _, h in ipairs(redis.call('ZRANGE', H, 0, -1)) do
      used = used + weight_of(h)
    end
  end
end

local function drop_waiter(t)
  redis.call('ZREM', Q, t)
  redis.call('ZREM', QE, t)
  redis.call('HDEL', D, 'w:' .. t, 'c:' .. t, 'l:' .. t)
end

local function drop_holder(t)
  used = used - weight_of(t)
  redis.call('ZREM', H, t)
  redis.call('HDEL', D, 'w:' .. t, 'f:' .. t)
end

-- Reap expired holders, dead waiters and old tombstones, each bounded.
local function reap()
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', H, '-inf', now, 'LIMIT', 0, BOUND)) do
    drop_holder(h)
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', QE, '-inf', now, 'LIMIT', 0, BOUND)) do
    drop_waiter(w)
  end
  local old = redis.call('ZRANGEBYSCORE', T, '-inf', now, 'LIMIT', 0, BOUND)
  if #old > 0 then
    redis.call('ZREM', T, unpack(old))
  end
end

-- Make t a holder of weight w until expiry; returns its fencing number,
-- max(last + 1, now in µs): monotonic, and seeded from time so that it keeps
-- growing after the state is lost.
local function grant(t, w, expiry)
  local fence = tonumber(redis.call('HGET', S, 'fence') or '0') + 1
  if fence < now_us then
    fence = now_us
  end
  redis.call('HSET', S, 'fence', fmt(fence))
  redis.call('ZADD', H, fmt(expiry), t)
  redis.call('HSET', D, 'w:' .. t, fmt(w), 'f:' .. t, fmt(fence))
  used = used + w
  return fence
end

-- Hand freed capacity to the head of the queue, in order, and notify exactly the
-- granted waiters. FIFO with head-of-line blocking: a heavy head is never
-- overtaken, so it is not starved. A granted waiter holds the permit until its
-- claim time (its heartbeat TTL); its next acquire call claims it and sets the
-- full lease.
local function handoff()
  for _ = 1, BOUND do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then
      return
    end
    local w = weight_of(head)
    if w < 1 then
      drop_waiter(head) -- corrupt entry: never block the queue on it
    else
      if used + w > limit then
        return
      end
      local id = redis.call('HGET', D, 'c:' .. head)
      local claim = tonumber(redis.call('HGET', D, 'l:' .. head) or '1000')
      drop_waiter(head)
      grant(head, w, now + claim)
      if id then
        redis.call(pub, chan_prefix .. id, head)
      end
    end
  end
end

-- Write back used and keep every key alive for at least key_ttl. Keys are only
-- touched when their TTL fell below half of key_ttl (or they have none).
local function finish()
  if redis.call('ZCARD', H) == 0 or used < 0 then
    used = 0
  end
  redis.call('HSET', S, 'used', fmt(used))
  for _, k in ipairs(KEYS) do
    local pt = redis.call('PTTL', k)
    if pt == -1 or (pt >= 0 and pt < key_ttl / 2) then
      redis.call('PEXPIRE', k, fmt(key_ttl))
    end
  end
end
