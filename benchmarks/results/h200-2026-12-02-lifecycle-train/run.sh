#!/usr/bin/env bash
# Device run 2: lifecycle after the cycle fix, host cost, the fused resident step.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > /tmp/setup.log 2>&1 || { tail -30 /tmp/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
$PYTHON -m vk_adam info 2>&1 | head -8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
t lifecycle
mkdir -p $OUT/lifecycle
timeout 200 bash benchmarks/lifecycle/run.sh $OUT/lifecycle "construction --n 50" "optimizer-cycles --n 10000" "optimizers-alive --n 1000"
t host_cost
timeout 60 $PYTHON benchmarks/host_cost.py --elements 1024 4194304 16777216 268435456 --repeats 100 | tee $OUT/host_cost.jsonl
t resident_step
timeout 150 $PYTHON benchmarks/resident_step.py --rows 1,2,4 --threads 128,256,512,1024 --steps 100 2>&1 | tee $OUT/resident_step.txt | tail -20
t train bench
timeout 200 $PYTHON -m vk_adam bench --cases train --out $OUT/train --quiet 2>&1 | tail -20
t done
