-- The seed document's token-bucket script (seed/distributed-rate-limiter.txt),
-- verbatim except for one change so tests can supply the time: if ARGV[4] is
-- given, it is the time in ms instead of Redis TIME.
-- KEYS[1]: Rate limiter key (e.g., "rate:tenant_123:route_search")
-- ARGV[1]: Bucket capacity (maximum burst tokens, e.g., 50)
-- ARGV[2]: Refill rate per millisecond (e.g., 0.01 for 10 tokens/sec)
-- ARGV[3]: Tokens requested (typically 1)

local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local refill_rate_ms = tonumber(ARGV[2])
local requested = tonumber(ARGV[3])

if not capacity or not refill_rate_ms or not requested
   or capacity <= 0 or refill_rate_ms <= 0 or requested <= 0
   or requested > capacity then
  return redis.error_reply("invalid token bucket configuration or request")
end

local now
if ARGV[4] then
  now = tonumber(ARGV[4])
else
  local redis_time = redis.call("TIME")
  now = tonumber(redis_time[1]) * 1000
    + math.floor(tonumber(redis_time[2]) / 1000)
end

-- Retrieve current balance and last refill time from Redis hash
local data = redis.call("HMGET", key, "tokens", "last_updated")
local tokens = tonumber(data[1])
local last_updated = tonumber(data[2])

if tokens == nil then
  -- First request: initialize bucket to full capacity minus requested tokens
  tokens = capacity
  last_updated = now
else
  -- Calculate tokens earned during the elapsed time interval
  -- Do not move stored time backward if the Redis server clock moves backward.
  now = math.max(now, last_updated)
  local elapsed = now - last_updated
  local refilled = elapsed * refill_rate_ms
  tokens = math.min(capacity, tokens + refilled)
  last_updated = now
end

-- Determine admission
local allowed = 0
local remaining = tokens
if tokens >= requested then
  allowed = 1
  tokens = tokens - requested
  remaining = tokens
end

-- Persist updated state atomically
redis.call("HMSET", key, "tokens", tokens, "last_updated", last_updated)

-- Set TTL equal to time needed to refill from 0 to capacity + buffer
local ttl_seconds = math.ceil((capacity / (refill_rate_ms * 1000)) * 2)
redis.call("EXPIRE", key, math.max(60, ttl_seconds))

-- Return [allowed (0 or 1), remaining_tokens, retry_after_ms]
local retry_after_ms = 0
if allowed == 0 then
  retry_after_ms = math.ceil((requested - tokens) / refill_rate_ms)
end

return { allowed, math.floor(remaining), retry_after_ms }
