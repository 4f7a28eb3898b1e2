"""Incident 1's limiter, as a team would have written it in Python: GET, then INCR.

If the key expires between the GET and the INCR, INCR recreates it with no TTL: a counter
that only goes up, and the user is locked out for good.

    limiter-harness run immortal-counter --limiter "exec:python3 examples/python/fixed_window_buggy.py"
"""

from adapter import plant_counter, serve


def decide(r, request, limit, window_ms):
    key = request.key
    count = r.get(key)
    if count is None:
        r.set(key, 1, px=window_ms)  # the only place a TTL is set
        return True, 1
    count = int(count)
    if count >= limit:
        return False, count
    return True, r.incr(key)  # recreates the key WITHOUT a TTL if it expired after the GET


if __name__ == "__main__":
    serve(decide, "fixed-window-buggy (GET then INCR)", plant=plant_counter)
