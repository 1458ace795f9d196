-- unreserve.lua: give back a reservation of reserve.lua whose caller gave up
-- before its slot, if no later reservation was made since (the schedule still
-- ends where that reservation left it); otherwise the later ones keep their
-- slots and this one stays used.
-- KEYS[1] = state: the string "tat rem" (see reserve.lua)
-- ARGV    = limit, 0, end_tat, end_rem, prev_tat (-1: idle), prev_rem
-- Returns 1 if the reservation was given back, else 0.
local et, er = tonumber(ARGV[3]), tonumber(ARGV[4])
local pt, pr = tonumber(ARGV[5]), tonumber(ARGV[6])
if not (et and er and pt and pr) then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local tat, rem = pair(v)
if tat ~= et or rem ~= er then return 0 end
if pt < now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%d %d', pt, pr), 'PX', ttlms(pt + 1 - now))
end
return 1
