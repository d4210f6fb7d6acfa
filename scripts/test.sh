#!/usr/bin/env bash
# The test command: set-up (idempotent), the Lion plugin installed as a user would, then
# ruff (lint + format check), mypy, and pytest on lavapipe (or whatever Vulkan device exists).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh test
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
# The plugin's build compiles its GLSL with vk-adam's shader driver, so it builds against
# this environment (no build isolation).
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./plugins/vk-adam-lion
echo "== ruff"
"$PY" -m ruff check .
"$PY" -m ruff format --check .
echo "== mypy"
"$PY" -m mypy
echo "== pytest"
"$PY" -m vk_adam info
"$PY" -m pytest tests plugins/vk-adam-lion/tests "$@"
