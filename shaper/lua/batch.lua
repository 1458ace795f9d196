-- batch.lua: the tail of a meter script's batch form, which decides several keys
-- in one call (RedisConfig.Batch on a client that is not a Cluster or a Ring).
-- The batch form is "local NARGS = 3 + #KEYS", the prelude (common.lua), the
-- meter's decide function (see common.lua), then this file: the prelude reads
-- TIME and checks P, C, B and the first cost once, and decide runs once per key.
-- KEYS[i] = the state key of the i-th decision (keys may repeat: the decisions
--           are made in order, each seeing the ones before it)
-- ARGV    = P, C, B, then the cost n of each decision in turn [, now]
-- Returns the replies of the decisions, flattened: allowed, remaining,
-- retry_after_us, reset_after_us for each key in turn, all at one time (now).
-- A cost out of range fails the whole call with an error (the decisions before
-- it stay made); the Go side never sends one, as it validates every call first.
local out = {}
for i = 1, #KEYS do
  local c = tonumber(ARGV[3 + i])
  if not c or c < 0 or c > B or c % 1 ~= 0 then
    return redis.error_reply('ERR shaper: invalid arguments')
  end
  local j = 4 * (i - 1)
  out[j + 1], out[j + 2], out[j + 3], out[j + 4] = decide(KEYS[i], c)
end
return out
