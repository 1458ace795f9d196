-- close.lua: the process that found the round due writes the controller's
-- decision, if no other process did first (a compare-and-set on the state
-- version), and opens the next round unless the decision pooled it.
--
-- KEYS: as flush.lua.
-- ARGV[1] = the state version the decision was made on (0: no state yet, this
-- is the first), ARGV[2] = the new state (JSON), ARGV[3] = 1 to open a new
-- round, 0 to keep the round open (pooled), ARGV[4] = how long after now the
-- new round starts, µs (the settle time after a change of the limit), ARGV[5]
-- = key TTL ms.
--
-- Returns {1, now µs, new ver, round, start} if it won, {0, now µs, ver} if
-- the state had moved on (another process decided first: nothing written).
local A, AP, S = KEYS[1], KEYS[2], KEYS[3]
local fmt = string.format
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])

local v = redis.call('HMGET', A, 'ver', 'round', 'start', 'np')
local ver = tonumber(v[1]) or 0
if fmt('%d', ver) ~= ARGV[1] then
  return {0, now, ver}
end
local round, start = tonumber(v[2]) or 0, tonumber(v[3]) or 0
redis.call('HSET', A, 'ver', fmt('%d', ver + 1), 'st', ARGV[2])
if ARGV[3] == '1' or ver == 0 then
  round = round + 1
  start = now + tonumber(ARGV[4])
  -- The semaphore's used, packed or text (see flush.lua).
  local ds = redis.call('HMGET', S, 'p', 'used')
  local used
  if ds[1] and #ds[1] == 64 then
    used = select(2, struct.unpack('<dd', ds[1]))
  else
    used = tonumber(ds[2]) or 0
  end
  redis.call('HSET', A, 'round', fmt('%d', round), 'start', fmt('%d', start), 'n', '0', 'lat', '0', 'sq', '0',
    'dr', '0', 'full', '0', 'mx', fmt('%d', used), 'np', '0', 'lp', v[4] or '0')
  redis.call('DEL', AP)
end
redis.call('PEXPIRE', A, ARGV[5])
return {1, now, ver + 1, round, start}
