-- flush.lua: one process reports the samples of its holds and learns the
-- fleet's round and state back.
--
-- KEYS[1] = {name}:a   HASH  ver (state version, 0/absent: no state), st (the
--                            limitctl.State, JSON), round (the round number),
--                            start (its start, µs, Redis TIME), n (samples),
--                            lat (their summed latency, ns), sq (summed
--                            squared latency, ns², a float), dr (drops), full
--                            (1: the fleet was at its limit in the round), mx
--                            (the most weight seen in use at the distsem
--                            semaphore during the round), np (processes that
--                            reported in the round), lp (np of the last round
--                            closed)
-- KEYS[2] = {name}:ap  SET   the ids of the processes that reported in the round
-- KEYS[3] = {name}:s   HASH  the distsem semaphore's state (read only: limit, used;
--                            see distsem's head.lua)
-- ARGV[1] = process id, ARGV[2] = the round the samples are for (0: none
-- known), ARGV[3] = samples, ARGV[4] = latency sum ns, ARGV[5] = squared sum
-- ns² (a float, as strconv 'g' writes it), ARGV[6] = drops, ARGV[7] = 1 if the
-- process found the gate full, ARGV[8] = the state version the process knows,
-- ARGV[9] = key TTL ms.
--
-- The samples are added only if ARGV[2] is the current round: samples of a
-- round already closed are discarded. The reporting process is counted in
-- the round (np) whatever its samples.
--
-- Returns {now µs, ver, round, start, n, lat, sq (string), dr, full, mx, np,
-- lp, distsem limit, distsem used, added (1: samples taken), st (the state
-- JSON if ver differs from ARGV[8], else "")}. Integers stay below 2^53.
local A, AP, S = KEYS[1], KEYS[2], KEYS[3]
local fmt = string.format
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])

local v = redis.call('HMGET', A, 'ver', 'round')
local ver = tonumber(v[1]) or 0
-- The semaphore's limit and used: packed (field p, the first two of its
-- doubles) or, as versions of distsem before it wrote them, text fields.
local ds = redis.call('HMGET', S, 'p', 'limit', 'used')
local dlimit, used
if ds[1] and #ds[1] == 64 then
  dlimit, used = struct.unpack('<dd', ds[1])
else
  dlimit, used = tonumber(ds[2]) or 0, tonumber(ds[3]) or 0
end
local added = 0
if ver > 0 then
  if ARGV[2] == v[2] then
    added = 1
    if ARGV[3] ~= '0' then
      redis.call('HINCRBY', A, 'n', ARGV[3])
      redis.call('HINCRBY', A, 'lat', ARGV[4])
      redis.call('HINCRBYFLOAT', A, 'sq', ARGV[5])
    end
    if ARGV[6] ~= '0' then
      redis.call('HINCRBY', A, 'dr', ARGV[6])
    end
  end
  local r = redis.call('HMGET', A, 'full', 'mx')
  if r[1] ~= '1' and ((added == 1 and ARGV[7] == '1') or (dlimit > 0 and used >= dlimit)) then
    redis.call('HSET', A, 'full', '1')
  end
  if used > (tonumber(r[2]) or 0) then
    redis.call('HSET', A, 'mx', fmt('%d', used))
  end
  if redis.call('SADD', AP, ARGV[1]) == 1 then
    redis.call('HINCRBY', A, 'np', 1)
    redis.call('PEXPIRE', AP, ARGV[9])
  end
end

local r = redis.call('HMGET', A, 'round', 'start', 'n', 'lat', 'sq', 'dr', 'full', 'mx', 'np', 'lp')
local st = ''
if ver > 0 and fmt('%d', ver) ~= ARGV[8] then
  st = redis.call('HGET', A, 'st') or ''
end
local function num(x)
  return tonumber(x) or 0
end
return {now, ver, num(r[1]), num(r[2]), num(r[3]), num(r[4]), r[5] or '0', num(r[6]), num(r[7]), num(r[8]),
  num(r[9]), num(r[10]), dlimit, used, added, st}
