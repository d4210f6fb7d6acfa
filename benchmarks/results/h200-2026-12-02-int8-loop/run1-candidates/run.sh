#!/usr/bin/env bash
# Session 25, run 1: sync latency without timestamps (target 5), register counts, and the
# 8-bit loop candidates interleaved in one process (target 3).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
t tools
CFLAGS=-I/usr/include sh benchmarks/pipeline_stats/build.sh > $OUT/tools.log 2>&1
sh benchmarks/vulkan_floor/build.sh >> $OUT/tools.log 2>&1
./benchmarks/vulkan_floor/vulkan_floor > $OUT/vulkan_floor.json 2>> $OUT/tools.log; tail -3 $OUT/tools.log
./benchmarks/pipeline_stats/pipeline_stats vk_adam/_spirv/copy.spv | cut -c1-600
t quantizer_cost 16.8M
ST=./benchmarks/pipeline_stats/pipeline_stats
timeout 260 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --repeats 10 --rounds 3 --pipeline-stats $ST \
  --builds "none of the three" "global tables" "early param store" "global tables, none of the three, one pass" \
  --knobs "B1=VK_ADAM_INT8_VEC4S=1" --knobs "B1 early=VK_ADAM_INT8_VEC4S=1@early param store" \
  --knobs "wg1056=VK_ADAM_INT8_WORKGROUPS=1056" --knobs "wg4096=VK_ADAM_INT8_WORKGROUPS=4096" \
  --knobs "B1 wg4096=VK_ADAM_INT8_VEC4S=1,VK_ADAM_INT8_WORKGROUPS=4096" \
  > $OUT/qc16.jsonl 2> $OUT/qc16.err
tail -3 $OUT/qc16.err
$PYTHON - <<'PY'
import json,os
for l in open(os.environ["OUT"]+"/qc16.jsonl"):
    r=json.loads(l); st=r.get("pipeline",{})
    regs={k:{kk:vv for kk,vv in v.items() if "egister" in kk or "hared" in kk or "ccupan" in kk} for k,v in st.items()} if "error" not in st else st
    print(f'{r["config"][:30]:30s} {r["build"][:28]:28s} {r["gpu_ms"]:.4f} {r["round_medians_ms"]} {regs}')
PY
t bench
timeout 170 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --cases tiny,single-2^20,single-2^22,single-2^24 --out $OUT/bench > $OUT/bench.log 2>&1
tail -14 $OUT/bench.log
t quantizer_cost 268M
timeout 120 $PYTHON benchmarks/quantizer_cost.py --elements 268435456 --repeats 5 --rounds 2 --builds "early param store" \
  --configs "fp32 params, int8 state" "bf16 params (SR), int8 state" "fp32 params, fp32 state" \
  --knobs "B1=VK_ADAM_INT8_VEC4S=1" --knobs "B1 early=VK_ADAM_INT8_VEC4S=1@early param store" > $OUT/qc268.jsonl 2> $OUT/qc268.err
tail -2 $OUT/qc268.err; cut -c1-200 $OUT/qc268.jsonl
t done
