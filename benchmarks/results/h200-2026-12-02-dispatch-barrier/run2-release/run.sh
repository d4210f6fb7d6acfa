#!/usr/bin/env bash
# Session 27, run 2: this release (update dispatches without kp's own barrier when the step
# uploads nothing; kp 0.9.0+vkadam.6): host_cost against the earlier ops taking turns, the
# tiny sync step with torch, then the whole suite under the Khronos validation layers.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run18.sh $OUT/run.sh
t host_cost
timeout 60 $PYTHON benchmarks/host_cost.py --elements 1024 1024 16777216 --repeats 300 > $OUT/host_cost.jsonl 2>&1; cat $OUT/host_cost.jsonl
t tiny; timeout 40 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 200 --cases tiny --out $OUT/tiny > $OUT/tiny.log 2>&1
grep -E "tiny|bare" $OUT/tiny.log
t suite
left=$(( 590 - ($(date +%s) - T0) ))
timeout $left bash scripts/gpu-kit.sh test .dev/kit -q -p no:cacheprovider -rfEs > $OUT/suite.log 2>&1
echo "suite rc=$?"; tail -25 $OUT/suite.log
t done
