"""The fixed limiter (MULTI / INCR / PEXPIRE NX / EXEC) wrapped in the retry teams add
"for resilience": on a connection error, send the transaction again.

When the first EXEC ran but its reply was lost, the retry counts the request twice and the
identity is refused before its limit. `lost-reply` catches it (`no-double-count`).

    limiter-harness run lost-reply --limiter "exec:python3 examples/python/fixed_window_retrying.py"
"""

import redis

from adapter import plant_counter, serve


def decide(r, request, limit, window_ms):
    key = request.key
    for attempt in range(3):
        try:
            pipe = r.pipeline(transaction=True)
            pipe.incr(key)
            pipe.pexpire(key, window_ms, nx=True)
            count, _ = pipe.execute()
            return count <= limit, count
        except redis.exceptions.ConnectionError:
            if attempt == 2:
                raise


if __name__ == "__main__":
    serve(decide, "fixed-window-retrying (MULTI INCR PEXPIRE NX EXEC, retried on connection errors)", plant=plant_counter)
