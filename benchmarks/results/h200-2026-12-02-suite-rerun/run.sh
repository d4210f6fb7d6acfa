#!/usr/bin/env bash
# Device run 8: the whole suite on the H200 under core + synchronization validation.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks_throttle_reasons.active --format=csv > $OUT/gpu.txt 2>&1
t suite
left=$(( 575 - ($(date +%s) - T0) ))
timeout $left bash scripts/gpu-kit.sh test .dev/kit -q -p no:cacheprovider -rfEs > $OUT/suite.log 2>&1
echo "rc=$?"; tail -40 $OUT/suite.log
t done
