#!/usr/bin/env bash
# The test command: set-up (idempotent), the Lion plugin installed as a user would, then
# ruff (lint + format check), mypy, and pytest on lavapipe (or whatever Vulkan device exists).
#
# `bash scripts/test.sh --quick`: the developer's loop, in the environment already set up: ruff,
# mypy and `pytest -m "not slow"` (no multi-process, thousand-cycle or build tests; no set-up,
# no validation layer). Other arguments go to pytest in both modes. `.ci/run` runs everything.
#
# pytest runs on every core (pytest-xdist, `-n $VK_ADAM_TEST_WORKERS`, default auto: one worker
# per core, each validating into its own log); the tests marked `exclusive` (timings, memory of
# the whole process, many processes, thousands of cycles) run afterwards, alone. One seed drives
# both runs: $VK_ADAM_TEST_SEED, else a fresh one, printed here (tests/conftest.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
if [ "${1:-}" = "--quick" ]; then
  shift
  echo "== ruff"
  "$PY" -m ruff check .
  "$PY" -m ruff format --check .
  echo "== mypy"
  "$PY" -m mypy
  echo "== pytest (not slow)"
  # the registry tests need the Lion plugin installed, as the full command installs it (once here)
  if ! "$PY" -c "import vk_adam_lion" 2>/dev/null; then
    "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./plugins/vk-adam-lion
  fi
  parallel=()
  "$PY" -c "import xdist" 2>/dev/null && parallel=(-n "${VK_ADAM_TEST_WORKERS:-auto}")
  exec "$PY" -m pytest "${parallel[@]}" -m "not slow" tests plugins/vk-adam-lion/tests "$@"
fi
bash scripts/setup.sh test
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
# The test command only: Khronos validation layers (the suite runs under core + synchronization
# validation: `pytest --vk-validation`, vk-adam's pytest plugin), and the stock kp 0.9.0, built once,
# for the fallback tests.
if ! dpkg-query -W -f='${Status}' vulkan-validationlayers 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends vulkan-validationlayers >/dev/null
fi
STOCK_WHEEL="$(bash scripts/build-kp.sh --stock --python "$PY" --cache "$CACHE")"
export VK_ADAM_STOCK_KP="$ROOT/.stock-kp"
if [ "$(cat "$VK_ADAM_STOCK_KP/.wheel" 2>/dev/null)" != "$STOCK_WHEEL" ]; then
  rm -rf "$VK_ADAM_STOCK_KP"
  "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$VK_ADAM_STOCK_KP" "$STOCK_WHEEL"
  echo "$STOCK_WHEEL" > "$VK_ADAM_STOCK_KP/.wheel"
fi
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
# --vk-validation: a missing layer is an error, and a test fails if the layer reported anything.
export VK_ADAM_TEST_SEED="${VK_ADAM_TEST_SEED:-$("$PY" -c 'import secrets; print(secrets.randbits(32))')}"
echo "test seed: VK_ADAM_TEST_SEED=$VK_ADAM_TEST_SEED (a failing test prints the command that replays it)"
# Exit 5 (no test selected) is fine for one of the two runs (arguments that select only one kind).
status=0
"$PY" -m pytest --vk-validation -n "${VK_ADAM_TEST_WORKERS:-auto}" -m "not exclusive" \
  tests plugins/vk-adam-lion/tests "$@" || status=$?
echo "== pytest: the exclusive tests, alone"
alone=0
"$PY" -m pytest --vk-validation -p no:xdist -m exclusive tests plugins/vk-adam-lion/tests "$@" || alone=$?
if [ "$status" -eq 5 ] && [ "$alone" -ne 5 ]; then status=$alone
elif [ "$alone" -ne 0 ] && [ "$alone" -ne 5 ] && [ "$status" -eq 0 ]; then status=$alone
fi
exit "$status"
