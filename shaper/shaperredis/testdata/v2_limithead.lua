-- limithead.lua: the head of every script's prelude but a meter script's (see
-- common.lua for the arguments): the limit P, C, B and the cost n.
local L = ARGV[1]
if not L or #L ~= 24 then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local P, C, B = struct.unpack('<ddd', L)
local n = tonumber(ARGV[2])
