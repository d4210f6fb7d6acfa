#!/usr/bin/env bash
# H200 (device tool), from the repository root with .dev/kit carried:
#   bash benchmarks/results/h200-2026-12-03-host/run.sh bench   the kit's install, vk-adam info, the
#        host-import bind check, `vk-adam bench --cases host`, the interop and host-import tests under
#        validation, the two-process example
#   bash benchmarks/results/h200-2026-12-03-host/run.sh suite   the kit's install, the whole suite
#        under validation
# Outputs under $OUT.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python
bash scripts/gpu-kit.sh install > "$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv > "$OUT/gpu.csv" 2>&1
case "${1:-bench}" in
bench)
  "$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; tail -3 "$OUT/info.txt"
  "$PYTHON" - > "$OUT/bound.txt" 2>&1 <<'PY'
import numpy as np, vk_adam
for n in (2**14, 2**20, 2**24):
    p = np.zeros(n, np.float32)
    with vk_adam.AdamW([p], lr=1e-3) as opt:
        opt.step([np.ones(n, np.float32)])
        b = opt._dev.groups[0].sets[0]
        addr = p.__array_interface__["data"][0]
        print(n, "address % 4096 =", addr % 4096, "update binds the array:", b.bound_param is not b.param)
PY
  cat "$OUT/bound.txt"
  "$PYTHON" -m vk_adam bench --cases host --out "$OUT/host" > "$OUT/host.log" 2>&1
  echo "bench rc=$?"; sed -n '/^AdamW on NumPy/,$p' "$OUT/host.log" | grep -v '^host:'
  "$PYTHON" -m pytest --vk-validation tests/test_host_import.py tests/test_interop.py \
    tests/test_interop_optimizer.py tests/test_bench_host.py -p no:cacheprovider -q > "$OUT/tests.txt" 2>&1
  tail -3 "$OUT/tests.txt"
  "$PYTHON" examples/interop/live_weights.py --steps 10 > "$OUT/live_weights.txt" 2>&1; tail -2 "$OUT/live_weights.txt"
  ;;
suite)
  timeout "${SUITE_SECONDS:-520}" "$PYTHON" -m pytest --vk-validation tests plugins/vk-adam-lion/tests \
    -p no:cacheprovider -q > "$OUT/suite.txt" 2>&1
  echo "suite rc=$?"; tail -8 "$OUT/suite.txt"
  ;;
esac
