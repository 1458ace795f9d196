-- head.lua: start of acquire.lua, renew.lua and release.lua. Each script is
-- head.lua, the script's fast path (its text before the line "-- @common"),
-- common.lua (the shared functions), then the rest of the script (see
-- scripts.go); no file is ever run alone. The fast paths handle the common
-- calls (the uncontended ones, a queued wait and the release that hands the
-- permit to the head waiter) before the shared functions are even created.
--
-- KEYS (all under one hash tag, built by the client, never in Lua):
--   KEYS[1] = {name}:s   HASH  the state: limit, used (weight held), fence (last
--                              fencing number), and bookkeeping that lets the
--                              common path skip calls: nq (waiters in the
--                              queue; may only over-count), tn (-1 when there
--                              is no tombstone, else a lower bound of the
--                              earliest tombstone expiry, ms), ta (when every
--                              key's TTL was last refreshed, ms), he (-1 when
--                              there is no holder, else a lower bound of the
--                              earliest lease expiry, ms), seq (last queue
--                              number). Stored packed in field p
--                              (struct '<dddddddd', in that order, seq 0 when
--                              there is none: queue numbers start at 1), or,
--                              as versions before the packed state wrote it,
--                              one text field each, of those names. Either
--                              is read; the state is written in the format
--                              PACKED says, and a state found in the other
--                              format is converted by the general path
--                              (finish), which deletes the other format's
--                              fields.
--   KEYS[2] = {name}:h   ZSET  holder token -> lease expiry (ms, Redis TIME)
--   KEYS[3] = {name}:q   ZSET  waiter token -> queue number (FIFO order)
--   KEYS[4] = {name}:qe  ZSET  waiter token -> heartbeat expiry (ms), and
--                              _ -> 0 (kept, as D's _: every ZADD sets it
--                              too, and a ZADD that adds both created QE
--                              or found it without _; QE is only ever read
--                              by member, in every version)
--   KEYS[5] = {name}:d   HASH  w:<tok> weight, f:<tok> fence (holders),
--                              c:<tok> notify id, l:<tok> lease ms (waiters),
--                              and _ = '' (kept: every HSET that may create D
--                              sets it too, so D is never emptied and an HSET
--                              whose reply counts every field it set as new
--                              created D, or found it without _: either way
--                              only then is D given a TTL; versions before
--                              it ignore the field)
--   KEYS[6] = {name}:t   ZSET  tombstone token -> expiry (ms)
-- ARGV:
--   ARGV[1] = token ("" for none).
--   ARGV[2] = the call's numbers and strings (nums in call.go): eight
--   little-endian doubles (struct '<dddddddd', 64 bytes): the configured
--   limit (used only when the semaphore has no stored limit yet), the key TTL
--   ms, 1 to SPUBLISH (else PUBLISH), then n4 .. n8, the script's own, which
--   it names; then, from byte 65, the calling process's notify id (16 bytes)
--   and the notify channel prefix ({name}:n:; the channel of a waiter is
--   prefix .. its notify id). Every number is an integer below 2^53, so
--   exact. renew.lua takes two strings more, from ARGV[3].
--   Why one argument: Redis makes KEYS and ARGV Lua tables anew on every
--   call, one element at a time, and a table grows at its 2nd, 3rd and 5th
--   (measured: 1.2k to 1.4k instructions a step), beside reading each
--   argument. Cutting a string out of ARGV[2] (string.sub) where it is used
--   costs a few hundred; the key TTL's string is made with fmt where a call
--   first needs it (key_ttl_s), which measured cheaper than sending it and
--   cutting it out on every call. The argument layout is private to a
--   version: each process calls its own scripts (by their digest).
--
-- Time comes only from TIME. Numbers are passed to redis.call as strings made
-- by fmt('%d', x) (all digits), never through tostring or '..': Lua's own
-- formatting (%.14g) would write 1.795978983896e+15. (A Lua number argument
-- would also keep its digits, but Redis 7.0 formats it with snprintf %.17g,
-- which costs more.) Arguments that arrive as strings (ARGV, replies) are
-- passed on unconverted. Fences (µs, ~1.8e15) stay below 2^53, so they are
-- exact in a Lua double. The scripts have no error paths after their first
-- write: every input is validated by the Go caller. So a numeric string
-- argument, and TIME's reply, is converted by arithmetic (tm[1] + 0),
-- which parses the string once, where Lua 5.1's tonumber parses it twice; a
-- stored value, which may be missing or corrupt, goes through tonumber.
--
-- Cost: every redis.call and every number converted costs Redis CPU, so the common
-- (uncontended) path makes as few as it can: the bookkeeping fields of KEYS[1],
-- read by the one HGET, say when the queue is empty (no hand-off scan), when
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
local S, H, Q, QE, D, T = unpack(KEYS)
local tok = ARGV[1]
local limit_cfg, key_ttl, spub, n4, n5, n6, n7, n8 = struct.unpack('<dddddddd', ARGV[2])
-- Where ARGV[2]'s strings are, for string.sub: the notify id is
-- ARGV[2]:sub(ID_AT, ID_END), the channel prefix ARGV[2]:sub(PREFIX_AT).
local ID_AT, ID_END, PREFIX_AT = 65, 80, 81
-- key_ttl_s: key_ttl as the string PEXPIRE takes, made where a call first
-- needs it (fmt: see ARGV above).
local key_ttl_s

