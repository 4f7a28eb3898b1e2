-- The script of rate-limit-redis (the Redis store of express-rate-limit, Node.js),
-- unchanged in substance, in its own calling convention:
--   KEYS[1] = key, ARGV[1] = "1" to reset the expiry on every hit ("0" here), ARGV[2] = window in ms
-- returns {totalHits, timeToExpire}; the library admits while totalHits <= limit.
-- rate_limit_redis.toml beside it tells the harness how to call it and read the reply.
local totalHits = redis.call("INCR", KEYS[1])
local timeToExpire = redis.call("PTTL", KEYS[1])
if timeToExpire <= 0 or ARGV[1] == "1"
then
  redis.call("PEXPIRE", KEYS[1], tonumber(ARGV[2]))
  timeToExpire = tonumber(ARGV[2])
end

return { totalHits, timeToExpire }
