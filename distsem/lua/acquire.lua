-- acquire.lua: take, claim or wait for weight w of a distributed semaphore.
-- Idempotent per token: a repeated call for a held token returns the same fence
-- and extends the lease; for a queued token it refreshes the waiter heartbeat.
-- KEYS, ARGV: see head.lua; its numbers n4 .. n8 are lease ms, 1 to queue
-- when not granted (0 to only try), waiter heartbeat TTL ms, the call's
-- deadline in Redis time (µs; 0 for none: see storecall.Clock) and the
-- weight (1..).
-- Returns {status, fence, limit, used, position, next[, now_us]}:
--   status  1 granted (fence set), 0 queued (position = waiters ahead, next = ms
--           until the earliest holder lease expires, -1 if none: the head waiter
--           calls again then, so a crashed holder's permit is reaped promptly;
--           behind the head, where it is not used, it may be less),
--           2 no capacity (try only, nothing written but reaping),
--           now_us (queued only) = Redis time of this call in µs: a fence, which
--           is never below the Redis time of its grant, above now_us proves the
--           grant came after this call, so the waiter can tell a fresh hand-off
--           message from a stale one for an earlier grant of its token,
--          -1 token tombstoned (released or cancelled before this call ran),
--          -2 weight exceeds the stored limit (removed from the queue),
--          -3 the call's deadline had passed (now_us at index 7): nothing was
--           done, as its caller was answered with a timeout (the call sat in
--           the socket of a frozen Redis, say).
-- A call past its deadline does nothing, before anything else.
local tm = call('TIME')
local tm_s, tm_us = tm[1] + 0, tm[2] + 0
now, now_us = tm_s * 1000 + math.floor(tm_us / 1000), tm_s * 1000000 + tm_us
local lease, queue, wait_ttl, dl = n4, n5 == 1, n6, n7
if dl > 0 and now_us > dl then
  return spack(R7, -3, 0, 0, 0, 0, 0, now_us)
end
-- Fast path: a new grant with the queue empty (so tok is not queued), the
-- weight fitting (so it is not too heavy) and no tombstone for tok, as below.
-- The weight is checked before the tombstone is looked up: a call that finds
-- no room (the head of a queue to be) reads it once, in the next fast path.
local wq = n8 -- the weight, of both fast paths
-- ws: the weight as HSET stores it (1, the commonest, needs no formatting)
local ws = wq == 1 and '1' or fmt('%d', wq)
if now >= fast_from and now < fast_until and wq <= limit0 and used0 + wq <= limit0 and (tn0 == -1 or not call('ZSCORE', T, tok)) then
  local expiry = now + lease
  if call('ZADD', H, 'NX', fmt('%d', expiry), tok) == 1 then
    local fence = fence0 + 1
    if fence < now_us then
      fence = now_us
    end
    local fence_s, used = fmt('%d', fence), used0 + wq
    local d_new = call('HSET', D, 'w:' .. tok, ws, 'f:' .. tok, fence_s, '_', '') == 3
    local he = he0
    if he == -1 or expiry < he then
      he = expiry
    end
    call('HSET', S, 'p', spack(SFMT, limit0, used, fence, nq0, tn0, ta0, he, seq0 or 0))
    -- H is not proven to exist (no read of it): even with weight in use, it
    -- may have been lost on its own (eviction, a DEL) while S says
    -- otherwise, and ZADD would then create it without a TTL. D is, unless
    -- the HSET found none of its fields, _ included (see head.lua).
    key_ttl_s = fmt('%d', key_ttl)
    call('PEXPIRE', H, key_ttl_s)
    if d_new then
      call('PEXPIRE', D, key_ttl_s)
    end
    return spack(R5, 1, fence, limit0, used, 0)
  end
end
-- Fast path: a call that waits in the queue (queued now, or the heartbeat of
-- a queued token) when no waiter can be granted (the queue is empty and the
-- weight does not fit, or waiters are queued and no weight is free), nothing
-- can have expired or be healed (he, and H is not empty), tok is neither
-- tombstoned nor held and no key needs a TTL refresh, as below (see beat).
-- The common contended acquire, without the shared functions.
if whole and queue and he0 > now and now >= ta0 and now - ta0 < key_ttl / 4 and wq <= limit0
  and (seq0 or nq0 == 0)
  and (nq0 > 0 and used0 >= limit0 or nq0 <= 0 and used0 + wq > limit0)
  and call('ZCARD', H) > 0 and (tn0 == -1 or not call('ZSCORE', T, tok))
  and not call('ZSCORE', H, tok) then
  local next_seq = (seq0 or 0) + 1
  local fresh = call('ZADD', Q, 'NX', fmt('%d', next_seq), tok) == 1
  local d_new = fresh and call('HSET', D, 'w:' .. tok, ws, 'c:' .. tok, ARGV[2]:sub(ID_AT, ID_END), 'l:' .. tok, fmt('%d', lease), '_', '') == 4
  local qe_new = call('ZADD', QE, fmt('%d', now + wait_ttl), tok, '0', '_') == 2 -- see head.lua
  local pos = call('ZRANK', Q, tok)
  local he = he0
  if pos == 0 then
    he = tonumber(call('ZRANGE', H, '0', '0', 'WITHSCORES')[2] or '-1')
  end
  if fresh then
    call('HSET', S, 'p', spack(SFMT, limit0, used0, fence0, nq0 + 1, tn0, ta0, he, next_seq))
  elseif he ~= he0 then
    call('HSET', S, 'p', spack(SFMT, limit0, used0, fence0, nq0, tn0, ta0, he, seq0 or 0))
  end
  if qe_new or d_new or fresh and pos == 0 then -- a PEXPIRE below runs
    key_ttl_s = fmt('%d', key_ttl)
  end
  if qe_new then
    call('PEXPIRE', QE, key_ttl_s)
  end
  if d_new then
    call('PEXPIRE', D, key_ttl_s)
  end
  if fresh and pos == 0 then
    call('PEXPIRE', Q, key_ttl_s)
  end
  return spack(R7, 0, 0, limit0, used0, pos, he == -1 and -1 or math.max(0, he - now), now_us)
