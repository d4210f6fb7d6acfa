#!/usr/bin/env bash
# Build kp 0.9.0 (Kompute's Python package) as a wheel, offline, with vk-adam's patch series.
#
#   bash scripts/build-kp.sh [--stock] [--sdist FILE] [--python PY] [--cache DIR]
#
# The PyPI sdist (sha256-pinned below) gets kp-patches/*.patch applied in order; the wheel is
# kp-0.9.0+vkadam.N. `--stock` builds the release as published (no patches), which vk-adam
# still supports through a slower fallback path, and which the test suite covers.
# Wheels are cached under DIR/kp-<variant>-<key>/, where the key hashes the patch series, the
# build recipe (this script) and the Python tag: editing a patch can never reuse a stale wheel.
# Prints the wheel's path on stdout; progress goes to stderr.
#
# Why build at all: PyPI has no kp 0.9.0 wheel, and kp's own CMake downloads Vulkan-Headers,
# fmt and pybind11 from GitHub. A CMake toolchain file (read from CMAKE_TOOLCHAIN_FILE) turns
# every download off and uses the system's Vulkan headers and fmt and PyPI's pybind11 3.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KP_VERSION=0.9.0
KP_SDIST_SHA256=98e583dc6e9731ff6d7a3e3317817e4d93f7b2945929619e29a56325db279949
VARIANT=patched
SDIST=""
PY="${PYTHON:-python3}"
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
while [ $# -gt 0 ]; do
  case "$1" in
    --stock) VARIANT=stock ;;
    --sdist) SDIST="$2"; shift ;;
    --python) PY="$2"; shift ;;
    --cache) CACHE="$2"; shift ;;
    *) echo "build-kp.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[build-kp] %s\n' "$*" >&2; }
PY="$(cd "$(dirname "$(command -v "$PY")")" && pwd)/$(basename "$PY")"  # CMake runs elsewhere

pytag="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
patches=()
if [ "$VARIANT" = patched ]; then
  patches=("$ROOT"/kp-patches/*.patch)
fi
key="$( { cat "${BASH_SOURCE[0]}"; echo "$pytag"; for p in "${patches[@]}"; do cat "$p"; done; } | sha256sum | cut -c1-16)"
dest="$CACHE/kp-$VARIANT-$key"
wheel="$(ls "$dest"/kp-*.whl 2>/dev/null | head -1 || true)"
if [ -n "$wheel" ]; then
  echo "$wheel"
  exit 0
fi

log "building kp $KP_VERSION ($VARIANT, ${#patches[@]} patches) for $pytag: a few minutes, done once"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -z "$SDIST" ]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "kp==$KP_VERSION" -d "$work"
  SDIST="$work/kp-$KP_VERSION.tar.gz"
fi
echo "$KP_SDIST_SHA256  $SDIST" | sha256sum -c --quiet - >&2 || {
  log "$SDIST is not the kp $KP_VERSION sdist this project pins (sha256 $KP_SDIST_SHA256)"
  exit 1
}
tar -xzf "$SDIST" -C "$work"
src="$work/kp-$KP_VERSION"
for p in "${patches[@]}"; do
  log "applying $(basename "$p")"
  git -C "$src" apply -p1 --whitespace=nowarn "$p" || {
    log "patch $(basename "$p") does not apply to the pinned sdist"
    exit 1
  }
done

cat > "$work/offline.cmake" <<CMAKE
set(KOMPUTE_OPT_USE_BUILT_IN_VULKAN_HEADER OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_USE_BUILT_IN_FMT OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_USE_BUILT_IN_PYBIND11 OFF CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_DISABLE_VULKAN_VERSION_CHECK ON CACHE BOOL "" FORCE)
set(KOMPUTE_OPT_INSTALL OFF CACHE BOOL "" FORCE)
set(FETCHCONTENT_FULLY_DISCONNECTED ON CACHE BOOL "" FORCE)
# Stock setup.py glues -DPYTHON_EXECUTABLE onto the previous flag: name the interpreter here.
set(PYTHON_EXECUTABLE "$PY" CACHE FILEPATH "" FORCE)
set(Python_EXECUTABLE "$PY" CACHE FILEPATH "" FORCE)
CMAKE
# The build needs setuptools, wheel and pybind11 3 in this environment (an offline machine must
# already have them).
"$PY" -c 'import setuptools, wheel, pybind11; assert int(pybind11.__version__.split(".")[0]) >= 3' 2>/dev/null ||
  "$PY" -m pip install -q --disable-pip-version-check setuptools wheel "pybind11>=3"
jobs=()
# The patched setup.py passes the job count through; the stock one would split "16" into "1" "6".
[ "$VARIANT" = patched ] && jobs=(KOMPUTE_PYTHON_NUM_PARALLEL_THREADS="$(nproc)")
env "${jobs[@]}" CMAKE_TOOLCHAIN_FILE="$work/offline.cmake" \
  pybind11_DIR="$("$PY" -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
  "$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation "$src" -w "$work/dist" >&2
mkdir -p "$dest"
cp "$work"/dist/kp-*.whl "$dest/"
ls "$dest"/kp-*.whl | head -1
