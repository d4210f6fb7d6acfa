#!/usr/bin/env bash
# Device run 6: the storage-format table (targets 3, 4), then the quantizer-cost probe.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
t formats
timeout 290 $PYTHON -m vk_adam bench --cases formats --out $OUT/formats --quiet > $OUT/formats.log 2>&1
echo "rc=$?"; tail -30 $OUT/formats.log
t quantizer_cost
left=$(( 560 - ($(date +%s) - T0) ))
timeout $left $PYTHON benchmarks/quantizer_cost.py --elements 16777216 268435456 --repeats 10 \
  --harness "harness 4=.dev/harness4.glsl" --copy-elements 4194304 16777216 > $OUT/quantizer_cost.jsonl 2> $OUT/quantizer_cost.err
echo "rc=$?"; cat $OUT/quantizer_cost.jsonl; tail -5 $OUT/quantizer_cost.err
t done
