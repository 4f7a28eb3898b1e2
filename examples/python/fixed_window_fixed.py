"""The fix for incident 1: one atomic round trip, MULTI / INCR / PEXPIRE NX / EXEC.

The increment and the expiry travel together, and PEXPIRE NX (Redis 7.0+) sets the expiry
only when the key has none, so a key can never be left without a TTL and the window is
not extended by later requests.

    limiter-harness run immortal-counter --limiter "exec:python3 examples/python/fixed_window_fixed.py"
"""

from adapter import plant_counter, serve


def decide(r, request, limit, window_ms):
    key = request.key
    pipe = r.pipeline(transaction=True)
    pipe.incr(key)
    pipe.pexpire(key, window_ms, nx=True)
    count, _ = pipe.execute()
    return count <= limit, count


if __name__ == "__main__":
    serve(decide, "fixed-window-fixed (MULTI INCR PEXPIRE NX EXEC)", plant=plant_counter)
