#!/usr/bin/env bash
# The wheels of scripts/build-wheels.sh, tested on a GPU machine as a user installs them: a clean
# virtual environment, `pip install --no-index` (not editable), and the suite run against the
# installed packages under the Khronos validation layers (core + synchronization).
#
#   bash scripts/gpu-wheels.sh pack DIR [DIST]    on a machine with network (CI's): DIR gets the
#       kp wheel for $PY_TAG (default cp312; from DIST, default dist/), vk-adam's and the Lion
#       plugin's wheels, the wheels of their dependencies and of the suite's for that CPython,
#       and the Debian packages of the Vulkan loader, the validation layers and the shader tools
#       (from the GPU kit, .dev/kit/debs: scripts/gpu-kit.sh download)
#   bash scripts/gpu-wheels.sh test DIR OUT       on the GPU machine (no network): installs the
#       packages of DIR's debs, makes a clean venv from $PYTHON (default
#       /opt/torch/.venv/bin/python, Python 3.12), installs DIR's wheels into it with
#       `pip install --no-index --find-links DIR`, and runs the suite (tests/ and the Lion plugin's
#       tests) from a copy of the checkout that has no vk_adam/ or vk_adam_lion/ package, so
#       every import is the installed wheel's. Writes OUT/suite.txt, OUT/installed.txt and
#       OUT/junit.xml.
#
# Left out of `test`: tests/architecture and tests/docs, the check that a checkout's SPIR-V is
# newer than its GLSL and the build of a wheel from the checkout's sdist (they read the
# checkout's sources and docs, not what a wheel installs).
# torch has no wheel to install offline: the machine's own ($PYTHON's site-packages) is put on
# sys.path after the venv's own packages. $WORKERS (default 6) pytest-xdist workers.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[gpu-wheels] %s\n' "$*" >&2; }
mode="${1:-}" dir="${2:-}"
[ -n "$mode" ] && [ -n "$dir" ] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
#: The suite's own needs beyond vk-adam's: pytest and its plugins, hypothesis, the demo extra.
TEST_DEPS=("pytest>=8" "pytest-xdist>=3.5" "hypothesis>=6.100" "nvidia-ml-py>=12" "matplotlib>=3.7" "tqdm>=4.60"
  "vulkan>=1.3")
