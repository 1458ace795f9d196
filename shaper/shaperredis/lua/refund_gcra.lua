-- refund_gcra.lua: give back the cost n of an admission of gcra.lua, for a
-- caller whose request was refused by a later step (shaper.Meter's refund,
-- see meter.go): the theoretical arrival time moves back by n·T, but never
-- before now (a key whose time has passed is fresh: a refund never gives more).
-- KEYS[1] = the state key (see gcra.lua)
-- ARGV    = limit, n, at (unused by GCRA)  (see common.lua)
-- A refund carries no deadline: it gives back, so it is always due, even
-- late. Returns {1} if something was given back, else {0} (no state, or idle).
local key = KEYS[1]
local tau = B * P
-- arrival
if not v or #v ~= 24 or n == 0 then return {0} end
local _, _, last = struct.unpack('<ddd', v)
if tat < now then return {0} end
local np = n * P
local q = floor(np / C)
tat, rem = tat - q, rem - (np - q * C)
if rem < 0 then tat, rem = tat - 1, rem + C end
if tat < now then tat, rem = now, 0 end
redis.call('SET', key, struct.pack('<ddd', tat, rem, last), 'PX', ttlms(tat - now + 1))
return {1}
