-- arrival.lua: the GCRA state read (meter.go's arrival), the one copy that
-- scripts.go puts at the line "-- arrival" of gcra.lua, lease.lua and
-- refund_gcra.lua. The state at key is tat, rem and last packed as three
-- little-endian doubles (24 bytes; every value an integer below 2^53, so
-- exact). It sets tat and rem to the theoretical arrival time tat + rem/C
-- under the current limit (tau = B·P): as stored, but at most last + tau/C,
-- as if the debt had been capped to the current burst when it was written,
-- and v to the stored string. A missing or malformed state (not 24 bytes) is
-- fresh (0 0).
-- It also sets tc = ⌊tau/C⌋ (x - x % 1 is ⌊x⌋, exactly, without a call).
local tc = tau / C
tc = tc - tc % 1
local tat, rem = 0, 0
local v = redis.call('GET', key)
if v and #v == 24 then
  local last
  tat, rem, last = struct.unpack('<ddd', v)
  if rem > C - 1 then rem = C - 1 end
  if tat - last >= tc + 1 or (tat - last) * C + rem > tau then
    tat, rem = last + tc, tau % C
  end
end
