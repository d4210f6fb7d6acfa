#!/usr/bin/env bash
# One-time, idempotent set-up for vk-adam on a Debian machine:
#   1. Debian packages (Vulkan loader + lavapipe, shader compiler/validator, kp's build needs)
#   2. a virtual environment in .venv
#   3. kp 0.9.0 built offline from its PyPI sdist (its default build fetches from GitHub),
#      cached as a wheel under ${VK_ADAM_CACHE:-~/.cache/vk-adam} so later runs do not rebuild it
#   4. vk-adam itself (editable; its build hook compiles glsl/ to SPIR-V), with an optional extra.
# Usage: bash scripts/setup.sh [extra]      e.g. `bash scripts/setup.sh test`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
KP_VERSION=0.9.0
log() { printf '[setup] %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------------------
DEB_PACKAGES=(mesa-vulkan-drivers glslang-tools spirv-tools libvulkan-dev libfmt-dev cmake g++ vulkan-tools)
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

# --- 3. kp, built offline once and cached -------------------------------------------------------
pyver="$("$VPY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
KP_WHEEL="$(ls "$CACHE"/kp-"$KP_VERSION"-"$pyver"-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$KP_WHEEL" ]; then
  log "building kp $KP_VERSION from its sdist (offline recipe; a few minutes, done once)"
  mkdir -p "$CACHE"
  work="$(mktemp -d)"
  pipq setuptools wheel "pybind11>=3" numpy
  "$VPY" -m pip download -q --no-deps --no-binary :all: "kp==$KP_VERSION" -d "$work"
  # kp's setup.py writes its own CMake command line; CMake >= 3.21 reads this toolchain file
  # from the environment, which turns off every download (Vulkan-Headers, fmt, pybind11).
  cat > "$work/offline.cmake" <<'CMAKE'
set(KOMPUTE_OPT_USE_BUILT_IN_VULKAN_HEADER OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_USE_BUILT_IN_FMT OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_USE_BUILT_IN_PYBIND11 OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_DISABLE_VULKAN_VERSION_CHECK ON CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_INSTALL OFF CACHE BOOL "" FORCE)
set(FETCHCONTENT_FULLY_DISCONNECTED ON CACHE BOOL "" FORCE)
CMAKE
  # setup.py glues -DPYTHON_EXECUTABLE onto the previous flag (a missing comma), so pybind11
  # would pick whatever python3.x is first on PATH: name the venv's interpreter here instead.
  printf 'set(PYTHON_EXECUTABLE "%s" CACHE FILEPATH "" FORCE)\nset(Python_EXECUTABLE "%s" CACHE FILEPATH "" FORCE)\n' \
    "$VPY" "$VPY" >> "$work/offline.cmake"
  CMAKE_TOOLCHAIN_FILE="$work/offline.cmake" \
  pybind11_DIR="$("$VPY" -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
    "$VPY" -m pip wheel -q --no-deps --no-build-isolation "$work/kp-$KP_VERSION.tar.gz" -w "$work/dist"
  cp "$work"/dist/kp-*.whl "$CACHE/"
  rm -rf "$work"
  KP_WHEEL="$(ls "$CACHE"/kp-"$KP_VERSION"-"$pyver"-*.whl | head -1)"
fi
if ! "$VPY" -c 'import kp' 2>/dev/null; then
  # --no-deps: kp's metadata pins numpy<2, but the module built against pybind11 3 works with NumPy 2.
  pipq --no-deps "$KP_WHEEL"
fi

# --- 4. vk-adam (editable: the build hook compiles glsl/ to SPIR-V) ----------------------------
pipq hatchling editables
spec="."; [ $# -gt 0 ] && spec=".[$1]"
pipq --no-build-isolation -e "$spec"
log "ready: $VENV"