local fmt = string.format
-- call is redis.call, looked up once: the fast paths, which are the top-level
-- code before common.lua, call through it and save two table lookups a call
-- (2.6k instructions of an uncontended acquire+release pair, measured). The
-- functions of common.lua keep redis.call: a local from outside costs a
-- function more on every call (see the cost note there). So does the rest of
-- the code after common.lua, for one spelling per part: call marks the
-- fast paths.
local call = redis.call
local spack = struct.pack
-- Replies: the lists each script's header gives, sent packed as little-endian
-- 64-bit integers (struct '<i8...', read by redisscript.NewPacked), by their
-- length: Redis sends a string for less than an array.
local R3, R5, R7 = '<i8i8i8', '<i8i8i8i8i8', '<i8i8i8i8i8i8i8'

local BOUND, BOUND_S = 64, '64' -- at most this many expired entries of each kind reaped per call

-- The state's format: PACKED (one field, p) or text (a field each). A
-- rolling deploy from a version that reads only text goes through the version
-- that reads both and writes text (PACKED = false); see the README's
-- Upgrading. Every write of S goes through common.lua's save, but the fast
-- paths', which write the packed state themselves (struct.pack(SFMT, ...),
-- seq 0 for none): they run only when PACKED (see whole), so that no
-- function is made before they run.
local PACKED = true
local SFMT = '<dddddddd'
-- The values read (nil when missing), to write back only when they changed;
-- other: the state was found in the format this version does not write (it
-- is not whole, so only the general path runs, and finish converts it).
local limit0, used0, fence0, nq0, tn0, ta0, he0, seq0
local other, whole = false, false
local p = call('HGET', S, 'p')
if p and #p == 64 then
  limit0, used0, fence0, nq0, tn0, ta0, he0, seq0 = struct.unpack(SFMT, p)
  if seq0 == 0 then
    seq0 = nil
  end
  other = not PACKED
  -- Every value is a number (NaN fails both comparisons).
  whole = PACKED and limit0 >= 1 and used0 >= 0
else
  local st = redis.call('HMGET', S, 'limit', 'used', 'fence', 'nq', 'tn', 'ta', 'he', 'seq')
  limit0, used0, fence0, nq0, tn0, ta0, he0, seq0 =
    tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4]), tonumber(st[5]), tonumber(st[6]),
    tonumber(st[7]), tonumber(st[8])
  if PACKED then
    other = (p or st[1] or st[2] or st[3] or st[4] or st[5] or st[6] or st[7] or st[8]) and true or false
  else
    other = p and true or false -- a p not 64 bytes long: deleted by finish
  end
end

-- whole (set above): the state is complete and sane, and packed in a
-- version that writes it PACKED (so a version that writes text has no fast
-- paths: a text state is never whole). settled: also no waiter is queued (no
-- hand-off). fast (while fast_from <= now < fast_until): also no key
-- needs a TTL refresh (see finish) and no lease can have expired (see reap).
-- A fast path runs only then (acquire.lua's queued one and release.lua's
-- hand-off run with waiters queued: see there), and makes exactly the calls
-- and writes that the general path would make, and nothing else
-- (release.lua's first one also skips what only time can tell: see there). A
-- fast path that finds it does not apply after a call that changed nothing
-- falls through to the general path.
local settled = whole and nq0 == 0
-- fast is the interval of the time in which it holds, so that it is known
-- before the time is, without a function. It is settled and ta0 <= now <
-- ta0 + key_ttl / 4 and (now < he0, or he0 = -1 and used0 = 0); empty when
-- not settled.
local fast_from, fast_until = 1, 0
if settled and (he0 ~= -1 or used0 == 0) then
  fast_from, fast_until = ta0, ta0 + key_ttl / 4
  -- not (he0 >= ...), not he0 < ...: a NaN he0 (a corrupt state) closes
  -- the interval, as the comparison he0 > now did.
  if he0 ~= -1 and not (he0 >= fast_until) then
    fast_until = he0
  end
end

-- now (ms) and now_us (µs): Redis time. Every script reads it before its
-- first write but release.lua's first fast path, which needs no time (see
-- there); common.lua reads it if no fast path did. The three lines that read
-- it are written out where they run, as a function would be made anew on
-- every call.
local now, now_us
