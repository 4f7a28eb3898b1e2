#!/usr/bin/env python3
"""`just test`: build every test once (the release profile, beside `just build`), then run
the test binaries, each in a process of its own, as cargo would run them (the package's
directory as the working directory): the unit tests, `harness/tests/main.rs`, the
integration tests and the reviewed snapshots, each of their tests alone in a process (each
moves the working directory to its suite's). A test binary no step names runs too: nothing
is left out.

The steps run one after another (CI's way), but for two: the team gate's test starts at
once beside the binary's other tests (it is two thirds of their time, and would otherwise
start late and end alone), and the last two, the redis-6.2 and valkey-9.1 snapshot suites,
run side by side (each leaves 70-80 % of two cores idle alone). The tests run with the
interpreter running this script first in PATH (not a version manager's shim).

`--lanes 2` (`just test-lanes`) runs two lanes at the same time, paired by the load each
step puts on the machine: the first runs the binary's tests (the CLI as a user runs it: its
first minute keeps both cores busy), then the main snapshot suite; the second the
integration tests beside the binary's tests, then the two small server-version suites (a
quarter of a core) beside the binary's waiting tail. About 430 s
instead of 495 on 2 cores — but there each of three runs failed one load-sensitive test
beside the binary's busy minute, a different one each time: for machines with cores to spare
(docs/performance.md, "Two lanes paired by load").

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


# Test threads beyond libtest's default (one per core) where the tests mostly wait on
# servers, windows and TTLs rather than use a core: the integration tests take 107 s at four
# and 63 s at eight, 200 s at libtest's two; `binary` (the CLI run as a user would, most of
# its time the team gate's `ci` runs) 188 s at two, 103 s at six (docs/performance.md).
THREADS = {"integration": ["--test-threads", "8"], "binary": ["--test-threads", "6"]}

# Tests started at once in a process of their own, beside the rest of their binary (one test
# thread fewer): the team gate's life, two thirds of `binary`'s time, would otherwise start
# after the 28 tests whose names sort before it and end alone, 80 s after the rest
# (docs/performance.md).
STARTED_FIRST = {"binary": ["gate::a_teams_gate_is_green_run_after_run_also_beside_two_cpu_hogs_and_its_shards_merge_to_one_run"]}


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


# The order of the steps. With `--lanes 2`, lane 1 runs these, then the main snapshot suite;
# lane 2 the integration tests and the rest, the other snapshot suites last.
FIRST_LANE = ["resp", "limiter_harness", "binary"]
MAIN_SNAPSHOTS = "the_harness_suite_"


def stages(found, count):
    """[[[(label, argv, cwd)]]]: stages run one after another, each a list of lanes run at
    the same time, each lane a list of steps run in order."""
    def step(name):
        return (name, [found[name][0]] + THREADS.get(name, []), found[name][1])

    def split(name):
        """The step of `name` less the tests started first, and a step for each of those."""
        first = STARTED_FIRST.get(name, [])
        if not first or count == 2:
            return [step(name)], []
        exe, cwd = found[name]
        have = set(listed(exe))
        missing = [test for test in first if test not in have]
        if missing:
            sys.exit(f"test-runner.py: STARTED_FIRST names tests {name} does not have: {missing}")
        threads = max(1, int(THREADS.get(name, ["", os.cpu_count() or 1])[1]) - len(first))
        rest = [exe, "--test-threads", str(threads)] + [a for test in first for a in ("--skip", test)]
        return [(name, rest, cwd)], [[(f"{name} {test}", [exe, "--exact", test], cwd)] for test in first]

    first, alone = [], []
    for n in FIRST_LANE:
        if n in found:
            rest, own = split(n)
            first += rest
            alone += own
    second = [step(n) for n in ["integration"] if n in found]
    second += [step(n) for n in sorted(found) if n not in FIRST_LANE + ["integration", "snapshots"]]
    main, others = [], []
    if "snapshots" in found:
        exe, cwd = found["snapshots"]
        for test in listed(exe):
            (main if test.startswith(MAIN_SNAPSHOTS) else others).append(
                ("snapshots " + test, [exe, "--exact", test], cwd))
    if count == 2:
        plan = [[first + main, second + others]]
    else:
        # The server-version suites last, side by side: each leaves 70-80 % of the two cores
        # idle alone, about half together (docs/performance.md).
        # The binary's tests beside the tests started first, then the rest in turn.
        plan = [[first] + alone, [second + main], [[o] for o in others]]
    return [[lane for lane in stage if lane] for stage in plan if any(stage)]


def test_env():
    """The environment of the steps: the directory of the interpreter running this script
    first in PATH. Where `python3` is a version manager's wrapper (pyenv's shims are a bash
    script that looks the version up at every start: ~100 ms of CPU and 250 ms before Python
    runs), the tests' exec adapters, started a few hundred times, then start Python at once."""
    env = dict(os.environ)
    if sys.executable:
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_lane(index, steps, failures, lock, started, env):
    for n, (label, argv, cwd) in enumerate(steps):
        log = os.path.join(LOGS, f"{index}-{n}.log")
        t0 = time.monotonic()
        with open(log, "w") as f:
            code = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
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
    count = 1
    if sys.argv[1:2] == ["--lanes"] and len(sys.argv) > 2:
        count = int(sys.argv[2])
        if count not in (1, 2):
            sys.exit("--lanes 1 (one step after another, the default) or 2")
    found = build()
    env = test_env()
    os.makedirs(LOGS, exist_ok=True)
    plan = stages(found, count)
    total = sum(len(lane) for stage in plan for lane in stage)
    shape = " then ".join(f"{len(stage)} at once" if len(stage) > 1 else "in turn" for stage in plan)
    print(f"test: {total} steps ({shape}); logs in {os.path.relpath(LOGS, ROOT)}/",
          flush=True)
    failures, lock, started = [], threading.Lock(), time.monotonic()
    for n, stage in enumerate(plan):
        threads = [threading.Thread(target=run_lane, args=(f"{n}.{i}", lane, failures, lock, started, env))
                   for i, lane in enumerate(stage)]
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
