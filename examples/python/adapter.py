"""The harness side of an exec adapter, protocol 1 (docs/exec-protocol.md).

An adapter reads one JSON request per line on stdin and writes one JSON reply per line on
stdout. `serve(decide)` does the plumbing: it says hello, calls
`decide(redis_client, key, limit, window_ms)` -> (allowed, count) for each request and
maps Redis errors to error replies (connection problems as indeterminate: the command may
have run). It exits when stdin closes.
"""

import json
import os
import sys

import redis


def serve(decide, name):
    client = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=2)
    limit = int(os.environ["LIMIT_REQUESTS_MAX"])
    window_ms = int(os.environ["LIMIT_WINDOW_MS"])
    out = sys.stdout
    out.write(json.dumps({"protocol": 1, "name": name, "algorithm": "fixed-window"}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        reply = {"id": request["id"]}
        try:
            allowed, count = decide(client, request["key"], limit, window_ms)
            reply["allowed"] = bool(allowed)
            if count is not None:
                reply["count"] = int(count)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            reply["error"] = f"{type(e).__name__}: {e}"
            reply["indeterminate"] = True
        except redis.exceptions.RedisError as e:
            reply["error"] = f"{type(e).__name__}: {e}"
        out.write(json.dumps(reply) + "\n")
        out.flush()
