-- release.lua: give back a held token, or withdraw a queued one, and hand the
-- freed capacity to the head of the queue. Writes a tombstone for the token, so
-- that an acquire of it that runs later (a go-redis retry, or a call that timed
-- out at the client but was still queued in Redis) is refused instead of
-- granted: always for the cleanup of a failed or cancelled acquire
-- (always_tomb), and otherwise only when the token was not held (the release
-- of a permit whose grant the client saw; skipping its tombstone saves a write
-- and memory per release at full throughput).
-- Idempotent: a second release changes nothing but the tombstone's expiry.
-- KEYS, ARGV: see head.lua (ARGV[1] may be "" to only set the limit); its
-- numbers n4 .. n7 are the tombstone TTL ms, a new limit to store (0 to keep
-- it), 1 to always write the tombstone (0 to write it unless held), the
-- weight the token was granted with (0 if unknown: the script then reads
-- it); n8 is 0, unused. It is trusted, to save a read: only Permit.Release
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
local tomb_ttl, new_limit, always_tomb, given_w = n4, n5, n6 == 1, n7
if settled and he0 ~= -1 and tn0 == -1 and tok ~= '' and not always_tomb and new_limit <= 0
  and call('ZREM', H, tok) == 1 then
  local wk = 'w:' .. tok
  local w = given_w
  if w < 1 then
    w = tonumber(call('HGET', D, wk) or '0')
  end
  local used = used0 - w
  call('HDEL', D, wk, 'f:' .. tok)
  if used < 0 then
    used = 0 -- self-heal
  end
  if used ~= used0 then
    call('HSET', S, 'p', spack(SFMT, limit0, used, fence0, nq0, tn0, ta0, he0, seq0 or 0))
  end
  return spack(R3, 1, limit0, used)
end
-- Fast path: the release of a held token while waiters are queued, when the
-- weight it frees lets the head waiter be granted and no more is to be done
-- (the limit is then reached, or the queue is then empty: the stored count
-- never under-counts, see head.lua): the common contended release, as below,
-- tombstone (always_tomb) included, the limit kept. It reads the time, and
-- runs only when nothing is due that the general path would do first: no
-- lease can have expired (he), no tombstone is to be swept (tn), no TTL
-- refresh (ta). Everything it looks at is read before its first write, the
-- ZREM of tok, which writes only when tok is held; if a condition fails,
-- nothing was written and the general path runs (with the time read here).
if whole and nq0 > 0 and seq0 and tok ~= '' and new_limit <= 0 then
  local tm = call('TIME')
  local tm_s, tm_us = tm[1] + 0, tm[2] + 0
  now, now_us = tm_s * 1000 + math.floor(tm_us / 1000), tm_s * 1000000 + tm_us
  local head
  if now >= ta0 and now - ta0 < key_ttl / 4 and he0 > now and (tn0 == -1 or tn0 > now) then
    head = call('ZRANGE', Q, '0', '0')[1]
  end
  if head and head ~= tok then
    local wk = 'w:' .. tok
    local w = given_w
    local m
    if w < 1 then
      m = call('HMGET', D, 'w:' .. head, 'c:' .. head, 'l:' .. head, wk)
      w = tonumber(m[4] or '0')
    else
      m = call('HMGET', D, 'w:' .. head, 'c:' .. head, 'l:' .. head)
    end
    local hw = tonumber(m[1] or '0')
    local beat = hw >= 1 and tonumber(call('ZSCORE', QE, head) or '0') or 0
    local left = used0 - w -- in use once tok is released
    local after = left + hw -- and the head granted
    local n_h -- holders before the release (tok among them)
    if beat > now and after <= limit0 and (after >= limit0 or nq0 == 1) then
      n_h = call('ZCARD', H)
    end
    if n_h and n_h > 0 and call('ZREM', H, tok) == 1 then
      local tn = tn0
      if always_tomb then
        local expiry = now + tomb_ttl
        call('ZADD', T, fmt('%d', expiry), tok)
        if tn == -1 or expiry < tn then
          tn = expiry
        end
      end
      call('ZREM', Q, head)
      call('ZREM', QE, head)
      -- Granted until its heartbeat expiry, at most its lease (see handoff).
      local expiry = math.min(now + tonumber(m[3] or '1000'), beat)
      local fence = fence0 + 1
      if fence < now_us then
        fence = now_us
      end
      local fence_s = fmt('%d', fence)
      call('ZADD', H, fmt('%d', expiry), head)
      call('HSET', D, 'f:' .. head, fence_s)
      if m[2] then
        call(spub == 1 and 'spublish' or 'publish', ARGV[2]:sub(PREFIX_AT) .. m[2], head .. ':' .. fence_s)
      end
      call('HDEL', D, wk, 'f:' .. tok, 'c:' .. head, 'l:' .. head)
      if after < 0 then
        after = 0 -- self-heal
      end
      call('HSET', S, 'p', spack(SFMT, limit0, after, fence, nq0 - 1, tn, ta0, math.min(he0, expiry), seq0 or 0))
      key_ttl_s = fmt('%d', key_ttl)
      if always_tomb then
        call('PEXPIRE', T, key_ttl_s)
      end
      if n_h == 1 then
        -- tok was the only holder: its ZREM deleted H, which the ZADD
        -- created again.
        call('PEXPIRE', H, key_ttl_s)
      end
      return spack(R3, 1, limit0, after)
    end
  end
end

-- @common

reap(nq > 0)
if tn ~= -1 and tn <= now then
  local old = redis.call('ZRANGEBYSCORE', T, '-inf', fmt('%d', now), 'LIMIT', '0', BOUND_S)
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
    local w = given_w
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
    redis.call('ZADD', T, fmt('%d', expiry), tok)
    touched[T] = true
    if tn == -1 or expiry < tn then
      tn = expiry
      dirty = true
    end
  end
end
handoff()
finish()
return spack(R3, was, limit, used)
