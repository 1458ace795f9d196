-- tbrefill.lua: the token bucket's refill (tokenbucket.go's refill), the one
-- copy that scripts.go puts at the line "-- refill" of tokenbucket.lua and
-- refund_tokenbucket.lua: brings tokens (scaled by per), last and per, read
-- from a state that is not fresh, up to now under the current P, C and full
-- (= B·P).
if per ~= P then
  local q = tokens / per -- truncated toward zero, as Go's integer division
  if q >= 0 then q = floor(q) else q = ceil(q) end
  tokens = q * P
  per = P
end
if tokens > full then tokens = full end
local t = now
if t < last then t = last end
local e = t - last
if e >= ceil((full - tokens) / C) then
  tokens = full
else
  tokens = tokens + e * C
end
last = t
