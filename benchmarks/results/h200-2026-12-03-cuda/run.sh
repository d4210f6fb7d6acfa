#!/usr/bin/env bash
# H200 (device tool), from the repository root with .dev/kit carried:
#   bash benchmarks/results/h200-2026-12-03-cuda/run.sh smoke   the kit's install, tests/test_cuda_interop.py
#        under validation, the hand-over's cost
# Outputs under $OUT.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python
bash scripts/gpu-kit.sh install > "$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
case "${1:-smoke}" in
smoke)
  "$PYTHON" -m pytest --vk-validation tests/test_cuda_interop.py -p no:cacheprovider -q -rs > "$OUT/cuda-tests.txt" 2>&1
  tail -15 "$OUT/cuda-tests.txt"
  "$PYTHON" - > "$OUT/handover.txt" 2>&1 <<'PY'
import time, numpy as np, kp, torch
from vk_adam import interop
mgr = kp.Manager()
for n in (1 << 10, 1 << 24):
    t = interop.exportable_tensor(mgr, np.ones(n, np.float32))
    v = interop.as_torch(t)
    times = {"to_cuda": [], "to_vulkan": [], "round trip with a CUDA add": []}
    for i in range(200):
        a = time.perf_counter(); interop.to_cuda(t); b = time.perf_counter()
        v.add_(1.0); c = time.perf_counter(); interop.to_vulkan(t); d = time.perf_counter()
        times["to_cuda"].append(b - a); times["to_vulkan"].append(d - c); times["round trip with a CUDA add"].append(d - a)
    for k, x in times.items():
        print(f"n={n} {k}: median {1e3 * float(np.median(x[20:])):.4f} ms")
    mgr.sequence().eval(kp.OpTensorSyncLocal([t]))
    print("after 200 adds:", float(np.array(t.data())[0]), float(np.array(t.data())[-1]))
PY
  cat "$OUT/handover.txt"
  ;;
esac
