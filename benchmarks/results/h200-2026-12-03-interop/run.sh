#!/usr/bin/env bash
# H200 (device tool): the kit's install, then vk-adam info, the interop tests and the two-process
# example under validation, then the whole suite under validation with what time is left.
# Outputs under $OUT.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python
bash scripts/gpu-kit.sh install > "$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
eval "$(bash scripts/gpu-kit.sh env .dev/kit)"
"$PYTHON" -m vk_adam info > "$OUT/info.txt" 2>&1; cat "$OUT/info.txt"
"$PYTHON" -m pytest --vk-validation tests/test_interop.py -p no:cacheprovider -q > "$OUT/interop-tests.txt" 2>&1
tail -3 "$OUT/interop-tests.txt"
"$PYTHON" examples/interop/live_weights.py --steps 10 > "$OUT/live_weights.txt" 2>&1; tail -2 "$OUT/live_weights.txt"
timeout "${SUITE_SECONDS:-330}" "$PYTHON" -m pytest --vk-validation tests plugins/vk-adam-lion/tests \
  -p no:cacheprovider -q > "$OUT/suite.txt" 2>&1
echo "suite rc=$?"; tail -5 "$OUT/suite.txt"
