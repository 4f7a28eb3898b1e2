"""Python `limits` 5.8 (the library under flask-limiter and slowapi), fixed window, used
through its public API and unchanged: `FixedWindowRateLimiter(RedisStorage(url)).hit(item,
"api", identity)`.

Its key is its own, `LIMITS:LIMITER/api/<identity>/<amount>/<seconds>/second`, and the hello
says so; its window comes in whole seconds (run the 510 ms scenarios with --window-ms 1000).
It counts with one Lua script (INCRBY; EXPIRE when the count equals the increment): atomic,
but it never gives a key that lost its TTL a new one — `preexisting-immortal-key` locks
identity 0 out for good.

    pip install "limits[redis]==5.8.0"
    limiter-harness run steady-control --window-ms 1000 --limiter "exec:python3 examples/python/limits_fixed_window.py"
"""

import os

from limits import RateLimitItemPerSecond
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter

from adapter import limit_and_window, serve, window_seconds

LIMIT, _ = limit_and_window()
ITEM = RateLimitItemPerSecond(LIMIT, window_seconds())
STORAGE = RedisStorage(os.environ["REDIS_URL"], socket_timeout=2)
LIMITER = FixedWindowRateLimiter(STORAGE)


def decide(_client, request, limit, window_ms):
    return LIMITER.hit(ITEM, "api", str(request.identity)), None


def plant(_client, request, limit, window_ms):
    # Its own representation of a spent window: the counter over the limit, no TTL.
    key = STORAGE.prefixed_key(ITEM.key_for("api", str(request.identity)))
    STORAGE.get_connection().set(key, 2 * limit)
    return f"SET {key} {2 * limit} (no TTL)"


if __name__ == "__main__":
    serve(
        decide,
        "python limits 5.8 FixedWindowRateLimiter",
        client=STORAGE.get_connection(),
        keys=[STORAGE.prefixed_key(ITEM.key_for("api", "{identity}"))],
        plant=plant,
    )
