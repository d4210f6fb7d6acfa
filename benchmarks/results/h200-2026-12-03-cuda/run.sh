#!/usr/bin/env bash
# H200 (device tool), from the repository root with .dev/kit carried:
#   bash benchmarks/results/h200-2026-12-03-cuda/run.sh
# the kit's install; then, each under a time limit, with outputs under $OUT:
#   cuda-tests.txt   tests/test_cuda_interop.py and tests/test_zero1_vulkan_collectives.py under
#                    Khronos core + synchronization validation (as_torch, 1,000 hand-overs each way,
#                    NCCL at world size 1 on the Vulkan buffers, timeline semaphores)
#   handover.txt     the cost of to_cuda / to_vulkan, and of a round trip to each API
#   cuda_view.txt    examples/interop/cuda_view.py
#   zero/            vk-adam bench --cases zero --ranks 2 (2^24 fp32): gloo and MPI over NumPy and
#                    device buffers, NCCL on the Vulkan buffers at world size 1, torch's ZeRO
#   profile.txt      profile_nccl.py: the NCCL step at world size 1 by phase, and cProfile of it
#   semaphores.txt   semaphores.py: a Vulkan -> CUDA -> Vulkan round trip ordered by host waits
#                    and by one exported timeline semaphore
#   costs.txt        interop_costs.py: each piece of a hand-over and of the NCCL step, apart
#   profile-gloo.txt profile_gloo.py: cProfile of a gloo step on device buffers, 2 ranks
#   collectives.txt  collectives.py: gloo and MPI on 64 MiB at 2 ranks, each way to reduce-scatter
#                    and all-gather
#   rest.txt         (first run only) the suite's files the 2026-12-03 host run did not reach,
#                    under validation
# handover.txt, profile.txt, profile-gloo.txt and collectives.txt are written with a first
# argument "full";
# rest.txt with "rest";
# with "exchange" only cuda-tests.txt, zero/, collectives.txt and mpi-single-copy.txt (Open MPI's
# shared-memory copy mechanism, and collectives.py under MPI with CMA asked for); with "bench"
# only zero/ and collectives.txt; with "final" only zero/ and two-gpus-check.txt
# (benchmarks/zero_two_gpus.py at one rank, 2 x 2^24 values: the script checked on this GPU);
# with "two-gpus" (on nvidia-h200-x2) only zero/ (with NCCL rows of 2 ranks, one per GPU) and
# two-gpus/ (benchmarks/zero_two_gpus.py: 2 x 268M AdamW, one rank per GPU); with "twice" only
# zero/ and zero-again/ (the bench twice, back to back: how much one run differs from the next).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python
# the device tool brings back 8 files at most: the install log stays on the machine
bash scripts/gpu-kit.sh install > /tmp/install.log 2>&1 || { tail -40 /tmp/install.log; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
case "${1:-}" in
  twice)
    for d in zero zero-again; do
      timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/$d" > "$OUT/$d.log" 2>&1
      echo "bench rc=$?"; tail -11 "$OUT/$d.log"
    done
    exit 0;;
  final|two-gpus)
    timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
    echo "bench rc=$?"; tail -14 "$OUT/zero.log"
    if [ "$1" = final ]; then
      timeout 120 "$PYTHON" -m torch.distributed.run --nproc-per-node 1 benchmarks/zero_two_gpus.py \
        --elements $((1 << 24)) --out /tmp/two > "$OUT/two-gpus-check.txt" 2>&1
      echo "two-gpus check rc=$?"; tail -12 "$OUT/two-gpus-check.txt"
    else
      timeout 300 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 benchmarks/zero_two_gpus.py \
        --out "$OUT/two-gpus" > "$OUT/two-gpus.log" 2>&1
      echo "two-gpus rc=$?"; tail -14 "$OUT/two-gpus.log"
    fi
    exit 0;;
esac
[ "${1:-}" = bench ] || timeout 150 "$PYTHON" -m pytest --vk-validation tests/test_cuda_interop.py tests/test_zero1_vulkan_collectives.py \
  tests/test_timeline_semaphores.py \
  -p no:cacheprovider -q -rs > "$OUT/cuda-tests.txt" 2>&1
