#!/usr/bin/env bash
# Run the device tests on simulated devices: under each Khronos device profile, the profiles layer
# (VK_LAYER_KHRONOS_profiles, built and cached by scripts/build-profiles-layer.sh) makes the device
# report the profile's API version, limits, features and extensions, and the validation layer,
# stacked above it, checks every Vulkan call against them (pytest --vk-validation).
#
#   bash scripts/test-profiles.sh [--profile NAME]... [--junit DIR] [PYTEST ARGS...]
#
# Profiles (all three unless --profile picks some):
#   VP_ANDROID_baseline_2022  Android devices of 2022 (Vulkan 1.1; shipped by Vulkan-Profiles)
#   VP_KHR_roadmap_2022       the Khronos 2022 roadmap (Vulkan 1.3; Debian's libvulkan-dev)
#   VP_VK_ADAM_spec_min       vk-adam's Vulkan 1.1 spec minimum (tests/profiles/vk_adam_spec_min.json)
# PYTEST ARGS go to pytest after the default selection ($DEVICE_TESTS, not the slow ones); where
# they name tests (a path, or PATH::TEST), they replace that selection. --junit DIR
# writes DIR/<profile>.xml. Exits non-zero when a run under any profile failed. Needs the
# environment of `bash scripts/setup.sh test`. docs/devices.md says what each profile simulates.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VK_ADAM_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
declare -A FILES=(
  [VP_ANDROID_baseline_2022]="$ROOT/third_party/vulkan-profiles/profiles/VP_ANDROID_baseline_2022.json"
  [VP_KHR_roadmap_2022]="/usr/share/vulkan/registry/profiles/VP_KHR_roadmap_2022.json"
  [VP_VK_ADAM_spec_min]="$ROOT/tests/profiles/vk_adam_spec_min.json"
)
ORDER=(VP_ANDROID_baseline_2022 VP_KHR_roadmap_2022 VP_VK_ADAM_spec_min)
# The test files that run Vulkan work in this process or its subprocesses, without the slow ones
# (-m "not slow": multi-process, thousand-cycle and build tests) and without the one test that
# checks every built-in rule under every storage format (about 3 minutes a profile on 2 cores;
# the formats' own tests stay).
DEVICE_TESTS=(-m "not slow"
  --deselect tests/optim/test_formats.py::test_check_rule_runs_every_builtin_rule_under_every_format
  tests/runtime/test_runtime.py tests/runtime/test_shared_device.py tests/optim/test_formats.py
  tests/runtime/test_device_buffers.py tests/optim/test_host_import.py tests/optim/test_errors.py
  tests/optim/test_async_and_nonfinite.py tests/optim/test_clipping.py tests/lora/test_lora.py
  tests/interop/test_interop_optimizer.py tests/optim/test_state_dict.py tests/optim/test_subgroups.py
  tests/runtime/test_timeline_semaphores.py tests/runtime/test_memory.py tests/optim/test_properties.py tests/optim/test_options.py
  tests/optim/test_adam_reference.py tests/optim/test_schedules.py tests/distributed/test_zero1_device.py
  tests/optim/test_windows.py tests/optim/test_app_mistakes.py tests/runtime/test_limit_refusals.py)

profiles=()
junit=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile)
      [ -n "${FILES[${2:-}]:-}" ] || { echo "test-profiles.sh: unknown profile '${2:-}' (${ORDER[*]})" >&2; exit 2; }
      profiles+=("$2"); shift ;;
    --junit) junit="$2"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
((${#profiles[@]})) || profiles=("${ORDER[@]}")
names_tests=0
for a in "${args[@]}"; do
  [[ "$a" != -* && -e "${a%%::*}" ]] && names_tests=1
done
((names_tests)) || args=("${DEVICE_TESTS[@]}" "${args[@]}")
log() { printf '[test-profiles] %s\n' "$*" >&2; }

if ! dpkg-query -W -f='${Status}' vulkan-validationlayers 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends vulkan-validationlayers >/dev/null
fi
LAYER_DIR="$(bash "$ROOT/scripts/build-profiles-layer.sh")" || exit 1
# The stock kp that scripts/test.sh installs for the fallback tests, where it did.
[ -n "${VK_ADAM_STOCK_KP:-}" ] || [ ! -d "$ROOT/.stock-kp" ] || export VK_ADAM_STOCK_KP="$ROOT/.stock-kp"
[ -z "$junit" ] || mkdir -p "$junit"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

failed=()
for name in "${profiles[@]}"; do
  echo "== pytest --vk-validation under $name"
  # The layer settings, from vk_adam._validation.stack_profile (the one place that knows them):
  # validation's manifest folder before the profiles layer's, the profile, what it simulates.
  settings="$("$PY" - "$LAYER_DIR" "${FILES[$name]}" "$name" "$work/$name-layer.log" <<'PY'
import os, shlex, sys
from pathlib import Path
from vk_adam._validation import LAYER, stack_profile
env = {k: v for k, v in os.environ.items() if k != "VK_INSTANCE_LAYERS"}
env["VK_INSTANCE_LAYERS"] = LAYER  # validation first (nearest the application), profiles below
stack_profile(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], log=Path(sys.argv[4]), env=env)
for key, value in env.items():
    if os.environ.get(key) != value:
        print(f"export {key}={shlex.quote(value)}")
PY
)" || exit 1
  report=()
  [ -z "$junit" ] || report=(--junitxml "$junit/$name.xml" -o junit_suite_name="$name")
  (eval "$settings"; exec "$PY" -m pytest --vk-validation -p no:cacheprovider "${report[@]}" "${args[@]}")
  status=$?
  if [ -s "$work/$name-layer.log" ]; then
    log "$name: the profiles layer's notes (the last VkInstance's): $(grep -c . "$work/$name-layer.log") lines, e.g."
    head -n 3 "$work/$name-layer.log" >&2
  fi
  [ "$status" -eq 0 ] || failed+=("$name")
done
if ((${#failed[@]})); then
  log "failed under: ${failed[*]}"
  exit 1
fi
log "passed under: ${profiles[*]}"
