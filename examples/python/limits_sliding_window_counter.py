"""Python `limits` 5.8, sliding window counter, through its public API and unchanged:
`SlidingWindowCounterRateLimiter(RedisStorage(url)).hit(item, "api", identity)`.

Two keys per identity: the current window's counter `LIMITS:{LIMITER/api/<identity>/<amount>/<seconds>/second}`
and the previous one's, the same name with `/-1` (a hash tag keeps both on one cluster node).
A request weighs the previous count by how much of its window is left, adds the current
count, and admits when that stays within the limit. Its script rotates the windows itself:
when the current counter has less than a window to live it is RENAMEd onto the previous one
and a new current counter is SET to 0 for the rest plus a window (every counter lives two
windows).

    pip install "limits[redis]==5.8.0"
    limiter-harness run steady-control --window-ms 1000 --limiter "exec:python3 examples/python/limits_sliding_window_counter.py"
"""

import os

from limits import RateLimitItemPerSecond
from limits.storage import RedisStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from adapter import limit_and_window, serve, window_seconds

LIMIT, _ = limit_and_window()
ITEM = RateLimitItemPerSecond(LIMIT, window_seconds())
STORAGE = RedisStorage(os.environ["REDIS_URL"], socket_timeout=2)
LIMITER = SlidingWindowCounterRateLimiter(STORAGE)


def decide(_client, request, limit, window_ms):
    return LIMITER.hit(ITEM, "api", str(request.identity)), None


if __name__ == "__main__":
    # The library wraps the key in a hash tag, then prefixes it; the tag's braces are
    # literal in a key template: doubled.
    current = STORAGE.prefixed_key("{{" + ITEM.key_for("api", "{identity}") + "}}")
    serve(
        decide,
        "python limits 5.8 SlidingWindowCounterRateLimiter",
        client=STORAGE.get_connection(),
        algorithm="sliding-window-counter",
        keys=[current, current + "/-1"],
        ttl_max_windows=2,
    )
