#!/usr/bin/env bash
# Session 28, run 2: the release with the workgroup-size constant (harness 5; default 256): the
# whole bench, the storage formats and the training step, torch in the same runs; the GPU's clocks
# and P-state logged every 50 ms throughout (smi.csv), and the copy yardstick at 2^26 and 2^28 in
# one process, to see what the slow spells are; then the loop-shape tests under validation.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; echo "$(date +%H:%M:%S.%N) $*" >> $OUT/phases.txt; }
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,clocks_throttle_reasons.active --format=csv -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run28b.sh $OUT/run.sh
t copy
timeout 60 $PYTHON - > $OUT/copy.jsonl 2>&1 <<'PY'
import json, time
from vk_adam._runtime import Runtime
from vk_adam._commands.bench.measure import vulkan_copy_bandwidth
rt = Runtime()
for n in (2**26, 2**28, 2**26, 2**27, 2**26):
    t = time.strftime("%H:%M:%S")
    print(json.dumps({"at": t, "elements": n, "GBps": round(vulkan_copy_bandwidth(rt, n, 10) / 1e9)}), flush=True)
    time.sleep(0.5)
rt.close()
PY
cat $OUT/copy.jsonl
t auto
timeout 200 $PYTHON -m vk_adam bench --quiet --cases auto --repeats 20 --warmup 3 --cpu-max-elements 0 --out $OUT/bench > $OUT/bench.log 2>&1
echo "auto rc=$?"; grep -E "^\||bare|copy" $OUT/bench.log | head -30
t formats
timeout 260 $PYTHON -m vk_adam bench --quiet --cases formats --out $OUT/formats > $OUT/formats.log 2>&1
echo "formats rc=$?"; grep -E "^\||bare|copy" $OUT/formats.log | head -40
t tests
left=$(( 585 - ($(date +%s) - T0) ))
timeout $left $PYTHON -m pytest --vk-validation -q -p no:cacheprovider -rfEs tests/test_subgroups.py tests/test_formats.py > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -5 $OUT/tests.log
t done
kill $SMI
