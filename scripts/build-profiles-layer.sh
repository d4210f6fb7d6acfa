#!/usr/bin/env bash
# Build the Khronos profiles layer (VK_LAYER_KHRONOS_profiles, Vulkan-Profiles sdk-1.3.239.0),
# offline, from the vendored subset in third_party/vulkan-profiles/ and Debian's packages.
#
#   bash scripts/build-profiles-layer.sh [--cache DIR]
#
# Prints the folder that holds the layer's manifest (VkLayer_khronos_profiles.json) and library on
# stdout; progress goes to stderr. Installs the Debian packages the build needs when missing
# (idempotent, as scripts/setup.sh does). The layer is cached under
# DIR/profiles-layer-<key>/ (DIR: ${VK_ADAM_CACHE:-~/.cache/vk-adam}), where the key hashes this
# script, the vendored sources and the versions of the Debian packages built against: a change to
# any of them builds anew, an unchanged checkout never rebuilds (about 40 s on 2 cores, done once).
# The vendored profiles (profiles/*.json) and the README are data the layer reads at run time, not
# build inputs: they are left out of the key, so vendoring a profile does not rebuild the layer.
#
# Run the tests under a profile with scripts/test-profiles.sh (docs/devices.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/third_party/vulkan-profiles"
CACHE="${VK_ADAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vk-adam}"
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) CACHE="$2"; shift ;;
    *) echo "build-profiles-layer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[build-profiles-layer] %s\n' "$*" >&2; }

# Debian's Python runs the layer's source generator: it needs python3-jsonschema.
PY=/usr/bin/python3
DEB_PACKAGES=(cmake g++ ninja-build python3 python3-jsonschema libvulkan-dev vulkan-validationlayers-dev
  libjsoncpp-dev libvalijson-dev)
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

versions="$(dpkg-query -W -f='${Package} ${Version}\n' libvulkan-dev vulkan-validationlayers-dev \
  libjsoncpp-dev libvalijson-dev g++)"
key="$( {
  cat "${BASH_SOURCE[0]}"
  echo "$versions"
  (cd "$SRC" && find . -type f ! -path './profiles/*' ! -name README.md | LC_ALL=C sort | xargs sha256sum)
} | sha256sum | cut -c1-16)"
dest="$CACHE/profiles-layer-$key"
if [ -f "$dest/VkLayer_khronos_profiles.json" ] && [ -f "$dest/libVkLayer_khronos_profiles.so" ]; then
  echo "$dest"
  exit 0
fi

log "building VK_LAYER_KHRONOS_profiles (Vulkan-Profiles sdk-1.3.239.0) against:"
while read -r line; do log "  $line"; done <<< "$versions"
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake -G Ninja -S "$SRC" -B "$work" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log" >&2
  log "cmake failed to configure $SRC"
  exit 1
}
ninja -C "$work" >"$work/build.log" 2>&1 || {
  tail -n 60 "$work/build.log" >&2
  log "the layer's build failed (the end of its log is above)"
  exit 1
}
mkdir -p "$CACHE"
tmp="$(mktemp -d "$CACHE/.profiles-layer-XXXXXX")"
chmod 755 "$tmp"
cp "$work/libVkLayer_khronos_profiles.so" "$work/VkLayer_khronos_profiles.json" "$tmp/"
echo "$versions" > "$tmp/built-against.txt"
rm -rf "$dest"
mv "$tmp" "$dest"
log "built in $((SECONDS - start)) s: $dest"
echo "$dest"
