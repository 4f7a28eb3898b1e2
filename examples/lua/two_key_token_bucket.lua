-- A token bucket that keeps its state in two keys per identity, the layout Spring Cloud
-- Gateway's RedisRateLimiter made common: `request_rate_limiter.{id}.tokens` and
-- `request_rate_limiter.{id}.timestamp` (the braces are a Redis Cluster hash tag), both
-- written with SETEX for two refill periods — keeping the state that long is the design,
-- not a bug, and the sidecar declares it (ttl_max_windows = 2).
--   KEYS[1] = tokens key, KEYS[2] = timestamp key
--   ARGV[1] = refill rate (tokens per second), ARGV[2] = capacity, ARGV[3] = now (ms)
-- returns {allowed (1/0), tokens left}.
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local ttl = math.floor(2 * capacity / rate)

local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity
local last = tonumber(redis.call('GET', KEYS[2])) or 0
local filled = math.min(capacity, tokens + math.max(0, now - last) / 1000 * rate)
local allowed = 0
if filled >= 1 then
  filled = filled - 1
  allowed = 1
end
if ttl > 0 then
  redis.call('SETEX', KEYS[1], ttl, filled)
  redis.call('SETEX', KEYS[2], ttl, now)
end
return {allowed, math.floor(filled)}
