#!/bin/sh
# Build vulkan_floor. Extra include/lib dirs come in via CFLAGS / LDFLAGS, e.g.
#   CFLAGS=-I/opt/vk/usr/include LDFLAGS=-L/opt/vk/usr/lib/x86_64-linux-gnu ./build.sh
set -eu
cd "$(dirname "$0")"
CC=${CC:-cc}

# glslang is optional. With it: floor.spv (loaded at run time, build output) and
# floor_spv.h (the embedded fallback, kept in git so glslang-less machines build).
if command -v glslangValidator >/dev/null 2>&1; then
    glslangValidator -V -g0 -o floor.spv floor.comp >/dev/null
    glslangValidator -V -g0 --vn floor_spv -o floor_spv.h.tmp floor.comp >/dev/null
    if cmp -s floor_spv.h.tmp floor_spv.h; then
        rm -f floor_spv.h.tmp
    else
        mv floor_spv.h.tmp floor_spv.h
        echo "build.sh: floor_spv.h regenerated from floor.comp (commit it)"
    fi
    echo "build.sh: compiled floor.comp -> floor.spv"
else
    echo "build.sh: no glslangValidator; the binary uses floor_spv.h (or a floor.spv you provide)"
fi

# Link against the dev symlink libvulkan.so if the linker finds it, else the
# runtime soname directly (e.g. an extracted libvulkan1 without libvulkan-dev).
LIBVK=-lvulkan
# shellcheck disable=SC2086  # CFLAGS/LDFLAGS are intentionally word-split
probe='#include <vulkan/vulkan.h>
int main(void) { return (int)vkCreateInstance(0, 0, 0); }'
if ! echo "$probe" | $CC ${CFLAGS:-} -x c - -o /dev/null ${LDFLAGS:-} -lvulkan 2>/dev/null; then
    LIBVK=-l:libvulkan.so.1
fi

# shellcheck disable=SC2086
$CC -O2 -std=c11 -Wall -Wextra ${CFLAGS:-} -o vulkan_floor vulkan_floor.c ${LDFLAGS:-} $LIBVK
echo "build.sh: built $(pwd)/vulkan_floor (linked with $LIBVK)"
