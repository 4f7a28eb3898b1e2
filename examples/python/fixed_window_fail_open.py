"""The fixed limiter, failing open in silence: any Redis error admits the request and
nobody hears of it. (Failing open can be the right policy; doing it silently is not: the
caller and the dashboards must know the limiter is not limiting.)

`injected-errors` catches it (`errors-surfaced`).

    limiter-harness run injected-errors --limiter "exec:python3 examples/python/fixed_window_fail_open.py"
"""

import redis

from adapter import plant_counter, serve


def decide(r, request, limit, window_ms):
    key = request.key
    try:
        pipe = r.pipeline(transaction=True)
        pipe.incr(key)
        pipe.pexpire(key, window_ms, nx=True)
        count, _ = pipe.execute()
        return count <= limit, count
    except redis.exceptions.RedisError:
        return True, None  # fail open, and tell no one


if __name__ == "__main__":
    serve(decide, "fixed-window-fail-open (errors admit, silently)", plant=plant_counter)
