#!/usr/bin/env bash
# The CI recipe of docs/testing-your-vulkan-code.md, run as written there, so that it cannot rot:
# the example project examples/testing_your_vulkan_code/ (not vk-adam: its own shaders) is copied
# outside the checkout, vk-adam and pytest are installed from a wheel directory into a fresh
# virtual environment, and then
#   1. the project's tests pass under `pytest --vk-validation` (on lavapipe the one marked
#      requires_gpu is skipped, naming the device, and nothing else is);
#   2. its planted missing barrier (planted/) FAILS under `pytest --vk-validation`, with the
#      layer's SYNC-HAZARD-READ-AFTER-WRITE message in the report.
# Usage: bash .ci/recipe-vulkan-testing.sh [WHEEL_DIR]
#   WHEEL_DIR (default $VK_ADAM_WHEELS, else dist/, which `bash scripts/build-wheels.sh` fills)
#   holds wheels of vk-adam, its patched kp, their dependencies and pytest, for this python3.
# Debian packages are installed (apt-get, as root or with sudo) only when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VK_ADAM_WHEELS="$(cd "${1:-${VK_ADAM_WHEELS:-$ROOT/dist}}" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/vk-adam-recipe.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
VENV="$WORK/venv"
log() { printf '[recipe] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
# Everything comes from the wheel directory: not from this machine's pip configuration, and
# nothing of a validation session this script may run inside (it would get the messages).
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_CONSTRAINT PYTHONPATH
unset VK_INSTANCE_LAYERS VK_LAYER_SETTINGS_PATH KOMPUTE_VALIDATION_LOG PYTEST_ADDOPTS

# --- the recipe: every command line of the doc's block is one here (tests/testing/test_pytest_plugin.py) ---
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 0
  done
  return 1
}
if missing mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslang-tools; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  log "installing the Debian packages"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslang-tools
fi
log "a fresh virtual environment in $VENV, vk-adam and pytest from $VK_ADAM_WHEELS"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --no-index --find-links "$VK_ADAM_WHEELS" vk-adam pytest
cp -r "$ROOT/examples/testing_your_vulkan_code" "$WORK/project"
cd "$WORK/project"
installed="$("$VENV/bin/python" -c 'import vk_adam.pytest_plugin as p; print(p.__file__)')"
case "$installed" in "$VENV"/*) ;; *) fail "vk-adam was not imported from the new environment: $installed" ;; esac

log "1. the project's tests, under validation: they must pass"
status=0
"$VENV/bin/python" -m pytest --vk-validation -rs -p no:cacheprovider 2>&1 | tee "$WORK/tests.out" || status=$?
[ "$status" -eq 0 ] || fail "the example's tests did not pass under --vk-validation (exit $status)"
summary="$(tail -n 1 "$WORK/tests.out")"
if [[ "$summary" =~ ^=+\ 4\ passed\ in ]]; then
  log "all 4 passed (a hardware GPU)"
elif [[ "$summary" =~ ^=+\ 3\ passed,\ 1\ skipped\ in ]]; then
  grep -Eq "^SKIPPED \[1\] tests/test_vecops.py:[0-9]+: requires a hardware GPU; the session's Vulkan device is " \
    "$WORK/tests.out" || fail "the skipped test is not the requires_gpu one on a software device"
  log "3 passed; the requires_gpu test skipped on a software device"
else
  fail "unexpected outcome: $summary"
fi

log "2. the planted missing barrier, under validation: it must fail, with the hazard reported"
status=0
"$VENV/bin/python" -m pytest --vk-validation -p no:cacheprovider planted 2>&1 | tee "$WORK/planted.out" || status=$?
[ "$status" -eq 1 ] || fail "the planted test did not fail as a test (exit $status; 1 expected)"
[[ "$(tail -n 1 "$WORK/planted.out")" =~ ^=+\ 1\ failed\ in ]] || fail "expected exactly 1 failed"
grep -q "^Vulkan validation: SYNC-HAZARD-READ-AFTER-WRITE (ERROR)" "$WORK/planted.out" \
  || fail "the failure is not the validation layer's SYNC-HAZARD-READ-AFTER-WRITE"
grep -q "Validation Error: \[ SYNC-HAZARD-READ-AFTER-WRITE \]" "$WORK/planted.out" \
  || fail "the layer's whole message is not in the report"
log "ok: the recipe works, and --vk-validation catches the missing barrier"
