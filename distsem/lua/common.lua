-- common.lua: shared prelude of acquire.lua, renew.lua and release.lua (prepended to
-- each script in scripts.go; the three files are never run alone).
--
-- KEYS (all under one hash tag, built by the client, never in Lua):
--   KEYS[1] = {name}:s   HASH  limit, used (weight held), seq (last queue number),
--                              fence (last fencing number), and bookkeeping that
--                              lets the common path skip calls:
--                              nq (waiters in the queue; may only over-count),
--                              tn (-1 when there is no tombstone, else a lower
--                              bound of the earliest tombstone expiry, ms),
--                              ta (when every key's TTL was last refreshed, ms),
--                              he (-1 when there is no holder, else a lower
--                              bound of the earliest lease expiry, ms)
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
-- Time comes only from TIME. Numbers are passed to redis.call as strings made
-- by int() (string.format '%d', all digits), never through tostring or '..':
-- Lua's own formatting (%.14g) would write 1.795978983896e+15. (A Lua number
-- argument would also keep its digits, but Redis 7.0 formats it with
-- snprintf %.17g, which costs about 1 µs per argument.) Arguments that arrive
-- as strings (ARGV, replies) are passed on unconverted. Fences (µs, ~1.8e15)
-- stay below 2^53, so they are exact in a Lua double. The
-- scripts have no error paths after their first write: every input is validated by
-- the Go caller.
--
-- Cost: every redis.call and every number converted costs Redis CPU, so the common
-- (uncontended) path makes as few as it can: the bookkeeping fields of KEYS[1],
-- read by the one HMGET, say when the queue is empty (no hand-off scan), when
-- there is no tombstone (no lookup) and when no lease can have expired (no
-- reaping). Missing bookkeeping (a lost or older state) is recomputed from the
-- keys.
--
-- TTLs: every key always has a TTL. A write keeps a key's TTL, so only a key
-- this call may have created (or re-created after emptying it) needs one: it is
-- PEXPIREd at the end of the call unless the call proved that the key existed
-- (and was not emptied) before the write. In addition every key is given a
-- fresh TTL of key_ttl when the last such refresh (ta) is older than
-- key_ttl / 4 or unknown, so a key lives at least 3/4 key_ttl after the last
-- call, which is more than twice any lease, heartbeat or tombstone TTL.
local S, H, Q, QE, D, T = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local tok = ARGV[1]
local key_ttl_s = ARGV[3]
local key_ttl = tonumber(key_ttl_s)
local pub = ARGV[4]
local chan_prefix = ARGV[5]

local fmt = string.format
local function int(x)
  return fmt('%d', x)
end

local tm = redis.call('TIME')
local tm_s, tm_us = tonumber(tm[1]), tonumber(tm[2])
local now = tm_s * 1000 + math.floor(tm_us / 1000)
local now_us = tm_s * 1000000 + tm_us
local BOUND, BOUND_S = 64, '64' -- at most this many expired entries of each kind reaped per call

-- Keys this call may have created; finish() gives each a TTL.
local touched = {}

local function weight_of(t)
  return tonumber(redis.call('HGET', D, 'w:' .. t) or '0')
end

-- State: the stored limit wins; the configured one initialises a new semaphore.
-- used (the weight held) is recomputed from the holders when the state was lost,
-- and so are the waiter count and the tombstone bound.
local st = redis.call('HMGET', S, 'limit', 'used', 'fence', 'nq', 'tn', 'ta', 'he')
local dirty = false
-- The values read, to write back only what changed.
local limit0, used0, fence0, nq0, tn0, ta0, he0 =
  tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4]), tonumber(st[5]), tonumber(st[6]), tonumber(st[7])
local limit = limit0 or 0
if limit < 1 then
  limit = tonumber(ARGV[2])
  dirty = true
end
local last_fence = fence0 or 0
local last_fence_s -- int(last_fence) once a grant made it
local used
if used0 then
  used = used0
else
  used = 0
  for _, h in ipairs(redis.call('ZRANGE', H, '0', '-1')) do
    used = used + weight_of(h)
  end
  dirty = true
end
local nq = nq0
if not nq then
  nq = redis.call('ZCARD', Q)
  dirty = true
end
local function tomb_bound()
  local first = redis.call('ZRANGE', T, '0', '0', 'WITHSCORES')
  return tonumber(first[2] or '-1')
end
local tn = tn0
if not tn then
  tn = tomb_bound()
  dirty = true
end
local ta = ta0
local he = he0 or 0 -- 0 (unknown): look

-- Every write of a lease expiry to H goes through here, so that he stays a
-- lower bound of the earliest one.
local function note_lease(expiry)
  if he == -1 or expiry < he then
    he = expiry
    dirty = true
  end
