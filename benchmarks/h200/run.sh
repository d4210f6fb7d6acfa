#!/usr/bin/env bash
# A session on an NVIDIA GPU machine (the H200 of BENCHMARKS.md), from the repository root, after
# scripts/gpu-kit.sh's kit was built into .dev/kit (docs/gpu-testing.md):
#
#   bash benchmarks/h200/run.sh [MODE] [--out DIR]
#
# DIR: where every output goes; default $OUT (set by the device tool), else
# benchmarks/results/h200-<today>/. The kit's install log goes to /tmp/install.log. With PACK=1,
# everything in DIR ends in one archive, DIR/outputs.tar.gz, when the script ends (the device
# tool brings back at most 8 files; `tar xzf outputs.tar.gz` in the results folder unpacks it).
#
# MODE (default: CUDA interop and ZeRO-1 with NCCL on the Vulkan buffers):
#   (none)    cuda-tests.txt  the CUDA interop, NCCL-on-Vulkan and timeline-semaphore tests under
#                             Khronos core + synchronization validation
#             cuda_view.txt   examples/interop/cuda_view.py
#             zero/           vk-adam bench --cases zero --ranks 2 (2^24 fp32): gloo and MPI over
#                             NumPy and device buffers, NCCL on the Vulkan buffers, torch's ZeRO
#             semaphores.txt  semaphores.py: a Vulkan -> CUDA -> Vulkan round trip ordered by host
#                             waits and by one exported timeline semaphore
#             costs.txt       interop_costs.py: each piece of a hand-over and of the NCCL step
#   full      the same, and handover.txt (to_cuda / to_vulkan and a round trip to each API),
#             profile.txt (profile_nccl.py), profile-gloo.txt (profile_gloo.py) and
#             collectives.txt (collectives.py: gloo and MPI on 64 MiB at 2 ranks)
#   exchange  cuda-tests.txt, zero/, collectives.txt and mpi-single-copy.txt (Open MPI's
#             shared-memory copy mechanism, and collectives.py under MPI with CMA asked for)
#   bench     zero/ and collectives.txt
#   twice     zero/ and zero-again/: the bench twice, back to back (how much runs differ)
#   final     zero/ and two-gpus-check.txt (benchmarks/zero_two_gpus.py at one rank, 2 x 2^24)
#   two-gpus  (2 GPUs) zero/ (NCCL rows of 2 ranks, one per GPU) and two-gpus/
#             (benchmarks/zero_two_gpus.py: 2 x 268M AdamW, one rank per GPU)
#   host      info.txt, host/ (vk-adam bench --cases host), tests.txt (the host-import and interop
#             tests under validation), live_weights.txt (examples/interop/live_weights.py)
#   suite     suite.txt: the whole suite and the Lion plugin's under validation
#             ($SUITE_SECONDS, default 520)
#   rest      rest.txt: the ZeRO-1 device and shard tests and the Lion plugin's, under validation
#   verify    info.txt; suite.txt: the whole suite under validation on $WORKERS (default 6) xdist
#             workers, then the tests marked exclusive alone
#   scale     largest-*.json (benchmarks/largest_step.py: 6 * 2^30 fp32 elements on kp tensors and
#             12 * 2^30 bf16 NumPy elements with int8 state, or $LARGEST_BF16; 0 leaves it out),
#             costs.txt and costs/ with COSTS=1 and big.txt and big/ with BIG_STEPS=1 (as in
#             formats), and zero/ (vk-adam bench --cases zero --ranks 2; ZERO=0 leaves it out)
#   bench-main  bench/ (vk-adam bench, the main cases), then the tests marked exclusive, alone
#   boundaries  tests.txt: the NumPy-path tests (host imports, device_params, buffer sets,
#             threaded copies, chunked staging) under validation; staging_chunks.txt/.json
#             (staging_chunks.py: chunked staging against whole buffers); host/ (vk-adam bench
#             --cases host, every NumPy row, DeepSpeed's among them, its op built first); zero/
#             (as in scale; ZERO=0 leaves it out)
#   diagnose  host_paths.json (host_paths.py: the pieces of a NumPy step, each alone) and the
#             largest steps of scale, without zero/
#   formats   formats.log and formats/ (vk-adam bench --cases formats: every storage format with
#             its params on the device; FORMATS=0 leaves it out), bench.log and bench/ with MAIN=1
#             (vk-adam bench, the main cases, in the same run), costs.txt and costs/
#             (format_costs.py: the 8-bit path's parts, patched-harness builds timed against the
#             release; $COST_SIZES, default 24 28; $COST_BUILDS, default all; COST_CHECK=1
#             first compares the exact builds bit for bit; $COST_HARNESS, NAME=PATH harness-file
#             builds, PATH a harness file or a diff of the shipped one; COSTS=0 leaves it
#             out), and with BIG_STEPS=1 big.txt and big/
#             (big_steps.py: large fp32 steps with and without the gradient zeroing, under
#             workgroup caps; $BIG_CONFIGS, $BIG_KNOBS, $BIG_CAPS, $BIG_ZERO); with LARGEST=1,
#             last, largest-fp32.json (scale's fp32 step; it needs an H200's memory):
#             BENCHMARKS.md's H200 figures from one call, MAIN=1 COSTS=0 LARGEST=1 (the kit's
#             install, formats and main bench took 367 s on an H100: results/h100-2026-12-07-release)
#   captured  tests.txt: vk-adam info, then the captured-step tests (capturable=True), the
#             recorded-step, resident-demo and Lion tests under validation; bench/ and bench.log:
#             vk-adam bench (the main cases: captured steps, replay, torch's CUDA graph) and
#             vk-adam bench --cases train
# zero_orders.py (host waits against a timeline semaphore in whole ZeRO-1 steps) runs by hand.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="" out="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --out=*) out="${1#--out=}"; shift ;;
    -h|--help) sed -n '2,/^set -uo/{/^#/p}' "$0" | cut -c3-; exit 0 ;;
    -*) echo "run.sh: unknown option $1 (--out DIR)" >&2; exit 2 ;;
    *) mode="$1"; shift ;;
  esac
