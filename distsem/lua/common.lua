-- common.lua: the functions shared by acquire.lua, renew.lua and release.lua,
-- inserted into each after its fast path (see head.lua).
if not now then
  local tm = redis.call('TIME')
  local tm_s, tm_us = tm[1] + 0, tm[2] + 0
  now, now_us = tm_s * 1000 + math.floor(tm_us / 1000), tm_s * 1000000 + tm_us
end
-- save writes the state, whole, in the format PACKED says (seq may be nil:
-- none). Every write of S but a fast path's goes through here (see head.lua);
-- finish deletes the other format's fields when the state was found in it
-- (other: never on a fast path, which needs it whole). Of the locals from
-- head.lua it uses only PACKED (KEYS[1] is S, SFMT is written out,
-- struct.pack and string.format come from the globals): Lua makes every
-- function anew on every call, and each local from outside that it uses
-- costs that call about 400 instructions more (an upvalue found, closed and
-- freed).
local function save(limit, used, fence, nq, tn, ta, he, seq)
  if PACKED then
    redis.call('HSET', KEYS[1], 'p', struct.pack('<dddddddd', limit, used, fence, nq, tn, ta, he, seq or 0))
  else
    local f = string.format
    local a = {KEYS[1], 'limit', f('%d', limit), 'used', f('%d', used), 'fence', f('%d', fence), 'nq', f('%d', nq), 'tn',
      f('%d', tn), 'ta', f('%d', ta), 'he', f('%d', he)}
    if seq then
      a[16], a[17] = 'seq', f('%d', seq)
    end
    redis.call('HSET', unpack(a))
  end
end

-- Keys this call may have created; finish() gives each a TTL.
local touched = {}
-- Fields of D to delete, by finish (one HDEL): those of a released holder and
-- of waiters granted by hand-off (appended in pairs). handoff deletes them at
-- once before a read that must not see them.
--
-- Cost: every function defined here is a closure created anew on every call
-- that gets this far (about 400 instructions each, and about as much again
-- per local from outside that it uses: see save), so only what
-- several paths share is a function; the rest is written out where it is
-- used.
local d_dead, nd_dead = {}, 0
-- d_tok: a token whose fields are in d_dead (see handoff).
local d_tok

-- State: the stored limit wins; the configured one initialises a new semaphore.
-- used (the weight held) is recomputed from the holders when the state was lost,
-- and so are the waiter count and the tombstone bound.
local dirty = false
local limit = limit0 or 0
if limit < 1 then
  limit = limit_cfg
  dirty = true
end
local last_fence = fence0 or 0
local last_fence_s -- last_fence formatted, once a grant made it
local used
if used0 then
  used = used0
else
  used = 0
  for _, h in ipairs(redis.call('ZRANGE', H, '0', '-1')) do
    used = used + tonumber(redis.call('HGET', D, 'w:' .. h) or '0')
  end
  dirty = true
end
local nq = nq0
if not nq then
  nq = redis.call('ZCARD', Q)
  dirty = true
end
-- seq: the last queue number, written back by finish; when it is missing, the
-- highest in the queue, so that a new waiter still queues behind every one
-- left after the state was lost.
local seq = seq0
if not seq and nq > 0 then
  seq = tonumber(redis.call('ZRANGE', Q, '-1', '-1', 'WITHSCORES')[2] or '0')
end
-- The tombstone bound, when missing, is the earliest tombstone expiry (-1: none).
local tn = tn0
if not tn then
  tn = tonumber(redis.call('ZRANGE', T, '0', '0', 'WITHSCORES')[2] or '-1')
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

-- h_n: a lower bound of the number of members of H, from the last read of
-- it, plus the members added since, minus those removed. While it is above 0,
-- H exists, so a write to it keeps its TTL.
local h_n = 0

-- Reap expired holders (bounded). Unless forced, nothing is read when he says
-- that no lease can have expired: callers force it whenever the self-heal
-- below could change their outcome (a capacity decision or a hand-off), so
-- skipping it changes nothing. A forced reap while he says that no lease can
-- have expired only counts the holders (ZCARD: an integer reply, where the
-- earliest lease would be two scores formatted by Redis and parsed again by
-- Lua), for the self-heal; he stays a lower bound. Otherwise the earliest
-- lease is read, expired holders are dropped and he is set to the earliest
-- lease left (he_exact); without holders nothing is in use (self-heal).
-- he = -1 with weight in use (state written by something else) is looked at,
-- never trusted. Dead waiters are dropped when they reach the head of the
-- queue (handoff), tombstones by release.lua.
local reaped, he_exact = false, false
local function reap(force)
  if reaped or (not force and (he > now or (he == -1 and used == 0))) then
    return
  end
  reaped = true
  if he > now then
    h_n = redis.call('ZCARD', H)
    if h_n == 0 then
      he, used, dirty = -1, 0, true
    end
    return
  end
  local first = redis.call('ZRANGE', H, '0', '1', 'WITHSCORES')
  if first[2] and tonumber(first[2]) <= now then
    for _, h in ipairs(redis.call('ZRANGEBYSCORE', H, '-inf', fmt('%d', now), 'LIMIT', '0', BOUND_S)) do
      used = used - tonumber(redis.call('HGET', D, 'w:' .. h) or '0')
      redis.call('ZREM', H, h)
      redis.call('HDEL', D, 'w:' .. h, 'f:' .. h)
    end
    first = redis.call('ZRANGE', H, '0', '1', 'WITHSCORES')
  end
  dirty, he_exact = true, true
  h_n = #first / 2
  if first[1] then
    he = tonumber(first[2])
  else
    he = -1
    used = 0
  end
