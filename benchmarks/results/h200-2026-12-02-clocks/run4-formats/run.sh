#!/usr/bin/env bash
# Session 28, run 4: the storage formats with every timed step right after a moment of
# back-to-back copies (ClockWarmer: the GPU at a busy GPU's clock), the copy yardstick timed the
# same way, then the 8-bit loop's knobs (workgroup size included) at 16.8M the same way; the GPU's
# clocks logged every 100 ms (smi.csv).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; echo "$(date +%H:%M:%S) $*" >> $OUT/phases.txt; }
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run28d.sh $OUT/run.sh
t formats
timeout 290 $PYTHON -m vk_adam bench --quiet --cases formats --out $OUT/formats > $OUT/formats.log 2>&1
echo "formats rc=$?"; grep -E "^\||opy" $OUT/formats.log | head -40
t int8 sweep
left=$(( 500 - ($(date +%s) - T0) ))
timeout $left $PYTHON benchmarks/knob_sweep.py --only int8 --elements 16777216 --rounds 1 --repeats 10 > $OUT/sweep_int8.jsonl 2>&1
echo "rc=$?"; grep best $OUT/sweep_int8.jsonl
t done
kill $SMI
