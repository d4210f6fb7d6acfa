#!/usr/bin/env bash
# Session 27, run 3: the release (kp 0.9.0+vkadam.6, update dispatches without kp's barrier when
# the step uploads nothing): the whole bench, then the storage formats, torch in the same runs.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run19.sh $OUT/run.sh
t auto
timeout 200 $PYTHON -m vk_adam bench --quiet --cases auto --repeats 20 --warmup 3 --cpu-max-elements 0 --out $OUT/bench > $OUT/bench.log 2>&1
echo "auto rc=$?"; grep -E "^\||bare" $OUT/bench.log | head -30
t formats
left=$(( 585 - ($(date +%s) - T0) ))
timeout $left $PYTHON -m vk_adam bench --quiet --cases formats --out $OUT/formats > $OUT/formats.log 2>&1
echo "formats rc=$?"; grep -E "^\||bare" $OUT/formats.log | head -40
t done
