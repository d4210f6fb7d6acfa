#!/usr/bin/env bash
# Device run 4: the whole suite under core + synchronization validation (docs/gpu-testing.md).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > /tmp/setup.log 2>&1 || { tail -30 /tmp/setup.log; exit 1; }
t suite
set -o pipefail
timeout 500 bash scripts/gpu-kit.sh test .dev/kit -q -p no:cacheprovider 2>&1 | tee $OUT/suite.txt | tail -40
t done