end

local function drop_waiter(t)
  nq = nq - redis.call('ZREM', Q, t)
  if nq < 0 then
    nq = 0
  end
  dirty = true
  redis.call('ZREM', QE, t)
  redis.call('HDEL', D, 'w:' .. t, 'c:' .. t, 'l:' .. t)
end

-- h_exists: H is known to exist (so a write to it keeps its TTL).
local h_exists = false

local function drop_holder(t, w)
  used = used - (w or weight_of(t))
  dirty = true
  h_exists = false
  redis.call('ZREM', H, t)
  redis.call('HDEL', D, 'w:' .. t, 'f:' .. t)
end

-- Reap expired holders (bounded). Unless forced, nothing is read when he says
-- that no lease can have expired: callers force it whenever the self-heal
-- below could change their outcome (a capacity decision or a hand-off), so
-- skipping it changes nothing. Otherwise the earliest lease is read, expired
-- holders are dropped and he is set to the earliest lease left; without
-- holders nothing is in use (self-heal). he = -1 with weight in use (state
-- written by something else) is looked at, never trusted. Dead waiters are
-- dropped when they reach the head of the queue (handoff), tombstones by
-- release.lua.
local reaped = false
local function reap(force)
  if reaped or (not force and (he > now or (he == -1 and used == 0))) then
    return
  end
  reaped = true
  local first = redis.call('ZRANGE', H, '0', '0', 'WITHSCORES')
  if first[2] and tonumber(first[2]) <= now then
    for _, h in ipairs(redis.call('ZRANGEBYSCORE', H, '-inf', int(now), 'LIMIT', '0', BOUND_S)) do
      drop_holder(h)
    end
    first = redis.call('ZRANGE', H, '0', '0', 'WITHSCORES')
  end
  dirty = true
  if first[1] then
    h_exists = true
    he = tonumber(first[2])
  else
    he = -1
    used = 0
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
  last_fence, last_fence_s = fence, int(fence)
  redis.call('ZADD', H, int(expiry), t)
  note_lease(expiry)
  redis.call('HSET', D, 'w:' .. t, int(w), 'f:' .. t, last_fence_s)
  used = used + w
  dirty = true
  if not h_exists then
    touched[H] = true
    h_exists = true
  end
  touched[D] = true
  return fence
end

-- Hand freed capacity to the head of the queue, in order, and notify exactly the
-- granted waiters. FIFO with head-of-line blocking: a heavy head is never
-- overtaken, so it is not starved. The waiter is granted with its own lease and
-- told its token and fence ("<token>:<fence>") on its process's channel, so it
-- holds the permit without another call; if the message is lost, its next
-- heartbeat (an idempotent acquire) finds it granted. A head whose heartbeat
-- expired is dropped, not granted. Returns true when the queue is empty
-- afterwards. The stored waiter count never under-counts (every ZADD to the
-- queue adds to it), so 0 means the queue is empty without looking.
local function handoff()
  if nq <= 0 then
    return true
  end
  for _ = 1, BOUND do
    local head = redis.call('ZRANGE', Q, '0', '0')[1]
    if not head then
      nq = 0
      dirty = true
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
        redis.call(pub, chan_prefix .. id, head .. ':' .. int(fence))
      end
    end
  end
  nq = redis.call('ZCARD', Q)
  dirty = true
  return nq == 0
end

-- Write back the state and give a TTL of key_ttl to every key this call may
-- have created, or to every key when the last refresh is older than
-- key_ttl / 4 (or unknown: then the state itself may be new). A key deleted by
-- this call (an emptied ZSET or hash) is skipped by PEXPIRE.
local function finish()
  if used < 0 then
    used = 0 -- self-heal
    dirty = true
  end
  local refresh = not ta or now - ta >= key_ttl / 4 or now < ta
  if refresh then
    ta = now
    dirty = true
  end
  if dirty then
    -- Only the fields that changed (a missing one counts as changed).
    local a, n = {S}, 1
    local function put(f, v, v0, s)
      if v ~= v0 then
        a[n + 1], a[n + 2] = f, s or int(v)
        n = n + 2
      end
    end
    put('limit', limit, limit0)
    put('used', used, used0)
    put('fence', last_fence, fence0, last_fence_s)
    put('nq', nq, nq0)
    put('tn', tn, tn0)
    put('ta', ta, ta0)
    put('he', he, he0)
    if n > 1 then
      redis.call('HSET', unpack(a))
    end
  end
  if refresh then
    for _, k in ipairs(KEYS) do
      redis.call('PEXPIRE', k, key_ttl_s)
    end
  else
    for k in pairs(touched) do
      redis.call('PEXPIRE', k, key_ttl_s)
    end
  end
end
