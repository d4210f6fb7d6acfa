#!/usr/bin/env bash
# Device run 1: set-up, heap growth of optimizer cycles (RSS, glibc heap, tracemalloc, heaptrack
# differential), host cost vs fence spin.
set -uo pipefail
export PYTHON=/opt/torch/.venv/bin/python PYTHONUNBUFFERED=1
T0=$(date +%s); t() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
t setup
bash scripts/gpu-kit.sh install .dev/kit > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
source <(bash scripts/gpu-kit.sh env .dev/kit)
$PYTHON -m vk_adam info 2>&1 | head -20
mkdir -p /tmp/ht; for f in .dev/ht/*.deb; do dpkg -x $f /tmp/ht; done
HT="env LD_LIBRARY_PATH=/tmp/ht/usr/lib/x86_64-linux-gnu /tmp/ht/usr/bin"
t heap-growth 10000
$PYTHON benchmarks/lifecycle/probe.py heap-growth --n 10000 --out $OUT/heap.jsonl | tail -3
t heap-growth tracemalloc 3000
PROBE_TRACEMALLOC=8 timeout 120 $PYTHON benchmarks/lifecycle/probe.py heap-growth --n 3000 --out $OUT/heap.jsonl | tail -3
for n in 500 3000; do
  t heaptrack $n
  PROBE_HARD_EXIT=1 timeout 150 $HT/heaptrack -o /tmp/ht-$n $PYTHON benchmarks/lifecycle/probe.py heap-growth --n $n --child > /tmp/ht-$n.out 2>&1
  tail -4 /tmp/ht-$n.out
  $HT/heaptrack_print -l 1 -p 0 -a 0 -T 0 -n 40 -s 12 /tmp/ht-$n.zst > /tmp/ht-$n.txt 2>&1
  grep -A2000 "MEMORY LEAKS" /tmp/ht-$n.txt | head -c 4000000 > $OUT/ht-$n.txt; tail -8 /tmp/ht-$n.txt
done
for spin in 200 3000; do
  t host_cost spin $spin
  KOMPUTE_FENCE_SPIN_US=$spin timeout 100 $PYTHON benchmarks/host_cost.py --elements 1024 4194304 16777216 268435456 --repeats 100 | tee -a $OUT/host_cost.jsonl
done
t done
