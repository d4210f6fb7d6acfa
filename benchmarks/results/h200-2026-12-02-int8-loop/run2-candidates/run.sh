#!/usr/bin/env bash
# Session 25, run 2: the 8-bit candidates (registers) interleaved step by step, min and median;
# 16.8M and 268M; then the sync latency with more repeats.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
sh benchmarks/pipeline_stats/build.sh > $OUT/tools.log 2>&1
ST=./benchmarks/pipeline_stats/pipeline_stats
show() { $PYTHON - "$1" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "build" not in r: print(l.strip()); continue
    st=r.get("pipeline",{}); regs=[v.get("Register Count") for v in st.values() if isinstance(v,dict)]
    print(f'{r["elements"]:>10} {r["config"][:30]:30s} {r["build"][:20]:20s} min {r["min_ms"]:.4f} p10 {r["p10_ms"]:.4f} med {r["gpu_ms"]:.4f} regs {regs}')
PY
}
t qc 16.8M
timeout 200 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --repeats 1 --rounds 25 --pipeline-stats $ST \
  --builds "early param store" "early param store, global tables" --knobs "B1=VK_ADAM_INT8_VEC4S=1" --knobs "B1 early=VK_ADAM_INT8_VEC4S=1@early param store" --knobs "B1 early global=VK_ADAM_INT8_VEC4S=1@early param store, global tables" \
  --copy-elements 9586981 5991863 \
  > $OUT/qc16.jsonl 2> $OUT/qc16.err
tail -3 $OUT/qc16.err; show $OUT/qc16.jsonl
t qc 268M
timeout 230 $PYTHON benchmarks/quantizer_cost.py --elements 268435456 --repeats 1 --rounds 8 \
  --builds "early param store" "early param store, global tables" --knobs "B1=VK_ADAM_INT8_VEC4S=1" --knobs "B1 early=VK_ADAM_INT8_VEC4S=1@early param store" --knobs "B1 early global=VK_ADAM_INT8_VEC4S=1@early param store, global tables" \
  --configs "fp32 params, int8 state" "bf16 params (SR), int8 state" "fp16 params (SR), int8 state" "fp32 params, fp32 state" \
  > $OUT/qc268.jsonl 2> $OUT/qc268.err
tail -3 $OUT/qc268.err; show $OUT/qc268.jsonl
t bench tiny
timeout 90 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 200 --cases tiny --out $OUT/bench > $OUT/bench.log 2>&1
grep -E "tiny|bare" $OUT/bench.log
./benchmarks/vulkan_floor/vulkan_floor > $OUT/vulkan_floor.json 2>/dev/null || (sh benchmarks/vulkan_floor/build.sh >/dev/null 2>&1 && ./benchmarks/vulkan_floor/vulkan_floor > $OUT/vulkan_floor.json)
cut -c1-400 $OUT/vulkan_floor.json
t done
