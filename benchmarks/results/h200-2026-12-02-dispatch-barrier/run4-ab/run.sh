#!/usr/bin/env bash
# Session 27, run 4 (short): this release's step() against the previous release's ops (kp's
# barrier before each update dispatch), taking turns, 1,024 elements, three processes; the tiny
# sync step with torch.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run20.sh $OUT/run.sh
t host_cost
for i in 1 2 3; do timeout 30 $PYTHON benchmarks/host_cost.py --elements 1024 --repeats 1000 >> $OUT/host_cost.jsonl 2>&1; done; cat $OUT/host_cost.jsonl
t tiny; timeout 40 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 400 --cases tiny --out $OUT/tiny > $OUT/tiny.log 2>&1
grep -E "tiny|bare" $OUT/tiny.log
t done
