#!/usr/bin/env bash
# Session 26, run 3: the whole suite on the H200 under the validation layers (core +
# synchronization), on this session's release (fp16 SR fast path, leaner host path).
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run15.sh $OUT/run.sh
t suite
left=$(( 585 - ($(date +%s) - T0) ))
timeout $left bash scripts/gpu-kit.sh test .dev/kit -q -p no:cacheprovider -rfEs > $OUT/suite.log 2>&1
echo "suite rc=$?"; tail -25 $OUT/suite.log
t done
