"""Python `limits` 5.8, moving window (a sliding log in a Redis list), through its public API
and unchanged: `MovingWindowRateLimiter(RedisStorage(url)).hit(item, "api", identity)`.

Its key is `LIMITS:LIMITER/api/<identity>/<amount>/<seconds>/second`, a list of admission
timestamps trimmed to the limit, with an EXPIRE of the window on every admission. Windows
come in whole seconds (run the 510 ms scenarios with --window-ms 1000).

    pip install "limits[redis]==5.8.0"
    limiter-harness run steady-control --window-ms 1000 --limiter "exec:python3 examples/python/limits_moving_window.py"
"""

import os
import time

from limits import RateLimitItemPerSecond
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

from adapter import limit_and_window, serve, window_seconds

LIMIT, _ = limit_and_window()
ITEM = RateLimitItemPerSecond(LIMIT, window_seconds())
STORAGE = RedisStorage(os.environ["REDIS_URL"], socket_timeout=2)
LIMITER = MovingWindowRateLimiter(STORAGE)


def decide(_client, request, limit, window_ms):
    return LIMITER.hit(ITEM, "api", str(request.identity)), None


def plant(_client, request, limit, window_ms):
    # A full log of admissions from just now, no TTL.
    key = STORAGE.prefixed_key(ITEM.key_for("api", str(request.identity)))
    STORAGE.get_connection().lpush(key, *([time.time()] * limit))
    return f"LPUSH {key} <now> x{limit} (no TTL)"


if __name__ == "__main__":
    serve(
        decide,
        "python limits 5.8 MovingWindowRateLimiter",
        client=STORAGE.get_connection(),
        algorithm="sliding-log",
        keys=[STORAGE.prefixed_key(ITEM.key_for("api", "{identity}"))],
        plant=plant,
    )
