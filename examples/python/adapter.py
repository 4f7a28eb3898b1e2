"""The harness side of an exec adapter, protocol 1 (docs/exec-protocol.md).

An adapter reads one JSON line per request on stdin and writes one JSON reply per line on
stdout. `serve(decide, name)` does the plumbing: it says hello, calls
`decide(client, request, limit, window_ms)` -> (allowed, count) for each request (`request`
has `.id`, `.identity` and `.key`, the key the harness suggests) and maps Redis errors to
error replies (connection problems as indeterminate: the command may have run). Any other
exception from `decide` is one request's indeterminate error, its traceback on stderr: the
adapter stays up, and the report names the request. It exits when stdin closes. On a Redis
Cluster (`REDIS_CLUSTER=1`) the client is redis-py's `RedisCluster` (`connect()`).

A limiter with keys of its own says so: `serve(..., keys=["app:{identity}:*"])`, and how long
they may live, in windows (`ttl_max_windows=2`) or in milliseconds whatever the window
(`ttl_max_ms=26 * 3600 * 1000` for a daily cap's EXPIRE 26 h). `plant=fn(client, request, limit, window_ms)`
-> description answers the harness's `plant` messages (write the identity's exhausted state
without a TTL, in the limiter's own representation).
"""

import json
import os
import sys
import traceback
from collections import namedtuple

import redis
import redis.cluster

# now_ms: the time on this instance's clock (protocol 2); use it instead of time.time(), so
# that a scenario's clock-skew reaches the limiter. instance: which adapter process this is.
Request = namedtuple("Request", "id identity key now_ms instance", defaults=(None, 0))


def limit_and_window():
    return int(os.environ["LIMIT_REQUESTS_MAX"]), int(os.environ["LIMIT_WINDOW_MS"])


def window_seconds():
    """The window in whole seconds, for libraries that count time in seconds; exits with a
    message (on stderr, which the harness quotes) when the scenario's window is not one."""
    window_ms = int(os.environ["LIMIT_WINDOW_MS"])
    if window_ms % 1000:
        sys.stderr.write(
            f"this library counts windows in whole seconds and the scenario's window is {window_ms} ms: "
            "run with --window-ms 1000 (or another multiple of 1000)\n"
        )
        sys.exit(2)
    return window_ms // 1000


def plant_counter(client, request, limit, window_ms):
    """The exhausted state of a limiter that counts at the harness's key: a count over the
    limit, without a TTL (what incident 1 leaves behind)."""
    client.set(request.key, 2 * limit)
    return f"SET {request.key} {2 * limit} (no TTL)"


def connect():
    """The client for `REDIS_URL`: on a Redis Cluster (`REDIS_CLUSTER=1`, the URL a seed node)
    redis-py's `RedisCluster`, which learns the nodes from `CLUSTER SLOTS` and follows `MOVED`
    and `ASK`; otherwise a plain `Redis`."""
    url = os.environ["REDIS_URL"]
    if os.environ.get("REDIS_CLUSTER") == "1":
        return redis.cluster.RedisCluster.from_url(url, socket_timeout=2)
    return redis.Redis.from_url(url, socket_timeout=2)


def serve(decide, name, *, client=None, algorithm="fixed-window", keys=None, ttl_max_windows=None, ttl_max_ms=None, plant=None):
    client = client or connect()
    limit, window_ms = limit_and_window()
    hello = {"protocol": 2, "name": name, "algorithm": algorithm}
    if keys:
        hello["keys"] = keys
    if ttl_max_windows:
        hello["ttl_max_windows"] = ttl_max_windows
    if ttl_max_ms:
        hello["ttl_max_ms"] = ttl_max_ms
    if plant:
        hello["plant"] = True
    out = sys.stdout
    out.write(json.dumps(hello) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        request = Request(message["id"], message["identity"], message["key"], message.get("now_ms"), message.get("instance", 0))
        reply = {"id": request.id}
        try:
            if "plant" in message:
                reply["planted"] = plant(client, request, limit, window_ms)
            else:
                allowed, count = decide(client, request, limit, window_ms)
                reply["allowed"] = bool(allowed)
                if count is not None:
                    reply["count"] = int(count)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            reply["error"] = f"{type(e).__name__}: {e}"
            reply["indeterminate"] = True
        except redis.exceptions.RedisError as e:
            reply["error"] = f"{type(e).__name__}: {e}"
        except Exception as e:  # a bug, or a library's surprise: the command may have run
            traceback.print_exc(file=sys.stderr)
            reply["error"] = f"{type(e).__name__}: {e}"
            reply["indeterminate"] = True
        out.write(json.dumps(reply) + "\n")
        out.flush()
