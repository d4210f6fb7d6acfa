#!/usr/bin/env bash
# The flake audit: run randomized tests over many seeds and list every failure with its seed.
#
#   bash scripts/flake-hunt.sh [-n SEEDS] [--start S] [--jobs J] [--out DIR] [PYTEST ARGS...]
#
# Every test that draws from its seed (vk-adam's pytest plugin: fixture vk_seed, the rng fixture,
# hypothesis, the global generators; tests/conftest.py) runs once per session seed
# S, S+1, ..., S+SEEDS-1 (`pytest --vk-seeds`); a test that draws nothing runs once. The seeds are
# split over J pytest processes run side by side (default: the number of cores). PYTEST ARGS
# select the tests (node ids, -k, -m; default: the suite but the `exclusive` tests) and may add
# options (--vk-validation; it is off by default: the audit is about the numbers).
#
# It prints, per test, how many runs drew and which seeds failed, with the command that replays
# each failure (VK_ADAM_TEST_SEED=<seed> python -m pytest <node id>), writes the counts to
# DIR/counts.json and each process's log to DIR, and exits 1 if any run failed.
#
# Examples:
#   bash scripts/flake-hunt.sh -n 1000 tests/optim/test_properties.py
#   bash scripts/flake-hunt.sh -n 10000 'tests/commands/test_resident_demo.py::test_shaders_match_numpy_float64'
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${VK_ADAM_VENV:-$ROOT/.venv}/bin/python"
SEEDS=100
START=""
JOBS="$(nproc 2>/dev/null || echo 2)"
OUT=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) SEEDS="$2"; shift 2 ;;
    --start) START="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$START" ] || START="$("$PY" -c 'import secrets; print(secrets.randbits(31))')"
[ -n "$OUT" ] || OUT="$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt-XXXXXX")"
mkdir -p "$OUT"
if [ ${#args[@]} -eq 0 ]; then
  args=(-m "not exclusive" tests plugins/vk-adam-lion/tests)
fi
(( JOBS > SEEDS )) && JOBS="$SEEDS"
per=$(( (SEEDS + JOBS - 1) / JOBS ))
echo "flake hunt: session seeds $START .. $((START + SEEDS - 1)) in $JOBS processes; logs in $OUT"
started=$(date +%s)
pids=()
for ((j = 0; j < JOBS; j++)); do
  first=$(( START + j * per ))
  count=$(( SEEDS - j * per < per ? SEEDS - j * per : per ))
  (( count > 0 )) || break
  "$PY" -m pytest -p no:cacheprovider -p no:xdist -q --no-header -rN \
    --vk-seed="$first" --vk-seeds="$count" --vk-seeds-report="$OUT/counts-$j.json" \
    "${args[@]}" > "$OUT/log-$j.txt" 2>&1 &
  pids+=($!)
done
codes=()
for pid in "${pids[@]}"; do
  code=0
  wait "$pid" || code=$?
  codes+=("$code")
done
echo "took $(( $(date +%s) - started )) s"
"$PY" - "$OUT" "${codes[@]}" <<'EOF'
import json
import shlex
import sys
from pathlib import Path

out, codes = Path(sys.argv[1]), [int(c) for c in sys.argv[2:]]
tests: dict[str, dict[str, object]] = {}
ranges = []
for j, code in enumerate(codes):
    report = out / f"counts-{j}.json"
    if not report.exists():
        print(f"process {j} wrote no counts (exit {code}): see {out / f'log-{j}.txt'}")
        print((out / f"log-{j}.txt").read_text()[-3000:])
        sys.exit(2)
    counts = json.loads(report.read_text())
    ranges.append(counts["session_seeds"])
    for nodeid, c in counts["tests"].items():
        t = tests.setdefault(nodeid, {"runs": 0, "failed_seeds": []})
        t["runs"] += c["runs"]
        t["failed_seeds"] += c["failed_seeds"]
failed = {k: v for k, v in tests.items() if v["failed_seeds"]}
summary = {"session_seed_ranges": ranges, "tests": tests}
(out / "counts.json").write_text(json.dumps(summary, indent=1))
runs = sum(t["runs"] for t in tests.values())
print(f"{len(tests)} tests drew from their seed; {runs} runs; {sum(len(v['failed_seeds']) for v in failed.values())} failed")
for nodeid, t in sorted(tests.items()):
    seeds = t["failed_seeds"]
    print(f"  {t['runs']:6d} runs  {len(seeds):4d} failed  {nodeid}")
for nodeid, t in failed.items():
    for seed in t["failed_seeds"][:5]:
        print(f"FAILED at seed {seed}: VK_ADAM_TEST_SEED={seed} python -m pytest {shlex.quote(nodeid)}")
bad = [c for c in codes if c not in (0, 1, 5)]
if bad:
    print(f"a pytest process ended with {bad}: see the logs in {out}")
    sys.exit(2)
sys.exit(1 if failed else 0)
EOF