[ "${1:-}" = bench ] || { echo "cuda tests rc=$?"; tail -12 "$OUT/cuda-tests.txt"; }
[ "${1:-}" = full ] && timeout 60 "$PYTHON" - > "$OUT/handover.txt" 2>&1 <<'PY'
import time, numpy as np, kp
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
    print("after 200 adds of 1 to ones:", float(np.array(t.data())[0]), float(np.array(t.data())[-1]))
# what one round trip to each API costs on this machine
import torch
x = kp.Manager().sequence(); torch.cuda.synchronize()
def median_us(f, n=200):
    s = []
    for _ in range(n):
        a = time.perf_counter(); f(); s.append(time.perf_counter() - a)
    return 1e6 * float(np.median(s[20:]))
t = interop.exportable_tensor(mgr, np.ones(1024, np.float32))
seq = mgr.sequence(); seq.record(kp.OpTensorSyncDevice([t]))
print(f"torch.cuda.synchronize, idle: {median_us(torch.cuda.synchronize):.1f} us")
print(f"a recorded kp sequence (one 4 KiB upload), eval again: {median_us(seq.eval):.1f} us")
print(f"a new kp sequence: {median_us(mgr.sequence, 50):.1f} us")
PY
[ "${1:-}" = full ] && cat "$OUT/handover.txt"
if [ "${1:-}" = exchange ] || [ "${1:-}" = bench ]; then
  timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
  echo "bench rc=$?"; tail -16 "$OUT/zero.log"
  C=benchmarks/results/h200-2026-12-03-cuda/collectives.py
  timeout 90 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$C" > "$OUT/collectives.txt" 2>&1
  timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root "$PYTHON" "$C" mpi >> "$OUT/collectives.txt" 2>&1
  grep "ms$" "$OUT/collectives.txt"
  [ "${1:-}" = bench ] && exit 0
  { ompi_info --param btl vader --level 9 | grep -i single_copy
    echo "--- mpirun --mca btl_vader_single_copy_mechanism cma"
    timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root --mca btl_vader_single_copy_mechanism cma \
      "$PYTHON" "$C" mpi 2>&1 | tail -12; } > "$OUT/mpi-single-copy.txt" 2>&1
  cat "$OUT/mpi-single-copy.txt"
  exit 0
fi
timeout 60 "$PYTHON" examples/interop/cuda_view.py > "$OUT/cuda_view.txt" 2>&1; cat "$OUT/cuda_view.txt"
timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
echo "bench rc=$?"; tail -16 "$OUT/zero.log"
if [ "${1:-}" = full ]; then
  timeout 60 "$PYTHON" benchmarks/results/h200-2026-12-03-cuda/profile_nccl.py > "$OUT/profile.txt" 2>&1
  echo "profile rc=$?"; head -12 "$OUT/profile.txt"
fi
timeout 60 "$PYTHON" benchmarks/results/h200-2026-12-03-cuda/semaphores.py > "$OUT/semaphores.txt" 2>&1
echo "semaphores rc=$?"; cat "$OUT/semaphores.txt"
timeout 90 "$PYTHON" benchmarks/results/h200-2026-12-03-cuda/interop_costs.py > "$OUT/costs.txt" 2>&1
echo "costs rc=$?"; cat "$OUT/costs.txt"
if [ "${1:-}" = full ]; then
  timeout 90 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 benchmarks/results/h200-2026-12-03-cuda/profile_gloo.py \
    > "$OUT/profile-gloo.txt" 2>&1
  echo "profile-gloo rc=$?"; grep -A30 "host staging" "$OUT/profile-gloo.txt" | head -34
fi
C=benchmarks/results/h200-2026-12-03-cuda/collectives.py
if [ "${1:-}" = full ]; then
  timeout 60 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$C" > "$OUT/collectives.txt" 2>&1
  timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root "$PYTHON" "$C" mpi >> "$OUT/collectives.txt" 2>&1
  grep "ms$" "$OUT/collectives.txt"
fi
[ "${1:-}" = rest ] && timeout 170 "$PYTHON" -m pytest --vk-validation tests/test_zero1_device.py tests/test_zero1_shard.py \
  plugins/vk-adam-lion/tests -p no:cacheprovider -q > "$OUT/rest.txt" 2>&1
[ "${1:-}" = rest ] && { echo "rest rc=$?"; tail -4 "$OUT/rest.txt"; }
true
