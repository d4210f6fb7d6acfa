#!/usr/bin/env bash
# One-time, idempotent set-up for vk-adam on a Debian machine:
#   1. Debian packages (Vulkan loader + lavapipe, shader compiler/validator, kp's build needs)
#   2. a virtual environment in .venv
#   3. kp 0.9.0 built offline from its hash-pinned PyPI sdist with vk-adam's patch series
#      (kp-patches/, applied by scripts/build-kp.sh), cached as a wheel under
#      ${VK_ADAM_CACHE:-~/.cache/vk-adam}, keyed by the patches' hash, so later runs do not rebuild it
#   4. vk-adam itself (editable; its build hook compiles glsl/ to SPIR-V) with its `demo` extra
#      (matplotlib, tqdm: `vk-adam demo` and `vk-adam bench`), and an optional further extra.
# Usage: bash scripts/setup.sh [extra]      e.g. `bash scripts/setup.sh test`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
log() { printf '[setup] %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------------------
DEB_PACKAGES=(mesa-vulkan-drivers glslang-tools spirv-tools libvulkan-dev libfmt-dev cmake g++ vulkan-tools)
# The test extra brings mpi4py (ZeRO-1 over MPI, tests/distributed/test_zero1.py): Open MPI's mpirun and library.
[ "${1:-}" = "test" ] && DEB_PACKAGES+=(openmpi-bin libopenmpi-dev)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. virtual environment -----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
VPY="$VENV/bin/python"
pipq() { "$VPY" -m pip install -q --disable-pip-version-check "$@"; }

# --- 3. kp: vk-adam's patched build, made offline once and cached (scripts/build-kp.sh) ---------
KP_WHEEL="$(bash "$ROOT/scripts/build-kp.sh" --python "$VPY" --cache "$CACHE")"
if [ "$(cat "$VENV/.kp-wheel" 2>/dev/null)" != "$KP_WHEEL" ] || ! "$VPY" -c 'import kp' 2>/dev/null; then
  # --no-deps: the wheel is all kp needs (NumPy comes with vk-adam).
  pipq --no-deps --force-reinstall "$KP_WHEEL"
  echo "$KP_WHEEL" > "$VENV/.kp-wheel"
fi

# --- 4. vk-adam (editable: the build hook compiles glsl/ to SPIR-V) ----------------------------
pipq hatchling editables
spec=".[demo]"; [ $# -gt 0 ] && spec=".[demo,$1]"
pipq --no-build-isolation -e "$spec"
log "ready: $VENV"
