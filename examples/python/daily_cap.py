"""Incident 2's daily cap, exactly as written — a key per day, INCR, then EXPIRE 26 h when the
count is 1 — with the scenario's window as the "day":

    async function checkDailyCap(orgId) {
      const key = `geocode:calls:${orgId}:${todayKey()}`;
      const count = await redis.incr(key);
      if (count === 1) {
        await redis.expire(key, 60 * 60 * 26); // 26h, covers UTC-boundary drift
      }
      return count <= DAILY_CAP;
    }

Here `todayKey()` is the number of the window (the app's clock — the request's `now_ms`, so a
scenario's clock-skew reaches it — / window_ms) and 26 h is 26/24
of a window. The hello describes the keys (`geocode:calls:{identity}:*`, a new key per
window) and their TTL (26/24 windows). The code is correct: it passes `dedicated-noeviction`
and fails `shared-cache-eviction`, where allkeys-lru evicts the counter and every eviction
hands the import a new cap (340,614 calls against a cap of 5,000).

    limiter-harness run shared-cache-eviction --limiter "exec:python3 examples/python/daily_cap.py"
"""

import time

from adapter import serve

TTL_WINDOWS = 26 / 24


def today_key(window_ms, now_ms=None):
    # The harness's clock for this instance (protocol 2); the process's own before traffic.
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    return now_ms // window_ms


def decide(r, request, limit, window_ms):
    key = f"geocode:calls:{request.identity}:{today_key(window_ms, request.now_ms)}"
    count = r.incr(key)
    if count == 1:
        r.pexpire(key, int(window_ms * TTL_WINDOWS))
    return count <= limit, count


def plant(r, request, limit, window_ms):
    key = f"geocode:calls:{request.identity}:{today_key(window_ms)}"
    r.set(key, 2 * limit)
    return f"SET {key} {2 * limit} (no TTL)"


if __name__ == "__main__":
    serve(
        decide,
        "incident 2's daily cap (geocode:calls:<org>:<day>, INCR then EXPIRE 26h)",
        keys=["geocode:calls:{identity}:*"],
        ttl_max_windows=TTL_WINDOWS,
        plant=plant,
    )
