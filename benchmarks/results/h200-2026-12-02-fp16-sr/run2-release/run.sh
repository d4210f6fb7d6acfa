#!/usr/bin/env bash
# Session 26, run 2: the release with the fp16 SR fast path and the leaner host path. The
# quantizer's bucket tables in shared memory (with workgroup caps that amortize the copy)
# against the release and the fp16 general path at 16.8M; host cost; tiny sync step; formats.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run14.sh $OUT/run.sh
sh benchmarks/pipeline_stats/build.sh > $OUT/tools.log 2>&1
summ() { $PYTHON - "$1" <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "build" not in r: print(l.strip()); continue
    st=r.get("pipeline",{}); regs=[v.get("Register Count") for v in st.values() if isinstance(v,dict)]
    print(f'{r["config"][:30]:30s} {r["build"][:28]:28s} min {r["min_ms"]:.4f} p10 {r["p10_ms"]:.4f} med {r["gpu_ms"]:.4f} regs {regs}')
PY
}
t qc 16.8M
timeout 150 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --rounds 25 \
  --pipeline-stats ./benchmarks/pipeline_stats/pipeline_stats \
  --builds "shared bucket tables" "fp16 SR general path" \
  --knobs "shared bucket tables, wg792=VK_ADAM_INT8_WORKGROUPS=792@shared bucket tables" \
  --knobs "shared bucket tables, wg1584=VK_ADAM_INT8_WORKGROUPS=1584@shared bucket tables" \
  --configs "fp32 params, int8 state" "bf16 params + master, int8 state" "bf16 params (SR), int8 state" "fp16 params (SR), int8 state" \
  > $OUT/qc16.jsonl 2> $OUT/qc16.err
echo rc=$?; tail -2 $OUT/qc16.err; summ $OUT/qc16.jsonl
t host_cost; timeout 70 $PYTHON benchmarks/host_cost.py > $OUT/host_cost.jsonl 2>&1; cat $OUT/host_cost.jsonl
t tiny; timeout 50 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 200 --cases tiny --out $OUT/bench > $OUT/bench.log 2>&1
grep -E "tiny|bare" $OUT/bench.log
t formats
left=$(( 575 - ($(date +%s) - T0) ))
timeout $left $PYTHON -m vk_adam bench --quiet --cases formats --out $OUT/formats > $OUT/formats.log 2>&1
echo "formats rc=$?"; grep -E "^\|" $OUT/formats.log | head -30
t done
