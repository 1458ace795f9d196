-- renew.lua: extend the lease of a held token.
-- KEYS, ARGV[1..2]: see head.lua; its numbers n4 and n5 are lease ms and the
-- mode: 1 to re-adopt a missing token when capacity is free and no waiter is
-- left queued after the queue was served, 2 to carry it (insert a missing token
-- whatever the capacity and the queue: its weight is already in use, granted
-- by FailLocal while Redis could not answer, so Redis must count it before it
-- grants anything more), else 0.
-- ARGV[3] = weight, ARGV[4] = fence of the permit.
-- Returns {status, limit, used}: 1 renewed, 2 re-adopted (the token was missing and
-- was inserted again with its old fence), 0 lost (missing, or tombstoned).
-- Fast path: the renewal of a held token with the queue empty, as below.
local lease, mode = n4, n5
local tm = call('TIME')
local tm_s, tm_us = tm[1] + 0, tm[2] + 0
now, now_us = tm_s * 1000 + math.floor(tm_us / 1000), tm_s * 1000000 + tm_us
if now >= fast_from and now < fast_until then
  local expiry = now + lease
  if call('ZADD', H, 'XX', 'CH', fmt('%d', expiry), tok) == 1 then
    if he0 == -1 or expiry < he0 then
      call('HSET', S, 'p', spack(SFMT, limit0, used0, fence0, nq0, tn0, ta0, expiry, seq0 or 0))
    end
    return spack(R3, 1, limit0, used0)
  end
end

-- @common
local w = ARGV[3] + 0
local fence = ARGV[4]
local readopt = mode == 1
local carry = mode == 2

-- adopt inserts the missing tok as a holder of w, with its old fence.
local function adopt()
  redis.call('ZADD', H, fmt('%d', now + lease), tok)
  note_lease(now + lease)
  if redis.call('HSET', D, 'w:' .. tok, ARGV[3], 'f:' .. tok, fence, '_', '') == 3 then
    touched[D] = true -- see head.lua
  end
  used = used + w
  dirty = true
  if h_n == 0 then
    touched[H] = true
  end
end

reap(nq > 0)
-- XX CH: 1 when tok is held (and its lease moved); 0 also when the lease did
-- not move (same ms), which ZSCORE tells apart.
local r = redis.call('ZADD', H, 'XX', 'CH', fmt('%d', now + lease), tok)
if r == 1 or redis.call('ZSCORE', H, tok) then
  note_lease(now + lease)
  handoff()
  finish()
  return spack(R3, 1, limit, used)
end
reap(true)
if carry and (tn == -1 or not redis.call('ZSCORE', T, tok)) then
  -- Counted before the queue is served, so that no waiter is handed the
  -- weight this holder already uses. used may exceed limit: nothing more is
  -- granted until it is back below.
  adopt()
  handoff()
  finish()
  return spack(R3, 2, limit, used)
end
local served = handoff() -- true when no waiter is left queued
if redis.call('ZSCORE', H, tok) then
  -- The hand-off just granted tok's own queue entry (possible only if tok was
  -- queued as well as held by a client): it is held now, so do not add its
  -- weight a second time by re-adopting it.
  finish()
  return spack(R3, 1, limit, used)
end
-- Re-adopt only when no waiter is left queued: a waiter blocked at the head
-- must not be overtaken (FIFO, no starvation of heavy waiters).
if readopt and served and (tn == -1 or not redis.call('ZSCORE', T, tok)) and used + w <= limit then
  adopt()
  finish()
  return spack(R3, 2, limit, used)
end
finish()
return spack(R3, 0, limit, used)
