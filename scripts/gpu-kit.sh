#!/usr/bin/env bash
# Run vk-adam's suite on a GPU machine that has no network (see docs/gpu-testing.md).
#
#   bash scripts/gpu-kit.sh download [DIR]   on a networked Debian 12 machine: fetch into DIR
#                                            (default .dev/kit) the Debian packages, wheels and
#                                            kp's sdist the GPU machine lacks
#   bash scripts/gpu-kit.sh install  [DIR]   on the GPU machine (root): unpack the packages, install
#                                            the wheels, build the patched kp and vk-adam (editable)
#                                            into $PYTHON (default python3), and DeepSpeed without
#                                            its ops (DS_BUILD_OPS=0) where it can (the host bench's
#                                            DeepSpeedCPUAdam row; skipped with the reason if not)
#   source <(bash scripts/gpu-kit.sh env [DIR])   the environment later commands need there
#   bash scripts/gpu-kit.sh test [DIR] [PYTEST ARGS]   there: the whole suite under Khronos core +
#                                            synchronization validation (as scripts/test.sh)
#
# The GPU machine must already have Python 3, NumPy and the vendor's Vulkan driver (its ICD json);
# it needs neither a Vulkan loader nor a compiler package from Debian: the loader, the Khronos
# validation layers, glslang and spirv-tools come from DIR. `KIT_PYTHON_VERSION` (default 3.12)
# is the GPU machine's Python version, for which the wheels are fetched; `KIT_DEEPSPEED` (default
# deepspeed==0.19.8) the DeepSpeed sdist fetched (its $PYTHON must have torch).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="${1:-}"
DIR="$(mkdir -p "${2:-$ROOT/.dev/kit}" && cd "${2:-$ROOT/.dev/kit}" && pwd)"
PY="${PYTHON:-python3}"
log() { printf '[gpu-kit] %s\n' "$*" >&2; }
# Unpacked into / (the loader and layers must be where the loader looks).
SYSTEM_DEBS=(libvulkan1 libvulkan-dev libfmt9 libfmt-dev vulkan-validationlayers
  libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
# Unpacked beside the kit (tools only, put on PATH).
TOOL_DEBS=(glslang-tools spirv-tools)
WHEELS=(hatchling editables trove-classifiers pathspec packaging pluggy "pybind11>=3" setuptools wheel)
# The suite's own test tools the GPU machine may lack: workers on every core, per-process GPU memory.
TEST_WHEELS=(pytest-xdist execnet nvidia-ml-py)
# `vk-adam bench --cases host`'s DeepSpeedCPUAdam row: DeepSpeed's sdist, installed without building
# its ops, and its requirements but torch and NumPy (its CPU Adam op is built on first use with g++
# and ninja, a wheel here).
DEEPSPEED="${KIT_DEEPSPEED:-deepspeed==0.19.8}"
DEEPSPEED_WHEELS=(einops hjson msgpack ninja packaging psutil py-cpuinfo "pydantic>=2" tqdm nvidia-ml-py)

case "$MODE" in
download)
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-kit-lists)
  mkdir -p /tmp/gpu-kit-lists/partial "$DIR/debs" "$DIR/wheels"
  apt-get "${o[@]}" update -qq
  (cd "$DIR/debs" && apt-get "${o[@]}" download -qq "${SYSTEM_DEBS[@]}" "${TOOL_DEBS[@]}")
  "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "${KIT_PYTHON_VERSION:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d "$DIR/wheels" "${WHEELS[@]}"
  "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: --no-deps \
    --python-version "${KIT_PYTHON_VERSION:-3.12}" --implementation cp --platform any \
    -d "$DIR/wheels" "${TEST_WHEELS[@]}"
  "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "${KIT_PYTHON_VERSION:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d "$DIR/wheels" "${DEEPSPEED_WHEELS[@]}"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "$DEEPSPEED" -d "$DIR/wheels"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: kp==0.9.0 -d "$DIR"
  log "kit in $DIR ($(du -sh "$DIR" | cut -f1))"
  ;;
env)
  icd="${VK_DRIVER_FILES:-}"
  [ -z "$icd" ] && for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
    /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && icd="$f" && break
  done
  [ -n "$icd" ] && echo "export VK_DRIVER_FILES=$icd"
  echo "export PATH=$DIR/root/usr/bin:\$PATH"
  echo "export LD_LIBRARY_PATH=$DIR/root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  ;;
install)
  for name in "${SYSTEM_DEBS[@]}"; do
    for f in "$DIR"/debs/"${name}"_*.deb; do dpkg -x "$f" /; done
  done
  mkdir -p "$DIR/root"
  for name in "${TOOL_DEBS[@]}"; do
    for f in "$DIR"/debs/"${name}"_*.deb; do dpkg -x "$f" "$DIR/root"; done
  done
  ldconfig
  # glslang/spirv-tools shared libraries live beside their tools.
  export LD_LIBRARY_PATH="$DIR/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  eval "$(bash "${BASH_SOURCE[0]}" env "$DIR")"
  "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$DIR/wheels" \
    hatchling editables "pybind11>=3" setuptools wheel
  "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --find-links "$DIR/wheels" \
    "${TEST_WHEELS[@]}"
  wheel="$(bash "$ROOT/scripts/build-kp.sh" --sdist "$DIR"/kp-0.9.0.tar.gz --python "$PY" --cache "$DIR/cache")"
  "$PY" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
  "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$DIR/wheels" \
    --no-build-isolation --no-deps -e "$ROOT"
  "$PY" -m pip install -q --disable-pip-version-check --no-index --no-build-isolation --no-deps \
    --force-reinstall "$ROOT/plugins/vk-adam-lion"
  log "installed: $("$PY" -c 'import kp; print(kp.__version__)') and vk-adam into $PY"
  if DS_BUILD_OPS=0 "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$DIR/wheels" \
    --no-build-isolation "$DEEPSPEED" >"$DIR/deepspeed-install.log" 2>&1; then
    log "installed: deepspeed $("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1)"
  else  # optional: the host bench's DeepSpeedCPUAdam row says why it is skipped
    tail -5 "$DIR/deepspeed-install.log" >&2
    log "deepspeed not installed (see $DIR/deepspeed-install.log); the host bench skips its row"
  fi
  ;;
test)
  shift 2 || shift $#
  eval "$(bash "${BASH_SOURCE[0]}" env "$DIR")"
  cd "$ROOT"
  "$PY" -m vk_adam info
  "$PY" -m pytest --vk-validation tests plugins/vk-adam-lion/tests -p no:cacheprovider "$@"
  ;;
*)
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
