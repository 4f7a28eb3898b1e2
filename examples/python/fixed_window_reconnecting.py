"""The fixed limiter (MULTI / INCR / PEXPIRE NX / EXEC) with what a client needs after a
failover: on READONLY, drop the pool's connections and send the transaction again.

After a failover whose old connections stay with the demoted node (a DNS name or virtual IP
that moved, connections that did not), every write on them answers `READONLY You can't
write against a read only replica`. A client that treats that as an ordinary error reply
fails every request for as long as it keeps its connections (`failover-readonly`:
`recovers-after-fault` invalid, as examples/python/fixed_window_fixed.py). Closing the
connections makes the next one go through the endpoint to the new primary. The retry is
safe: a transaction refused with READONLY ran nothing.

    limiter-harness run failover-readonly --limiter "exec:python3 examples/python/fixed_window_reconnecting.py"
"""

import redis

from adapter import plant_counter, serve


def decide(r, request, limit, window_ms):
    key = request.key
    for attempt in range(2):
        try:
            pipe = r.pipeline(transaction=True)
            pipe.incr(key)
            pipe.pexpire(key, window_ms, nx=True)
            count, _ = pipe.execute()
            return count <= limit, count
        except redis.exceptions.ReadOnlyError:
            r.connection_pool.disconnect()
            if attempt == 1:
                raise


if __name__ == "__main__":
    serve(decide, "fixed-window-reconnecting (MULTI INCR PEXPIRE NX EXEC, reconnects on READONLY)", plant=plant_counter)
