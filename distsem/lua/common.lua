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
--                              c:<tok> notify id, l:<tok> lease ms (waiters)
--   KEYS[6] = {name}:t   ZSET  tombstone token -> expiry (ms)
-- ARGV (common part):
--   ARGV[1] = token ("" for none), ARGV[2] = configured limit (used only when the
--   semaphore has no stored limit yet), ARGV[3] = key TTL ms, ARGV[4] = "publish" or
--   "spublish", ARGV[5] = notify channel prefix ({name}:n:), the channel of a waiter is
--   prefix .. its notify id. Script-specific arguments start at ARGV[6].
--
-- Time comes only from TIME. Numbers are passed to redis.call as Lua numbers,
-- never through tostring or '..': Redis converts a number argument with all its
-- digits (1795978983896001 stays 1795978983896001), while Lua's own formatting
-- (%.14g) would write 1.795978983896e+15. Fences (µs, ~1.8e15) stay below 2^53,
-- so they are exact in a Lua double. The
-- scripts have no error paths after their first write: every input is validated by
-- the Go caller.
local S, H, Q, QE, D, T = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local tok = ARGV[1]
local key_ttl = ARGV[3]
local pub = ARGV[4]
local chan_prefix = ARGV[5]

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local now_us = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local BOUND = 64 -- at most this many expired entries of each kind reaped per call

-- Keys written (or kept alive) by this call; finish() gives each a fresh TTL.
local touched = {}
local function touch(...)
  for _, k in ipairs({...}) do
    touched[k] = true
  end
end

local function weight_of(t)
  return tonumber(redis.call('HGET', D, 'w:' .. t) or '0')
end

-- State: the stored limit wins; the configured one initialises a new semaphore.
-- used (the weight held) is recomputed from the holders when the state was lost.
local st = redis.call('HMGET', S, 'limit', 'used', 'fence')
local dirty = false
local limit = tonumber(st[1] or '0')
if limit < 1 then
  limit = tonumber(ARGV[2])
  dirty = true
end
local last_fence = tonumber(st[3] or '0')
local used
if st[2] then
  used = tonumber(st[2])
else
  used = 0
  for _, h in ipairs(redis.call('ZRANGE', H, 0, -1)) do
    used = used + weight_of(h)
  end
  dirty = true
end

local function drop_waiter(t)
  redis.call('ZREM', Q, t)
  redis.call('ZREM', QE, t)
  redis.call('HDEL', D, 'w:' .. t, 'c:' .. t, 'l:' .. t)
end

local function drop_holder(t)
  used = used - weight_of(t)
  dirty = true
  redis.call('ZREM', H, t)
  redis.call('HDEL', D, 'w:' .. t, 'f:' .. t)
end

-- Reap expired holders (bounded). Dead waiters are dropped when they reach the
-- head of the queue (handoff), tombstones by release.lua.
local function reap()
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', H, '-inf', now, 'LIMIT', 0, BOUND)) do
    drop_holder(h)
  end
end

-- Make t a holder of weight w until expiry; returns its fencing number,
-- max(last + 1, now in µs): monotonic, and seeded from time so that it keeps
-- growing after the state is lost.
local function grant(t, w, expiry)
  local fence = last_fence + 1
  if fence < now_us then
    fence = now_us
  end
  last_fence = fence
  redis.call('ZADD', H, expiry, t)
  redis.call('HSET', D, 'w:' .. t, w, 'f:' .. t, fence)
  used = used + w
  dirty = true
  touch(H, D, S)
  return fence
end

-- Hand freed capacity to the head of the queue, in order, and notify exactly the
-- granted waiters. FIFO with head-of-line blocking: a heavy head is never
-- overtaken, so it is not starved. The waiter is granted with its own lease and
-- told its token and fence ("<token>:<fence>") on its process's channel, so it
-- holds the permit without another call; if the message is lost, its next
-- heartbeat (an idempotent acquire) finds it granted. A head whose heartbeat
-- expired is dropped, not granted. Returns true when the queue is empty
-- afterwards.
local function handoff()
  for _ = 1, BOUND do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then
      return true
    end
    local w = weight_of(head)
    local beat = tonumber(redis.call('ZSCORE', QE, head) or '0')
    if w < 1 or beat <= now then
      drop_waiter(head) -- dead or corrupt: never block the queue on it
    else
      if used + w > limit then
        return false
      end
      local id = redis.call('HGET', D, 'c:' .. head)
      local lease = tonumber(redis.call('HGET', D, 'l:' .. head) or '1000')
      drop_waiter(head)
      local fence = grant(head, w, now + lease)
      if id then
        redis.call(pub, chan_prefix .. id, head .. ':' .. string.format('%d', fence))
      end
    end
  end
  return redis.call('ZCARD', Q) == 0
end

-- Write back the state and give every key this call wrote or relies on a TTL of
-- key_ttl, so that an idle semaphore vanishes. A key deleted by this call (an
-- emptied ZSET or hash) is skipped by PEXPIRE.
local function finish()
  if used ~= 0 and (used < 0 or redis.call('ZCARD', H) == 0) then
    used = 0 -- self-heal: no holders, nothing in use
    dirty = true
  end
  if dirty then
    redis.call('HSET', S, 'limit', limit, 'used', used, 'fence', last_fence)
    touched[S] = true
  end
  for k in pairs(touched) do
    redis.call('PEXPIRE', k, key_ttl)
  end
end
