#!/usr/bin/env bash
# The ZeRO-1 example (examples/zero1/train.py): set-up (idempotent, with the test extra: torch,
# mpi4py, Open MPI), then a 2-rank fine-tune on this machine's Vulkan device (lavapipe without a GPU).
# Usage: bash scripts/zero1-demo.sh [--mpi] [train.py options, e.g. --steps 300]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh test
PY="${VK_ADAM_VENV:-$ROOT/.venv}/bin/python"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" LP_NUM_THREADS="${LP_NUM_THREADS:-1}"
if [ "${1:-}" = "--mpi" ]; then
  shift
  ROOT_FLAG=(); [ "$(id -u)" -eq 0 ] && ROOT_FLAG=(--allow-run-as-root)
  # python -m mpi4py: an exception on any rank aborts the whole job
  exec mpirun "${ROOT_FLAG[@]}" --oversubscribe -n 2 "$PY" -m mpi4py examples/zero1/train.py "$@"
fi
PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
exec "$PY" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$PORT" \
  examples/zero1/train.py "$@"
