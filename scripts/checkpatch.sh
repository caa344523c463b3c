#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs the kernel's checkpatch.pl (from Debian's linux-source-6.1 tarball,
# extracted once into $BBRX_CACHE, outside the clone, keyed by the
# tarball's size and time) in --strict mode on the module's sources and
# the kernel module the selftests build (selftests/klp_tcp_push/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The tarball scripts/deps.sh installs, whatever other linux-source
# packages the machine has (checkpatch's checks change between versions).
tarball=/usr/src/linux-source-6.1.tar.xz
[ -e "$tarball" ] || tarball=
key=none
[ -z "$tarball" ] || key=$(stat -c '%s-%Y' "$tarball")
cache=${BBRX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bbrx}/checkpatch-$key

if [ ! -x "$cache/scripts/checkpatch.pl" ]; then
	[ -n "$tarball" ] || { echo "checkpatch: no /usr/src/linux-source-*.tar.xz (scripts/deps.sh installs it)" >&2; exit 1; }
	mkdir -p "$cache"
	top=$(basename "$tarball" .tar.xz)
	tar -xJf "$tarball" -C "$cache" --strip-components=1 \
		"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
		"$top/scripts/const_structs.checkpatch"
fi

cd "$root"
# shellcheck disable=SC2046
"$cache/scripts/checkpatch.pl" --strict --no-tree --quiet --show-types \
	-f $(git ls-files 'module/*.[ch]' 'include/*/*.h' 'selftests/*/*.c' 2>/dev/null ||
	     ls module/*.[ch] include/uapi/*.h selftests/klp_*/*.c)
echo "checkpatch: clean"
