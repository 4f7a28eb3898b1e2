-- A fixed window in the harness's own calling convention (no sidecar file needed):
--   KEYS[1] = the identity's key
--   ARGV[1] = requests_max, ARGV[2] = window_ms, ARGV[3] = cost, ARGV[4] = now_ms
-- returns {allowed (1/0), count}.
--
--   limiter-harness run immortal-counter --limiter lua:examples/lua/fixed_window.lua
local count = redis.call('INCRBY', KEYS[1], ARGV[3])
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if count <= tonumber(ARGV[1]) then
  return {1, count}
end
return {0, count}
