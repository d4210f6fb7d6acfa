#!/usr/bin/env bash
# Session 25, run 3: the new 8-bit loop (tables in place, one block per subgroup, params stored
# before the absmax): its tests under validation, old vs new interleaved, the formats bench.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
sh benchmarks/pipeline_stats/build.sh > $OUT/tools.log 2>&1
t tests
timeout 150 bash scripts/gpu-kit.sh test .dev/kit -q -p no:cacheprovider -rfEs -k "format or subgroup or probe or quantiz or int8" > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -4 $OUT/tests.log
t qc 16.8M
timeout 110 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --repeats 1 --rounds 25 \
  --pipeline-stats ./benchmarks/pipeline_stats/pipeline_stats --harness "before (6edda12)=.dev/harness4.glsl" \
  --builds "shared tables" "two blocks per subgroup" --copy-elements 16777216 9586981 5991863 \
  > $OUT/qc16.jsonl 2> $OUT/qc16.err
tail -2 $OUT/qc16.err
$PYTHON - $OUT/qc16.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "build" not in r: print(l.strip()); continue
    st=r.get("pipeline",{}); regs=[v.get("Register Count") for v in st.values() if isinstance(v,dict)]
    print(f'{r["config"][:30]:30s} {r["build"][:24]:24s} min {r["min_ms"]:.4f} p10 {r["p10_ms"]:.4f} med {r["gpu_ms"]:.4f} regs {regs}')
PY
t formats
left=$(( 560 - ($(date +%s) - T0) ))
timeout $left $PYTHON -m vk_adam bench --quiet --cases formats --out $OUT/formats > $OUT/formats.log 2>&1
echo "formats rc=$?"; grep -E "^\|" $OUT/formats.log | head -30
t done