done
case "$mode" in
  ""|full|exchange|bench|twice|final|two-gpus|host|suite|rest|verify|scale|bench-main|diagnose|boundaries|captured|formats) ;;
  *) echo "run.sh: unknown mode $mode (full, exchange, bench, twice, final, two-gpus, host, suite, rest, verify, scale, bench-main, diagnose, boundaries, captured, formats)" >&2; exit 2 ;;
esac
OUT="${out:-benchmarks/results/h200-$(date +%F)}"
mkdir -p "$OUT"
echo "outputs in $OUT"
if [ "${PACK:-0}" = 1 ]; then
  pack() {
    local archive; archive="$(mktemp -u /tmp/outputs.XXXXXX).tar.gz"
    tar czf "$archive" -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv "$archive" "$OUT/outputs.tar.gz"
    echo "packed into $OUT/outputs.tar.gz"
  }
  trap pack EXIT
fi
# Test files by name, wherever tests/ keeps them (a name not found stays, for pytest to report).
tests_named() {
  for name in "$@"; do
    found="$(find tests -name "$name.py" -print -quit)"
    echo "${found:-tests/$name.py}"
  done
}

# costs.txt and costs/ (format_costs.py; $COST_SIZES, $COST_BUILDS, $COST_HARNESS, COST_CHECK=1).
costs() {
  local start; start=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${COST_SECONDS:-280}" "$PYTHON" benchmarks/h200/format_costs.py --sizes ${COST_SIZES:-24 28} \
    ${COST_BUILDS:+--builds $COST_BUILDS} ${COST_HARNESS:+--harness $COST_HARNESS} ${COST_CHECK:+--check} \
    --out "$OUT/costs" > "$OUT/costs.txt" 2>&1
  echo "costs rc=$? in $(( $(date +%s) - start )) s"; cat "$OUT/costs.txt"
}
# With BIG_STEPS=1: big.txt and big/ (big_steps.py; $BIG_CONFIGS, $BIG_KNOBS, $BIG_CAPS, $BIG_ZERO).
big_steps() {
  [ "${BIG_STEPS:-0}" = 1 ] || return 0
  local start; start=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${BIG_SECONDS:-150}" "$PYTHON" benchmarks/h200/big_steps.py ${BIG_CONFIGS:+--configs $BIG_CONFIGS} \
    ${BIG_KNOBS:+--knobs $BIG_KNOBS} ${BIG_CAPS:+--caps $BIG_CAPS} ${BIG_ZERO:+--zero-grad $BIG_ZERO} \
    --out "$OUT/big" > "$OUT/big.txt" 2>&1
  echo "big steps rc=$? in $(( $(date +%s) - start )) s"; cat "$OUT/big.txt"
}

