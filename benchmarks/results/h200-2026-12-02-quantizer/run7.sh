#!/usr/bin/env bash
# Device run 7: the 8-bit path's structure (quantizer_cost.py builds), 16.8M and 67M.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
t quantizer_cost
timeout 330 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 67108864 --repeats 10 \
  --configs "fp32 params, fp32 state" "fp32 params, int8 state" "bf16 params (SR), int8 state" \
  > $OUT/quantizer_cost.jsonl 2> $OUT/quantizer_cost.err
echo "rc=$?"; cut -c1-150 $OUT/quantizer_cost.jsonl; tail -5 $OUT/quantizer_cost.err
t done