# The loader, the layers and the shader tools; GLVND's libraries, which NVIDIA's Vulkan driver
# (libGLX_nvidia) loads (the same set as scripts/gpu-kit.sh's).
DEBS=(libvulkan1 libfmt9 vulkan-validationlayers glslang-tools spirv-tools
  libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

case "$mode" in
pack)
  set -e
  dist="$(cd "${3:-$ROOT/dist}" && pwd)"
  tag="${PY_TAG:-cp312}"
  version="${tag#cp3}"
  mkdir -p "$dir"
  shopt -s nullglob
  kp=("$dist"/kp-*-"$tag"-"$tag"-manylinux*.whl)
  [ ${#kp[@]} -eq 1 ] || { log "expected one kp wheel for $tag in $dist (PYTHONS=... bash scripts/build-wheels.sh)"; exit 1; }
  cp "${kp[0]}" "$dist"/vk_adam-*.whl "$dist"/vk_adam_lion-*.whl "$dir"/
  # Every dependency for that CPython, binary only, resolved with DIR first (so kp is ours).
  python3 -m pip -q --disable-pip-version-check download --only-binary=:all: \
    --python-version "3.$version" --implementation cp --platform manylinux_2_34_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
    --find-links "$dir" -d "$dir" "$dir"/vk_adam-*.whl "$dir"/vk_adam_lion-*.whl "${TEST_DEPS[@]}"
  for name in "${DEBS[@]}"; do
    debs=("$ROOT"/.dev/kit/debs/"$name"_*.deb)
    [ ${#debs[@]} -ge 1 ] || { log "no $name deb in .dev/kit/debs (bash scripts/gpu-kit.sh download)"; exit 1; }
    cp "${debs[@]}" "$dir"/
  done
  log "packed for $tag into $dir ($(du -sh "$dir" | cut -f1)): $(ls "$dir" | wc -l) files"
  ;;
test)
  out="${3:?test needs an output folder}"
  dir="$(cd "$dir" && pwd)"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  for name in "${DEBS[@]}"; do
    for f in "$dir"/"$name"_*.deb; do dpkg -x "$f" /; done
  done
  ldconfig
  icd=""
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && icd="$f" && break
  done
  [ -n "$icd" ] && export VK_DRIVER_FILES="$icd"
  py="${PYTHON:-/opt/torch/.venv/bin/python}"
  work="$(mktemp -d /tmp/vk-adam-gpu-wheels.XXXXXX)"
  "$py" -m venv "$work/venv"
  vpy="$work/venv/bin/python"
  "$vpy" -m pip install -q --disable-pip-version-check --no-index --find-links "$dir" \
    vk-adam vk-adam-lion "${TEST_DEPS[@]}" || { log "pip install --no-index failed"; exit 1; }
  # from outside the checkout: nothing but the venv on sys.path
  (cd "$work" && {
    echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
    echo "python: $("$vpy" -c 'import sys; print(sys.version)')"
    "$vpy" -m pip list --disable-pip-version-check 2>/dev/null
    "$vpy" -c 'import kp, vk_adam, vk_adam_lion; print("vk_adam from", vk_adam.__file__); print("kp from", kp.__file__); print("vk_adam_lion from", vk_adam_lion.__file__)'
    "$work/venv/bin/vk-adam" info
  } > "$out/installed.txt" 2>&1)
  # torch, the machine's own (no wheel of it can be installed offline): its site-packages after
  # the venv's own on sys.path, so vk-adam, kp, NumPy and the rest still come from the venv.
  torch_site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)"
  if [ -n "$torch_site" ] && [ -d "$torch_site/torch" ]; then
    site="$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$torch_site" > "$site/zz-machine-torch.pth"
  fi
  "$work/venv/bin/vk-adam" info > /dev/null 2>&1 || {
    log "vk-adam info finds no device: see $out/installed.txt"
    VK_LOADER_DEBUG=error,warn "$work/venv/bin/vk-adam" info >> "$out/installed.txt" 2>&1
    exit 1
  }
  # The checkout without its packages: tests import what the venv installed.
  mkdir -p "$work/suite"
  (cd "$ROOT" && tar -c --exclude=./vk_adam --exclude=./plugins/vk-adam-lion/vk_adam_lion \
    --exclude=./.dev --exclude=./.venv --exclude=./dist --exclude=./.git .) | tar -x -C "$work/suite"
  cd "$work/suite"
  # The test shaders a checkout builds (tests/glsl: deliberately broken rules; the examples'),
  # with the installed vk_adam.shaderc and the glslang of the debs above.
  "$vpy" - <<'EOF' >> "$out/installed.txt" 2>&1 || { log "the test shaders did not build"; exit 1; }
from pathlib import Path
from vk_adam.shaderc import compile_shaders
built = compile_shaders("tests/glsl", "tests/spirv")
for shaders in sorted(Path("examples").glob("*/shaders")):
    if any(shaders.glob("*.comp")):
        built += compile_shaders(shaders, shaders.parent / "spirv")
print(f"test shaders built: {len(built)}")
EOF
  start=$(date +%s)
  # The console script, not `python -m pytest`: nothing puts the working folder on sys.path.
  "$work/venv/bin/pytest" --vk-validation -n "${WORKERS:-6}" -p no:cacheprovider -q \
    --ignore=tests/architecture --ignore=tests/docs --junitxml="$out/junit.xml" \
    --deselect tests/rules/test_shader_build.py::test_every_glsl_source_has_an_installed_spirv_newer_than_its_sources \
    --deselect tests/rules/test_shader_build.py::test_sdist_carries_glsl_and_a_wheel_built_from_it_carries_spirv \
    tests plugins/vk-adam-lion/tests > "$out/suite.txt" 2>&1
  rc=$?
  echo "suite rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$out/suite.txt"
  tail -15 "$out/suite.txt"
  exit $rc
  ;;
*)
  log "unknown mode $mode (pack, test)"
  exit 2
  ;;
esac
