-- batch.lua: the tail of a meter script's batch form, which decides several keys
-- in one call (RedisConfig.Batch on a client that is not a Cluster or a Ring).
-- The batch form is "local NARGS, TIME0 = 4, nil", then
-- "local function decide(KEYS, ARGV)", the prelude (common.lua) and one
-- algorithm's body, "end", then this file. decide is the single-key script with
-- KEYS and ARGV as its parameters; its TIME is read once per batch (TIME0), so
-- every decision of a batch is made at the same instant.
-- KEYS[i] = the state key of the i-th decision (keys may repeat: the decisions
--           are made in order, each seeing the ones before it)
-- ARGV    = the i-th decision's ARGV of the single-key script (P, C, B, n [, now])
--           for each i in turn, all of the same length
-- Returns the replies of the decisions, flattened: {allowed, remaining,
-- retry_after_us, reset_after_us} for each key in turn. A decision with invalid
-- arguments fails the whole call with its error (the decisions before it stay
-- made); the Go side never sends one, as it validates every call first.
local nk = #KEYS
local per = #ARGV / nk
if nk == 0 or per % 1 ~= 0 then
  return redis.error_reply('ERR shaper: invalid arguments')
end
local out, j = {}, 0
for i = 1, nk do
  local a, base = {}, (i - 1) * per
  for x = 1, per do a[x] = ARGV[base + x] end
  local r = decide({KEYS[i]}, a)
  if r.err then return r end
  out[j + 1], out[j + 2], out[j + 3], out[j + 4] = r[1], r[2], r[3], r[4]
  j = j + 4
end
return out
