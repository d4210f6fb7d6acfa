#!/usr/bin/env bash
# Session 26, run 1: the same-results probes (fp16 SR fast path, lean quantizer, both), the SR
# hash's cost, ablations and workgroup caps on the current 8-bit loop at 16.8M with pipeline
# stats; the promising probe at 268M; host cost; tiny sync step.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
cp .dev/run13.sh $OUT/run.sh
sh benchmarks/pipeline_stats/build.sh > $OUT/tools.log 2>&1
nvidia-smi --query-gpu=clocks.sm,clocks.mem,utilization.gpu --format=csv > $OUT/smi.txt 2>&1
t qc 16.8M
timeout 230 $PYTHON benchmarks/quantizer_cost.py --elements 16777216 --rounds 25 \
  --pipeline-stats ./benchmarks/pipeline_stats/pipeline_stats \
  --builds "fp16 SR fast path" "lean quantizer" "fp16 SR fast path, lean quantizer" "no SR hash" \
           "no-quantizer" "no-absmax" "none of the three" \
  --knobs "wg792=VK_ADAM_INT8_WORKGROUPS=792" --knobs "wg1584=VK_ADAM_INT8_WORKGROUPS=1584" \
  --knobs "one pass=VK_ADAM_INT8_WORKGROUPS=65535" > $OUT/qc16.jsonl 2> $OUT/qc16.err
echo rc=$?; cut -c1-260 $OUT/qc16.jsonl; tail -3 $OUT/qc16.err
t qc 268M
timeout 150 $PYTHON benchmarks/quantizer_cost.py --elements 268435456 --rounds 6 \
  --builds "fp16 SR fast path, lean quantizer" \
  --configs "fp32 params, int8 state" "bf16 params (SR), int8 state" "fp16 params (SR), int8 state" > $OUT/qc268.jsonl 2> $OUT/qc268.err
echo rc=$?; cut -c1-260 $OUT/qc268.jsonl; tail -3 $OUT/qc268.err
t host_cost; timeout 70 $PYTHON benchmarks/host_cost.py > $OUT/host_cost.jsonl 2>&1; tail -5 $OUT/host_cost.jsonl
t tiny; timeout 50 $PYTHON -m vk_adam bench --quiet --cpu-max-elements 0 --repeats 200 --cases tiny --out $OUT/bench > $OUT/bench.log 2>&1
grep -E "tiny|bare" $OUT/bench.log
t done
