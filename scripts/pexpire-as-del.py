#!/usr/bin/env python3
"""How often a server executes `PEXPIRE key 1` as a DEL (docs/performance.md, sixteenth
session): SET and PEXPIRE 1 on N keys of a server with keyspace notifications on, then the
`del` and `expired` notifications counted. Redis before 7.2 reads its clock twice in the
command; when the millisecond passes in between, the key is deleted at once (`del`).

    redis-server --port 7399 --save '' --notify-keyspace-events KEA --daemonize yes
    python3 scripts/pexpire-as-del.py 7399 20000

Needs redis-py (`just test-deps`). Writes keys `pexpire-as-del:*` on the server it is given.
"""

import os
import sys
import threading
import time

import redis


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = redis.Redis(port=port)
    sub = r.pubsub()
    sub.psubscribe("__keyevent@0__:*")
    counts = {}

    def listen():
        for m in sub.listen():
            if m["type"] == "pmessage":
                event = m["channel"].decode().split(":", 1)[1]
                counts[event] = counts.get(event, 0) + 1

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(0.2)
    for i in range(n):
        key = f"pexpire-as-del:{i}"
        r.set(key, 1)
        r.pexpire(key, 1)
    time.sleep(1.5)
    version = r.info("server")["redis_version"]
    print(f"{version}: {n} PEXPIRE 1: del {counts.get('del', 0)}, expired {counts.get('expired', 0)}", flush=True)
    os._exit(0)  # the listening thread blocks on its socket


if __name__ == "__main__":
    main()