end

-- Make the waiter t, of weight w, a holder until expiry; returns its fencing
-- number, max(last + 1, now in µs): monotonic, and seeded from time so that
-- it keeps growing after the state is lost. D holds w:<t> = w already (the
-- waiter's, just read), so D exists and only the fence is written.
local function grant(t, w, expiry)
  local fence = last_fence + 1
  if fence < now_us then
    fence = now_us
  end
  last_fence, last_fence_s = fence, fmt('%d', fence)
  redis.call('ZADD', H, fmt('%d', expiry), t)
  note_lease(expiry)
  redis.call('HSET', D, 'f:' .. t, last_fence_s)
  used = used + w
  dirty = true
  if h_n == 0 then
    touched[H] = true
  end
  h_n = h_n + 1
  return fence
end

-- Hand freed capacity to the head of the queue, in order, and notify exactly the
-- granted waiters. FIFO with head-of-line blocking: a heavy head is never
-- overtaken, so it is not starved. The waiter is granted until its heartbeat
-- expiry (at most its own lease) and told its token and fence
-- ("<token>:<fence>") on its process's channel, so it holds the permit without
-- another call; if the message is lost, its next heartbeat (an idempotent
-- acquire) finds it granted and extends it to its lease. A head whose
-- heartbeat expired is dropped, not granted. Returns true when the queue is empty
-- afterwards. The stored waiter count never under-counts (every ZADD to the
-- queue adds to it), so 0 means the queue is empty without looking.
local function handoff()
  if nq <= 0 then
    return true
  end
  for _ = 1, BOUND do
    if used >= limit then
      -- No waiter fits (every weight is at least 1): nothing to look at.
      -- Dead waiters ahead are dropped once capacity is free.
      return false
    end
    local head = redis.call('ZRANGE', Q, '0', '0')[1]
    if not head then
      nq = 0
      dirty = true
      return true
    end
    if head == d_tok and nd_dead > 0 then
      -- Its fields are deleted: it is corrupt (held and queued).
      redis.call('HDEL', D, unpack(d_dead, 1, nd_dead))
      d_dead, nd_dead = {}, 0
    end
    local m = redis.call('HMGET', D, 'w:' .. head, 'c:' .. head, 'l:' .. head)
    local w = tonumber(m[1] or '0')
    local beat = tonumber(redis.call('ZSCORE', QE, head) or '0')
    if w < 1 or beat <= now then
      drop_waiter(head) -- dead or corrupt: never block the queue on it
    else
      if used + w > limit then
        return false
      end
      local id = m[2]
      local lease = tonumber(m[3] or '1000')
      nq = nq - redis.call('ZREM', Q, head)
      if nq < 0 then
        nq = 0
      end
      redis.call('ZREM', QE, head)
      -- Granted until the waiter's heartbeat would have expired (its claim
      -- window), not for a whole lease: if its process died, the grant comes
      -- back as soon as its queue entry would have. Claiming it (a renewal,
      -- or an acquire call that finds it held) extends it to the lease. Its
      -- weight stays in D (w:<head>, just read: D exists), its waiter fields
      -- go with finish's HDEL.
      local fence = grant(head, w, math.min(now + lease, beat))
      d_dead[nd_dead + 1], d_dead[nd_dead + 2] = 'c:' .. head, 'l:' .. head
      nd_dead = nd_dead + 2
      if id then
        redis.call(spub == 1 and 'spublish' or 'publish', ARGV[2]:sub(PREFIX_AT) .. id, head .. ':' .. fmt('%d', fence))
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
  if nd_dead > 0 then
    redis.call('HDEL', D, unpack(d_dead, 1, nd_dead))
  end
  if used < 0 then
    used = 0 -- self-heal
    dirty = true
  end
  local refresh = not ta or now - ta >= key_ttl / 4 or now < ta
  if refresh then
    ta = now
    dirty = true
  end
  -- Only when something changed (a missing value counts as changed), or
  -- to convert a state found in the other format.
  if other or dirty and (limit ~= limit0 or used ~= used0 or last_fence ~= fence0 or nq ~= nq0 or tn ~= tn0
    or ta ~= ta0 or he ~= he0 or seq ~= seq0) then
    save(limit, used, last_fence, nq, tn, ta, he, seq)
    if other then -- delete the other format's fields (see head.lua; KEYS[1] is S, see save)
      if PACKED then
        redis.call('HDEL', KEYS[1], 'limit', 'used', 'fence', 'nq', 'tn', 'ta', 'he', 'seq')
      else
        redis.call('HDEL', KEYS[1], 'p')
      end
    end
  end
  key_ttl_s = key_ttl_s or fmt('%d', key_ttl)
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
