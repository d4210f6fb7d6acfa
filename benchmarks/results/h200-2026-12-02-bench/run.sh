#!/usr/bin/env bash
# Device run 3: fence-spin experiment, loop-shape knob sweep, then the main bench (VK_ADAM_VEC4S
# picked from the sweep) and the training-step bench.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1 OUT
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > /tmp/setup.log 2>&1 || { tail -30 /tmp/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
$PYTHON -m vk_adam info 2>&1 | head -12
t spin
for spin in 200 20000; do KOMPUTE_FENCE_SPIN_US=$spin timeout 40 $PYTHON benchmarks/host_cost.py --elements 1024 268435456 --repeats 100 | tee -a $OUT/host_cost_spin.jsonl; done
t knob sweep
timeout 200 $PYTHON benchmarks/knob_sweep.py --repeats 10 > $OUT/knob_sweep.jsonl 2>$OUT/knob_sweep.err; tail -3 $OUT/knob_sweep.err
grep best $OUT/knob_sweep.jsonl
V=$($PYTHON - <<'PY'
import json, collections
import os
rows=[json.loads(l) for l in open(os.environ['OUT']+'/knob_sweep.jsonl') if '"best"' not in l]
fp=[r for r in rows if r["config"]=="fp32 params, fp32 state"]
best={}
for r in fp: best[r["elements"]]=min(best.get(r["elements"],1e9), r["gpu_ms"])
score=collections.defaultdict(float)
for r in fp: score[r["VK_ADAM_VEC4S"]]+=r["gpu_ms"]/best[r["elements"]]
print(min(score, key=score.get) if score else "1")
PY
)
t "main bench with VK_ADAM_VEC4S=$V"
VK_ADAM_VEC4S=$V timeout 230 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --out $OUT/bench 2>&1 | tail -25
t train bench
timeout 90 $PYTHON -m vk_adam bench --cases train --out $OUT/train --quiet 2>&1 | tail -12
t done
