#!/usr/bin/env bash
# Session 28, run 3: benchmarks/copy_probe.py -- which buffers run the copy slowly (old ones, new
# ones, or all after some point), with kp's memory recycling on and off; GPU clocks logged.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run28c.sh $OUT/run.sh
t probe
timeout 120 $PYTHON benchmarks/copy_probe.py > $OUT/probe.jsonl 2>&1; cat $OUT/probe.jsonl
t probe, recycling off
KOMPUTE_MEMORY_RECYCLE_BYTES=0 timeout 120 $PYTHON benchmarks/copy_probe.py > $OUT/probe_norecycle.jsonl 2>&1; cat $OUT/probe_norecycle.jsonl
t done
kill $SMI
