#!/usr/bin/env bash
# Every lifecycle probe, for the closing figures of "one shared device per process":
#   bash benchmarks/lifecycle/run.sh OUT_DIR [PROBE ARGS...]     e.g. "manager-cycles --n 1000"
# writes OUT_DIR/lifecycle.jsonl (samples and outcomes) and prints a one-line summary per probe.
set -uo pipefail
OUT="${1:?output folder}"
PY="${PYTHON:-python3}"
shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUT"
PROBES=("$@")
[ ${#PROBES[@]} -eq 0 ] && PROBES=("construction --n 50" "optimizers-alive --n 1000"
  "optimizer-cycles --n 10000" "object-cycles --n 3000" "manager-cycles --n 1000" "managers-alive --n 100")
for probe in "${PROBES[@]}"; do
  # shellcheck disable=SC2086
  "$PY" "$HERE/probe.py" $probe --out "$OUT/lifecycle.jsonl" |
    "$PY" -c 'import json,sys; o=json.load(sys.stdin); print(o["probe"], "n", o["n"], "rc", o["rc"], "wall_s", o["wall_s"], "last", o["last"], o["stderr_tail"][-300:].strip())'
done
"$PY" "$HERE/summary.py" "$OUT/lifecycle.jsonl" | tee "$OUT/summary.md"
