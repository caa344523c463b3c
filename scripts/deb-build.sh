#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# deb-build.sh OUTDIR - build the tcp-bbrx-dkms binary package (debian/)
# in a staged copy under OUTDIR, so that dpkg-buildpackage leaves nothing in
# the source tree; the .deb lands in OUTDIR and its path is printed last.
# deb-build.sh --name - print the .deb's file name and nothing else.
#
# The file name carries debian/control's Architecture: "all", or the one
# architecture (or the build machine's, of several) the package is for
# (tcp-bbrx-dkms_0.3.0_amd64.deb). dpkg-buildpackage builds an
# architecture-specific package for the machine it runs on, so a machine
# of another architecture is refused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: deb-build.sh OUTDIR | --name}
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$root/dkms.conf")
deb_ver=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$root/debian/changelog")
if [[ $ver != "$deb_ver" ]]; then
	echo "deb-build: dkms.conf says $ver, debian/changelog $deb_ver" >&2
	exit 1
fi

# deb_arch: the architecture in the .deb's name
deb_arch()
{
	local archs host a

	archs=$(sed -n 's/^Architecture:[[:space:]]*//p' "$root/debian/control")
	if [[ $archs == all ]]; then
		echo all
		return
	fi
	host=$(dpkg --print-architecture)
	for a in $archs; do
		if [[ $a == "$host" ]]; then
			echo "$a"
			return
		fi
	done
	echo "deb-build: debian/control builds the package for $archs only; this machine is $host" >&2
	return 1
}
arch=$(deb_arch)
name=tcp-bbrx-dkms_${ver}_$arch.deb
if [[ $out == --name ]]; then
	echo "$name"
	exit 0
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
deb=$out/$name
[[ -f $deb ]] || { echo "deb-build: no $deb after the build" >&2; exit 1; }
dpkg-deb --contents "$deb"
echo "deb-build: $deb"
