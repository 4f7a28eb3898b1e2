"""A fixed window for Redis Cluster: one script per request (INCR, then PEXPIRE when the key
has no TTL), its key passed in KEYS so that redis-py's `RedisCluster` sends it to the key's
node, follows MOVED and ASK when the slot moves, and loads the script again where a node
answers NOSCRIPT. On one server it runs as well (a plain client).

    limiter-harness run cluster-resharding --limiter "exec:python3 examples/python/fixed_window_cluster.py"
"""

from adapter import connect, plant_counter, serve

SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
"""

client = connect()
window = client.register_script(SCRIPT)


def decide(r, request, limit, window_ms):
    count = window(keys=[request.key], args=[window_ms])
    return count <= limit, count


if __name__ == "__main__":
    serve(decide, "fixed-window-cluster (a script: INCR, PEXPIRE when no TTL)", client=client, plant=plant_counter)
