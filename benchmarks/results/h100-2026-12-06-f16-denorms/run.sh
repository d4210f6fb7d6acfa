#!/usr/bin/env bash
# One device call: the float-controls probe, vk-adam info, the fp16 denormals tests under
# validation, the formats and main benches, and format_costs against harness 9 as released (the exact test).
set -u
cd "$(dirname "$0")/.."
mkdir -p .dev && ln -sfn ../../kit .dev/kit
nvidia-smi -L | tee "$OUT/card.txt"
# The main bench only on an H200 (BENCHMARKS.md takes both benches from one H200 run).
main=0; grep -q H200 "$OUT/card.txt" && main=1
export PYTHON=/opt/torch/.venv/bin/python
bash scripts/gpu-kit.sh install > /tmp/install.log 2>&1 || { tail -40 /tmp/install.log; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
gcc extra/float_controls.c -o /tmp/fc -lvulkan && /tmp/fc > "$OUT/float_controls.txt" 2>&1; cat "$OUT/float_controls.txt"
"$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; grep -i "fp16\|8-bit\|kp " "$OUT/info.txt"
timeout 90 "$PYTHON" -m pytest --vk-validation -q -rs -p no:cacheprovider tests/optim/test_f16_denorms.py \
  > "$OUT/tests.txt" 2>&1
echo "f16 tests rc=$?"; tail -5 "$OUT/tests.txt"
FORMATS=1 MAIN=$main COSTS=1 COST_CHECK=1 COST_BUILDS="release" COST_HARNESS="harness9=extra/h9.glsl" \
  COST_SECONDS=200 bash benchmarks/h200/run.sh formats --out "$OUT"
# At most 8 files come back: everything in one archive, and the short texts beside it.
cd "$OUT" && tar -czf all.tgz --exclude=all.tgz . && find . -mindepth 1 -maxdepth 1 ! -name all.tgz ! -name card.txt \
  ! -name tests.txt ! -name costs.txt ! -name float_controls.txt ! -name info.txt -exec rm -rf {} + ; ls -la "$OUT"
