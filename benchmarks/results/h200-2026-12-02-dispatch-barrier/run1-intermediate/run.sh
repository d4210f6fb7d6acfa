#!/usr/bin/env bash
# Session 27, run 1: reused dispatch ops (kp patch 0016: push constants in place, no kp barrier
# per dispatch, one-call re-recording) against the earlier ops, taking turns in one process;
# the skip flag read with the loads (this harness against the previous one); the tiny sync
# step and the whole bench with torch in the same run.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run17.sh $OUT/run.sh
$PYTHON -c "import kp; print(kp.__version__, kp.patches[-2:])"
t host_cost
timeout 120 $PYTHON benchmarks/host_cost.py --elements 1024 1024 16777216 268435456 --repeats 300 > $OUT/host_cost.jsonl 2>&1; cat $OUT/host_cost.jsonl
t qc skip flag
timeout 100 $PYTHON benchmarks/quantizer_cost.py --elements 1024 4194304 16777216 --rounds 25 --repeats 4 \
  --harness "previous harness=.dev/harness-prev.glsl" --builds none --configs "fp32 params, fp32 state" \
  > $OUT/qc_skip.jsonl 2> $OUT/qc_skip.err
echo rc=$?; tail -2 $OUT/qc_skip.err
$PYTHON - $OUT/qc_skip.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "build" in r: print(f'{r["elements"]:>10} {r["build"][:20]:20s} min {r["min_ms"]*1e3:.2f} p10 {r["p10_ms"]*1e3:.2f} med {r["gpu_ms"]*1e3:.2f} us')
PY
t tiny; timeout 60 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 200 --cases tiny --out $OUT/tiny > $OUT/tiny.log 2>&1
grep -E "tiny|bare" $OUT/tiny.log
t auto
left=$(( 570 - ($(date +%s) - T0) ))
timeout $left $PYTHON -m vk_adam bench --quiet --cases auto --repeats 20 --warmup 3 --cpu-max-elements 0 --out $OUT/bench > $OUT/bench.log 2>&1
echo "auto rc=$?"; grep -E "^\|" $OUT/bench.log | head -30
t done
