#!/bin/sh
# Build pipeline_stats (see README.md). Extra include/lib dirs come in via CFLAGS / LDFLAGS.
set -eu
cd "$(dirname "$0")"
CC=${CC:-cc}
# Link against the dev symlink libvulkan.so if the linker finds it, else the runtime soname.
LIBVK=-lvulkan
probe='#include <vulkan/vulkan.h>
int main(void) { return (int)vkCreateInstance(0, 0, 0); }'
# shellcheck disable=SC2086  # CFLAGS/LDFLAGS are intentionally word-split
if ! echo "$probe" | $CC ${CFLAGS:-} -x c - -o /dev/null ${LDFLAGS:-} -lvulkan 2>/dev/null; then
    LIBVK=-l:libvulkan.so.1
fi
# shellcheck disable=SC2086
$CC -O2 -std=c11 -Wall -Wextra ${CFLAGS:-} -o pipeline_stats pipeline_stats.c ${LDFLAGS:-} $LIBVK
echo "build.sh: built $(pwd)/pipeline_stats (linked with $LIBVK)"
