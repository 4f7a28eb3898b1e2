#!/usr/bin/env python3
"""`just test`: build every test once (the release profile, beside `just build`), then run
the test binaries in lanes at the same time, each in a process of its own, as cargo would
run them (the package's directory as the working directory).

Why lanes: most of the suite's time is spent waiting (windows closing, TTLs running out,
servers starting), not computing, so two lanes at once finish in about the time of the
longer: the unit tests, the binary's and the integration tests in one; the reviewed
snapshots, each test alone in a process (each moves the working directory to its suite's),
in the other. Not more: with the container suite as a third lane at once, the 2-core
machine ran at a load of 17 and cells flipped (starved clients, an adapter that died). A
test binary that no lane names runs in the first lane: nothing is left out.

Output: one line per finished step with its time and result line; the whole output of a
failed step at the end; the logs in target/test-logs/. Exit 1 if a step failed.
"""

import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "target", "test-logs")
# The snapshot tests that run in a lane of their own (by a part of their name): none today.
OWN_LANE = []


def build():
    """Build every test; return {target name: (executable, package directory)}."""
    cmd = ["cargo", "test", "--workspace", "--release", "--no-run",
           "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(out.returncode)
    found = {}
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
            found[msg["target"]["name"]] = (msg["executable"], os.path.dirname(msg["manifest_path"]))
    return found


def listed(executable):
    """The tests of a binary, by name."""
    out = subprocess.run([executable, "--list", "--format", "terse"], stdout=subprocess.PIPE, text=True, check=True)
    return [l.rsplit(": ", 1)[0] for l in out.stdout.splitlines() if l.endswith(": test")]


def lanes(found):
    """[[(label, argv, cwd)]]: the steps of each lane, in order."""
    first = [name for name in ["limiter_resp", "limiter_harness", "binary", "integration"] if name in found]
    first += sorted(n for n in found if n not in first and n != "snapshots")
    result = [[(name, [found[name][0]], found[name][1]) for name in first]]
    if "snapshots" in found:
        exe, cwd = found["snapshots"]
        mine, own = [], []
        for test in listed(exe):
            step = ("snapshots " + test, [exe, "--exact", test], cwd)
            (own if any(part in test for part in OWN_LANE) else mine).append(step)
        result.append(mine)
        result.extend([step] for step in own)
    return [lane for lane in result if lane]


def run_lane(index, steps, failures, lock, started):
    for n, (label, argv, cwd) in enumerate(steps):
        log = os.path.join(LOGS, f"lane{index}-{n}.log")
        t0 = time.monotonic()
        with open(log, "w") as f:
            code = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
        took = time.monotonic() - t0
        with open(log) as f:
            results = [l.strip() for l in f if l.startswith("test result:")]
        with lock:
            mark = "ok  " if code == 0 else "FAIL"
            print(f"[{time.monotonic() - started:6.0f} s] {mark} {label} ({took:.0f} s) {results[-1] if results else ''}",
                  flush=True)
            if code != 0:
                failures.append((label, log))


def main():
    found = build()
    os.makedirs(LOGS, exist_ok=True)
    plan = lanes(found)
    print(f"test: {sum(len(l) for l in plan)} steps in {len(plan)} lanes at once; logs in {os.path.relpath(LOGS, ROOT)}/",
          flush=True)
    failures, lock, started = [], threading.Lock(), time.monotonic()
    threads = [threading.Thread(target=run_lane, args=(i, steps, failures, lock, started)) for i, steps in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for label, log in failures:
        print(f"\n===== {label} failed: {os.path.relpath(log, ROOT)} =====")
        with open(log) as f:
            sys.stdout.write(f.read())
    print(f"\ntest: {'every step passed' if not failures else f'{len(failures)} step(s) failed'} in {time.monotonic() - started:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
