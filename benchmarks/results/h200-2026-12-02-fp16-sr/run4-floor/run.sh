#!/usr/bin/env bash
# Session 26, run 4 (short): where a tiny synchronous step's time goes -- the runtime running
# the step's own ops without vk-adam's Python (dispatch alone, with one barrier, with both)
# against step() itself, taking turns.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run16.sh $OUT/run.sh
t host_cost
timeout 60 $PYTHON benchmarks/host_cost.py --elements 1024 1024 16777216 --repeats 400 > $OUT/host_cost.jsonl 2>&1; cat $OUT/host_cost.jsonl
t done
