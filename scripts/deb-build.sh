#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# deb-build.sh OUTDIR - build the tcp-bbrx-dkms binary package (debian/)
# in a staged copy under OUTDIR, so that dpkg-buildpackage leaves nothing in
# the source tree; the .deb lands in OUTDIR and its path is printed last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: deb-build.sh OUTDIR}
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$root/dkms.conf")
deb_ver=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$root/debian/changelog")
if [[ $ver != "$deb_ver" ]]; then
	echo "deb-build: dkms.conf says $ver, debian/changelog $deb_ver" >&2
	exit 1
fi
stage=$out/bbrx-$ver

rm -rf "$out"
mkdir -p "$stage"
# Tracked and new files only (git ls-files), not the objects of an in-tree
# build: module/*.o would otherwise ship in /usr/src.
git -C "$root" ls-files -z --cached --others --exclude-standard -- \
	Kbuild Makefile dkms.conf module include debian \
	scripts/tcp_bbrx.modprobe.conf |
	while IFS= read -r -d '' f; do
		# A tracked file deleted in the work tree is not part of it.
		[[ -e $root/$f || -L $root/$f ]] || continue
		mkdir -p "$stage/$(dirname "$f")"
		cp -a "$root/$f" "$stage/$f"
	done

log=$out/build.log
if ! (cd "$stage" && dpkg-buildpackage -b -us -uc) >"$log" 2>&1; then
	cat "$log" >&2
	echo "deb-build: dpkg-buildpackage failed (log: $log)" >&2
	exit 1
fi
deb=$out/tcp-bbrx-dkms_${ver}_all.deb
[[ -f $deb ]] || { echo "deb-build: no $deb after the build" >&2; exit 1; }
dpkg-deb --contents "$deb"
echo "deb-build: $deb"