export PYTHON=/opt/torch/.venv/bin/python
# the device tool brings back a few files at most: the install log stays on the machine
bash scripts/gpu-kit.sh install > /tmp/install.log 2>&1 || { tail -40 /tmp/install.log; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv \
  > "$OUT/gpu.csv" 2>&1
case "$mode" in
  twice)
    for d in zero zero-again; do
      timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/$d" > "$OUT/$d.log" 2>&1
      echo "bench rc=$?"; tail -11 "$OUT/$d.log"
    done
    exit 0;;
  final|two-gpus)
    timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
    echo "bench rc=$?"; tail -14 "$OUT/zero.log"
    if [ "$mode" = final ]; then
      timeout 120 "$PYTHON" -m torch.distributed.run --nproc-per-node 1 benchmarks/zero_two_gpus.py \
        --elements $((1 << 24)) --out /tmp/two > "$OUT/two-gpus-check.txt" 2>&1
      echo "two-gpus check rc=$?"; tail -12 "$OUT/two-gpus-check.txt"
    else
      timeout 300 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 benchmarks/zero_two_gpus.py \
        --out "$OUT/two-gpus" > "$OUT/two-gpus.log" 2>&1
      echo "two-gpus rc=$?"; tail -14 "$OUT/two-gpus.log"
    fi
    exit 0;;
  host)
    "$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; tail -3 "$OUT/info.txt"
    "$PYTHON" -m vk_adam bench --cases host --out "$OUT/host" > "$OUT/host.log" 2>&1
    echo "bench rc=$?"; sed -n '/^AdamW on NumPy/,$p' "$OUT/host.log" | grep -v '^host:'
    # shellcheck disable=SC2046
    "$PYTHON" -m pytest --vk-validation $(tests_named test_host_import test_interop test_interop_optimizer \
      test_bench_host test_bench_deepspeed) -p no:cacheprovider -q > "$OUT/tests.txt" 2>&1
    tail -3 "$OUT/tests.txt"
    "$PYTHON" examples/interop/live_weights.py --steps 10 > "$OUT/live_weights.txt" 2>&1
    tail -2 "$OUT/live_weights.txt"
    exit 0;;
  boundaries)
    "$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; tail -3 "$OUT/info.txt"
    # shellcheck disable=SC2046
    timeout 70 "$PYTHON" -m pytest --vk-validation $(tests_named test_host_import test_device_params \
      test_allocation_sets test_parallel_copy test_staging_pipeline) -p no:cacheprovider -q > "$OUT/tests.txt" 2>&1
    echo "tests rc=$?"; tail -3 "$OUT/tests.txt"
    timeout 90 "$PYTHON" benchmarks/h200/staging_chunks.py --out "$OUT" > "$OUT/staging_chunks.txt" 2>&1
    echo "staging chunks rc=$?"; cat "$OUT/staging_chunks.txt"
    # DeepSpeed's CPU Adam op builds on first use: build it here, apart from the bench's clock
    start=$(date +%s)
    timeout 110 "$PYTHON" -c "import torch; from deepspeed.ops.adam import DeepSpeedCPUAdam as A; \
A([torch.nn.Parameter(torch.zeros(8))])" > "$OUT/deepspeed-build.log" 2>&1
    echo "deepspeed op build rc=$? in $(( $(date +%s) - start )) s"; tail -2 "$OUT/deepspeed-build.log"
    timeout "${HOST_SECONDS:-220}" "$PYTHON" -m vk_adam bench --cases host --repeats 10 --warmup 2 \
      --out "$OUT/host" > "$OUT/host.log" 2>&1
    echo "bench rc=$?"; sed -n '/^AdamW on NumPy/,$p' "$OUT/host.log" | grep -v '^host:'
    [ "${ZERO:-1}" = 0 ] && exit 0
    timeout 110 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
    echo "zero rc=$?"; tail -16 "$OUT/zero.log"
    exit 0;;
  formats)
    if [ "${FORMATS:-1}" = 1 ]; then
      start=$(date +%s)
      timeout 300 "$PYTHON" -m vk_adam bench --cases formats --out "$OUT/formats" > "$OUT/formats.log" 2>&1
      echo "formats rc=$? in $(( $(date +%s) - start )) s"; cat "$OUT/formats/formats.md"
    fi
    if [ "${MAIN:-0}" = 1 ]; then  # the main cases, in the same run as the formats
      start=$(date +%s)
      timeout "${BENCH_SECONDS:-260}" "$PYTHON" -m vk_adam bench --cases auto --repeats 20 --warmup 3 \
        --cpu-max-elements 0 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
      echo "bench rc=$? in $(( $(date +%s) - start )) s"; sed -n '/^| case/,$p' "$OUT/bench.log" | tail -40
    fi
    [ "${COSTS:-1}" = 1 ] && costs
    big_steps
    if [ "${LARGEST:-0}" = 1 ]; then
      timeout "${LARGEST_SECONDS:-230}" "$PYTHON" benchmarks/largest_step.py --elements $((6 << 30)) \
        --out "$OUT" > "$OUT/largest-fp32.log" 2>&1
      echo "largest rc=$?"; grep -v '^ *"memory_bytes\|^ *"\(param\|grad\|master\|state\|absmax\|other\)"' "$OUT/largest-fp32.log" | tail -30
    fi
    exit 0;;
  suite)
    timeout "${SUITE_SECONDS:-520}" "$PYTHON" -m pytest --vk-validation tests plugins/vk-adam-lion/tests \
      -p no:cacheprovider -q > "$OUT/suite.txt" 2>&1
    echo "suite rc=$?"; tail -8 "$OUT/suite.txt"
    exit 0;;
  verify)
    "$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; cat "$OUT/info.txt"
    start=$(date +%s)
    timeout "${SUITE_SECONDS:-420}" "$PYTHON" -m pytest --vk-validation -n "${WORKERS:-6}" -m "not exclusive" \
      tests plugins/vk-adam-lion/tests -p no:cacheprovider -q > "$OUT/suite.txt" 2>&1
    echo "suite rc=$? in $(( $(date +%s) - start )) s"; tail -12 "$OUT/suite.txt"
    [ "${EXCLUSIVE:-1}" = 0 ] && exit 0  # the exclusive tests take minutes: bench-main runs them too
    start=$(date +%s)
    timeout 150 "$PYTHON" -m pytest --vk-validation -p no:xdist -m exclusive tests plugins/vk-adam-lion/tests \
      -p no:cacheprovider -q > "$OUT/suite-exclusive.txt" 2>&1
    echo "exclusive rc=$? in $(( $(date +%s) - start )) s"; tail -8 "$OUT/suite-exclusive.txt"
    exit 0;;
  scale|diagnose)
    "$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; grep -A4 "^\*" "$OUT/info.txt"
    if [ "$mode" = diagnose ]; then
      timeout 150 "$PYTHON" benchmarks/h200/host_paths.py --out "$OUT" > "$OUT/host_paths.log" 2>&1
      echo "host_paths rc=$?"; tail -5 "$OUT/host_paths.log"
    fi
    # fp32: 6 * 2^30 elements in 8 kp tensors of 3 GiB (within maxMemoryAllocationSize); bf16 +
    # int8: twice that in 16 NumPy arrays (the host holds the arrays, 48 GiB, and vk-adam's param
    # and gradient staging copies, 48 GiB more)
    # LARGEST_BF16=0 leaves the bf16 + int8 step out
    runs=("--elements $((6 << 30))")
    [ "${LARGEST_BF16:-}" = 0 ] || runs+=("--elements ${LARGEST_BF16:-$((12 << 30))} --parts 16 --bf16-int8")
    for run in "${runs[@]}"; do
      # shellcheck disable=SC2086
      timeout "${LARGEST_SECONDS:-230}" "$PYTHON" benchmarks/largest_step.py $run \
        --out "$OUT" > "$OUT/largest-${run##* }.log" 2>&1
      echo "largest $run rc=$?"; grep -v '^ *"memory_bytes\|^ *"\(param\|grad\|master\|state\|absmax\|other\)"' "$OUT/largest-${run##* }.log" | tail -30
    done
    [ "${COSTS:-0}" = 1 ] && costs
    big_steps
    { [ "$mode" = diagnose ] || [ "${ZERO:-1}" = 0 ]; } && exit 0
    timeout 130 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
    echo "zero rc=$?"; tail -16 "$OUT/zero.log"
    exit 0;;
  bench-main)
    timeout 230 "$PYTHON" -m vk_adam bench --out "$OUT/bench" > "$OUT/bench.log" 2>&1
    echo "bench rc=$?"; tail -30 "$OUT/bench.log"
    start=$(date +%s)
    timeout "${EXCLUSIVE_SECONDS:-260}" "$PYTHON" -m pytest --vk-validation -p no:xdist -m exclusive tests \
      plugins/vk-adam-lion/tests -p no:cacheprovider -q > "$OUT/suite-exclusive.txt" 2>&1
    echo "exclusive rc=$? in $(( $(date +%s) - start )) s"; tail -8 "$OUT/suite-exclusive.txt"
    exit 0;;
  captured)
    # at most 8 files come back from the device tool: gpu.csv, tests.txt (info first), bench.log
    # (both benches), bench/ (bench.json, .md, .png; train.json, .md)
    { "$PYTHON" -m vk_adam info; echo; } > "$OUT/tests.txt" 2>&1; grep -A3 "^\*" "$OUT/tests.txt" | head -8
    start=$(date +%s)
    # shellcheck disable=SC2046
    timeout "${TESTS_SECONDS:-150}" "$PYTHON" -m pytest --vk-validation -n 4 $(tests_named test_capturable \
      test_capturable_rules test_back_to_back test_resident_demo test_bench_captured) plugins/vk-adam-lion/tests \
      -p no:cacheprovider -q >> "$OUT/tests.txt" 2>&1
    echo "tests rc=$? in $(( $(date +%s) - start )) s"; tail -6 "$OUT/tests.txt"
    timeout "${BENCH_SECONDS:-260}" "$PYTHON" -m vk_adam bench --cases auto --repeats 20 --warmup 3 \
      --cpu-max-elements 0 --out "$OUT/bench" > "$OUT/bench.log" 2>&1
    echo "bench rc=$?"; sed -n '/^| case/,$p' "$OUT/bench.log" | tail -40
    timeout "${TRAIN_SECONDS:-100}" "$PYTHON" -m vk_adam bench --cases train --out "$OUT/bench" >> "$OUT/bench.log" 2>&1
    echo "train rc=$?"; tail -12 "$OUT/bench.log"
    exit 0;;
  rest)
    # shellcheck disable=SC2046
    timeout 170 "$PYTHON" -m pytest --vk-validation $(tests_named test_zero1_device test_zero1_shard) \
      plugins/vk-adam-lion/tests -p no:cacheprovider -q > "$OUT/rest.txt" 2>&1
    echo "rest rc=$?"; tail -4 "$OUT/rest.txt"
    exit 0;;