end

-- @common
local w = wq
local id = ARGV[2]:sub(ID_AT, ID_END)

reap(nq > 0 or w > limit or used + w > limit)
if tn ~= -1 and redis.call('ZSCORE', T, tok) then
  finish()
  return spack(R5, -1, 0, limit, used, 0)
end
local empty = handoff()

-- The common case first: the queue is empty (so tok is not queued) and the
-- weight fits (so it is not too heavy): ZADD NX grants a new token, and finds
-- a held one (a repeated call) without changing its lease.
if empty and w <= limit and used + w <= limit then
  if redis.call('ZADD', H, 'NX', fmt('%d', now + lease), tok) == 1 then
    note_lease(now + lease)
    local fence = last_fence + 1
    if fence < now_us then
      fence = now_us
    end
    last_fence, last_fence_s = fence, fmt('%d', fence)
    if redis.call('HSET', D, 'w:' .. tok, ws, 'f:' .. tok, last_fence_s, '_', '') == 3 then
      touched[D] = true -- see head.lua
    end
    used = used + w
    dirty = true
    if h_n == 0 then
      touched[H] = true
    end
    finish()
    return spack(R5, 1, fence, limit, used, 0)
  end
end

local held = redis.call('ZSCORE', H, tok)
if held then
  if tonumber(held) < now + lease then
    redis.call('ZADD', H, fmt('%d', now + lease), tok)
    note_lease(now + lease)
  end
  local fence = tonumber(redis.call('HGET', D, 'f:' .. tok) or '0')
  finish()
  return spack(R5, 1, fence, limit, used, 0)
end

if w > limit then
  if nq > 0 and redis.call('ZSCORE', Q, tok) then
    drop_waiter(tok)
    handoff()
  end
  finish()
  return spack(R5, -2, 0, limit, used, 0)
end

-- A queued token's heartbeat (fresh: it was just queued): its queue entry
-- lives on. The reply's next, ms until the earliest lease expires (-1 if
-- none), is used only by the head of the queue: for it he is made exact if
-- the reap left it a bound (every queued reply comes after a reap, which is
-- forced whenever the call can queue; since then holders were only added,
-- note_lease, so an exact he stays exact); behind the head, next is what he
-- says, at most the exact value.
local function beat(fresh)
  if redis.call('ZADD', QE, fmt('%d', now + wait_ttl), tok, '0', '_') == 2 then
    touched[QE] = true -- see head.lua
  end
  local pos = redis.call('ZRANK', Q, tok)
  if fresh and pos == 0 then
    touched[Q] = true -- Q may have been created; else it held others before
  end
  if pos == 0 and not he_exact then
    he = tonumber(redis.call('ZRANGE', H, '0', '0', 'WITHSCORES')[2] or '-1')
    he_exact, dirty = true, true
  end
  finish()
  return spack(R7, 0, 0, limit, used, pos, he == -1 and -1 or math.max(0, he - now), now_us)
end

if not queue then
  if nq > 0 and redis.call('ZSCORE', Q, tok) then
    return beat(false)
  end
  local n = redis.call('ZCARD', Q)
  finish()
  return spack(R5, 2, 0, limit, used, n)
end

-- Queue tok at the back, unless it is queued already (ZADD NX: then this is
-- its heartbeat). seq (the last queue number) is written back by finish.
local next_seq = (seq or 0) + 1
if redis.call('ZADD', Q, 'NX', fmt('%d', next_seq), tok) == 0 then
  return beat(false)
end
seq = next_seq
nq = nq + 1
dirty = true
if redis.call('HSET', D, 'w:' .. tok, ws, 'c:' .. tok, id, 'l:' .. tok, fmt('%d', lease), '_', '') == 4 then
  touched[D] = true
end
return beat(true)
