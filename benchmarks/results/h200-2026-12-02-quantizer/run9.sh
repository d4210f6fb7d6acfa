#!/usr/bin/env bash
# Device run 9 (warm): the quantizer-cost probe again at 16.8M, a second process.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
t quantizer_cost
left=$(( 230 - ($(date +%s) - T0) ))
timeout $left $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --repeats 10 \
  --configs "fp32 params, fp32 state" "fp32 params, int8 state" "bf16 params (SR), int8 state" \
  > $OUT/quantizer_cost.jsonl 2> $OUT/quantizer_cost.err
echo "rc=$?"; cut -c1-130 $OUT/quantizer_cost.jsonl
nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks_throttle_reasons.active --format=csv
t done