esac
C="$HERE/collectives.py"
if [ "$mode" != bench ]; then
  # shellcheck disable=SC2046
  timeout 150 "$PYTHON" -m pytest --vk-validation $(tests_named test_cuda_interop \
    test_zero1_vulkan_collectives test_timeline_semaphores) -p no:cacheprovider -q -rs > "$OUT/cuda-tests.txt" 2>&1
  echo "cuda tests rc=$?"; tail -12 "$OUT/cuda-tests.txt"
fi
if [ "$mode" = full ]; then
  timeout 60 "$PYTHON" - > "$OUT/handover.txt" 2>&1 <<'PY'
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
  cat "$OUT/handover.txt"
fi
if [ "$mode" = exchange ] || [ "$mode" = bench ]; then
  timeout 200 "$PYTHON" -m vk_adam bench --cases zero --ranks 2 --out "$OUT/zero" > "$OUT/zero.log" 2>&1
  echo "bench rc=$?"; tail -16 "$OUT/zero.log"
  timeout 90 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$C" > "$OUT/collectives.txt" 2>&1
  timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root "$PYTHON" "$C" mpi >> "$OUT/collectives.txt" 2>&1
  grep "ms$" "$OUT/collectives.txt"
  [ "$mode" = bench ] && exit 0
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
if [ "$mode" = full ]; then
  timeout 60 "$PYTHON" "$HERE/profile_nccl.py" > "$OUT/profile.txt" 2>&1
  echo "profile rc=$?"; head -12 "$OUT/profile.txt"
fi
timeout 60 "$PYTHON" "$HERE/semaphores.py" > "$OUT/semaphores.txt" 2>&1
echo "semaphores rc=$?"; cat "$OUT/semaphores.txt"
timeout 90 "$PYTHON" "$HERE/interop_costs.py" > "$OUT/costs.txt" 2>&1
echo "costs rc=$?"; cat "$OUT/costs.txt"
if [ "$mode" = full ]; then
  timeout 90 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$HERE/profile_gloo.py" \
    > "$OUT/profile-gloo.txt" 2>&1
  echo "profile-gloo rc=$?"; grep -A30 "host staging" "$OUT/profile-gloo.txt" | head -34
  timeout 60 "$PYTHON" -m torch.distributed.run --nproc-per-node 2 "$C" > "$OUT/collectives.txt" 2>&1
  timeout 60 mpirun -n 2 --oversubscribe --allow-run-as-root "$PYTHON" "$C" mpi >> "$OUT/collectives.txt" 2>&1
  grep "ms$" "$OUT/collectives.txt"
fi
true
