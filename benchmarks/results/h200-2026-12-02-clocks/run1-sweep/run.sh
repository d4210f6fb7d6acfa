#!/usr/bin/env bash
# Session 28, run 1: the workgroup-size knob (VK_ADAM_WORKGROUP_SIZE, harness 5) swept against
# the loop's other knobs, the copy yardstick cold and after a warm-up, and the host's Python
# speed after a step's wait (host_cost.py's probes).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run28a.sh $OUT/run.sh
t copy
timeout 60 $PYTHON - > $OUT/copy.jsonl 2>&1 <<'PY'
import json, time
from vk_adam._runtime import Runtime
from vk_adam._commands.bench.measure import vulkan_copy_bandwidth
rt = Runtime()
for label in ("cold", "again"):
    print(json.dumps({label: vulkan_copy_bandwidth(rt, 2**26, 10) / 1e9}), flush=True)
t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < 1.0:
    vulkan_copy_bandwidth(rt, 2**26, 2); k += 1
print(json.dumps({"warm_loop_calls": k}))
for n in (2**22, 2**24, 2**26, 2**28):
    print(json.dumps({"elements": n, "warm_GBps": vulkan_copy_bandwidth(rt, n, 20) / 1e9}), flush=True)
rt.close()
PY
cat $OUT/copy.jsonl
t plain sweep
timeout 200 $PYTHON benchmarks/knob_sweep.py --only plain --elements 1048576 4194304 16777216 --rounds 2 --repeats 20 > $OUT/sweep_plain.jsonl 2>&1
echo "rc=$?"; grep best $OUT/sweep_plain.jsonl
t int8 sweep
timeout 150 $PYTHON benchmarks/knob_sweep.py --only int8 --elements 16777216 --rounds 2 --repeats 10 > $OUT/sweep_int8.jsonl 2>&1
echo "rc=$?"; grep best $OUT/sweep_int8.jsonl
t host cost
left=$(( 580 - ($(date +%s) - T0) ))
timeout $left $PYTHON benchmarks/host_cost.py --elements 1024 16777216 268435456 --repeats 200 > $OUT/host_cost.jsonl 2>&1
echo "rc=$?"; cat $OUT/host_cost.jsonl
t done
