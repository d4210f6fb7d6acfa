#!/usr/bin/env bash
# The main command: set-up (idempotent), then `vk-adam ARGS` (default: the LoRA demo).
#   bash scripts/vk-adam.sh demo          # LoRA fine-tune, writes vk-adam-out/
#   bash scripts/vk-adam.sh bench         # benchmarks, writes vk-adam-bench/
#   bash scripts/vk-adam.sh info          # Vulkan devices
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" >&2
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
# torch is optional for the demo and bench (comparison runs); the test extra installs it.
if [ $# -eq 0 ]; then set -- demo; fi
exec "$VENV/bin/vk-adam" "$@"
