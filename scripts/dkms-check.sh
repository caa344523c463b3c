#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# dkms add / build / install (into a private tree) of this checkout against
# the headers of kernel $1, as a user's `dkms install` would run it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kver=${1:?usage: dkms-check.sh KERNEL_VERSION}
name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$root/dkms.conf")
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$root/dkms.conf")
work=$root/.cache/dkms
src=$work/src/$name-$ver

rm -rf "$work"
mkdir -p "$src" "$work/tree" "$work/install/$kver"
cp -r "$root/Kbuild" "$root/Makefile" "$root/dkms.conf" "$root/module" \
	"$root/include" "$src/"

opts=(--sourcetree "$work/src" --dkmstree "$work/tree" --installtree "$work/install")
dkms add "${opts[@]}" -m "$name" -v "$ver"
dkms build "${opts[@]}" -m "$name" -v "$ver" -k "$kver"
dkms install "${opts[@]}" -m "$name" -v "$ver" -k "$kver" --force
ko=$(find "$work/install" -name "$name.ko*" | head -n1)
[ -n "$ko" ] || { echo "dkms-check: no $name.ko installed" >&2; exit 1; }
modinfo "$ko" | grep -E '^(version|license|description|vermagic):'
echo "dkms-check: $name $ver built and installed for $kver"
