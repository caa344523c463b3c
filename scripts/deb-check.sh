#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# deb-check.sh DEB - install the tcp-bbrx-dkms package, as a fleet host
# would, into an overlay of this machine's root, and purge it again:
#
#   - a private mount namespace (unshare -m) mounts an overlayfs whose lower
#     dir is / and whose upper dir is a temporary directory, binds /proc,
#     /sys and /dev into it, and chroots there, so every write lands in the
#     upper dir and the host's root is never changed;
#   - `dpkg -i` runs Debian's DKMS postinst with `uname -r` answering the
#     default pinned kernel (the chroot would otherwise report the host's
#     running kernel), then `dkms autoinstall -k` covers the other kernels
#     of the "full" lane the host installs (scripts/kernels.conf: 6.1 and
#     6.12 cloud), as an
#     admin would; each must show
#     tcp_bbrx/<version> installed, with its .ko in updates/dkms;
#   - `dpkg --purge` must remove everything: the source, the modprobe.d hook,
#     /etc/bbrx, DKMS's tree, the .ko files and their modules.dep lines; the
#     upper dir then holds nothing new but dpkg's database, logs and caches,
#     depmod's indexes and DKMS's signing key.
#
# With DEB_CHECK_SUITE=SUITE (e.g. trixie) the overlay's lower dir is that
# suite's build chroot (scripts/suite) instead of the host's root, with the
# package's dependencies and the suite's pinned kernels (image and headers;
# scripts/kernels.conf: Debian 13's 6.12 and trixie-backports' 7.3)
# installed in it first.
#
# Prints TAP-like "ok N" / "not ok N" lines and a summary; exits non-zero
# on any failure. Needs root (mounts). The builds run at nice 10.
set -euo pipefail
# ls, sort and comm below compare listings byte-wise.
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
name=tcp_bbrx
pkg=tcp-bbrx-dkms

if [[ ${1:-} != --inside ]]; then
	deb=$(readlink -f "${1:?usage: deb-check.sh DEB}")
	[[ -f $deb ]] || { echo "deb-check: no such package: $deb" >&2; exit 1; }
	[[ $(id -u) -eq 0 ]] || { echo "deb-check: needs root (mount, chroot)" >&2; exit 1; }
	if [[ -n ${DEB_CHECK_SUITE:-} ]]; then
		mapfile -t rels < <("$root/scripts/vm-kver" --list chroot |
			awk -v s="$DEB_CHECK_SUITE" '$4 == s || $4 == s "-backports" { print $2, $4 }')
		[[ ${#rels[@]} -gt 0 ]] || { echo "deb-check: no pinned build of $DEB_CHECK_SUITE" >&2; exit 1; }
		# the package's dependencies (first of each alternative), as apt
		# would bring them on a Debian 13 host
		mapfile -t pdeps < <(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
			sed 's/|.*//; s/(.*//; s/[[:space:]]//g' | grep -v '^$')
		# and the kernels themselves (image and headers, each from its
		# suite), as on a host that runs them
		ok=1
		"$root/scripts/suite" install "$DEB_CHECK_SUITE" "${pdeps[@]}" || ok=0
		for r in "${rels[@]}"; do
			read -r rel suite <<<"$r"
			"$root/scripts/suite" install "$suite" "linux-image-$rel" "linux-headers-$rel" || ok=0
		done
		((ok)) || { echo "deb-check: the $DEB_CHECK_SUITE chroot could not be prepared" >&2; exit 1; }
	fi
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/bbrx-deb-check.XXXXXX")
	# The mounts live only in the child's namespace and go with it, so the
	# host sees plain directories here and can remove them.
	trap 'rm -rf "$tmp"' EXIT
	rc=0
	unshare --mount --propagation private -- "$0" --inside "$tmp" "$deb" || rc=$?
	exit "$rc"
fi

tmp=$2
deb=$3
m=$tmp/m
u=$tmp/u
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$root/dkms.conf")
lower=/
default_kver=$("$root/scripts/vm-kver")
# the host's own builds; a chroot suite's (trixie) are not in this root
mapfile -t kvers < <("$root/scripts/vm-kver" --list host | awk '$3 == "full" { print $2 }')
if [[ -n ${DEB_CHECK_SUITE:-} ]]; then
	lower=$("$root/scripts/suite" root "$DEB_CHECK_SUITE")
	mapfile -t kvers < <("$root/scripts/vm-kver" --list chroot |
		awk -v s="$DEB_CHECK_SUITE" '$4 == s || $4 == s "-backports" { print $2 }')
	default_kver=${kvers[0]}
fi

mkdir -p "$m" "$u" "$tmp/w"
trap 'umount -R "$m" 2>/dev/null || umount -R -l "$m"' EXIT
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$u,workdir=$tmp/w" "$m"
for d in proc sys dev; do
	mount --bind "/$d" "$m/$d"
done

# A clean environment: make's MAKEFLAGS (jobserver) must not reach DKMS's
# make, and nothing of the caller's shell should steer dpkg.
in_root()
{
	nice -n 10 chroot "$m" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"
}

n=0
passed=0
failed=0
# check DESCRIPTION COMMAND...: one TAP line for COMMAND's exit status.
check()
{
	local desc=$1

	shift
	n=$((n + 1))
	if "$@"; then
		passed=$((passed + 1))
		echo "ok $n $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n $desc"
	fi
}
# Command output as TAP comments.
note() { sed 's/^/# /'; }
# logged LOG COMMAND...: COMMAND's output into LOG, shown if it fails.
logged()
{
	local log=$1

	shift
	"$@" >"$log" 2>&1 || { note <"$log"; return 1; }
}

# Entries of the upper dir that are changes against the host's root: new or
# different files and links, new directories, whiteouts (removed files).
# Directories copied up only because something below them changed are not.
upper_changes()
{
	local type path

	find "$u" -mindepth 1 -printf '%y %P\0' | sort -z |
		while IFS= read -r -d '' line; do
			type=${line%% *}
			path=/${line#* }
			case $type in
			c) echo "removed $path" ;;
			d) [[ -d ${lower%/}$path && ! -L ${lower%/}$path ]] || echo "new dir $path" ;;
			l) [[ -L ${lower%/}$path && $(readlink "${lower%/}$path") == "$(readlink "$u$path")" ]] ||
				echo "new link $path" ;;
			*) [[ -f ${lower%/}$path && ! -L ${lower%/}$path ]] &&
				cmp -s "${lower%/}$path" "$u$path" || echo "new file $path" ;;
			esac
		done
}
# What dpkg, DKMS and depmod keep by design; everything else in the upper dir
# after the purge is a leftover of the package. A maintainer-script or
# list file of the package itself in dpkg's database still counts.
expected_change()
{
	local path=/${1#*/}

	[[ $path == /var/lib/dpkg/info/$pkg.* ]] && return 1
	[[ $path =~ ^/var/lib/dpkg(/|$) ||
		$path =~ ^/var/(log|cache)(/|$) ||
		$path =~ ^/var/lib/dkms/mok\.(key|pub)$ ||
		$path =~ ^(/usr)?/lib/modules/[^/]+/modules\.[a-z.]+$ ]]
}

dkms_installed()
{
	# stderr: readelf's notes on modules without a .comment section
	in_root dkms status -m "$name" -v "$ver" -k "$1" 2>/dev/null |
		grep ': installed$' >/dev/null
}
# The .ko DKMS installed for kernel $1: built for it, and known to depmod.
ko_in_place()
{
	local k=$1 ko

	ko=$(in_root find "/lib/modules/$k/updates/dkms" -name "$name.ko*" 2>/dev/null)
	[[ -n $ko ]] || { echo "# $k: no $name.ko in updates/dkms"; return 1; }
	in_root modinfo -F vermagic "$ko" | grep "^$k " >/dev/null ||
		{ echo "# $k: $ko has another vermagic"; return 1; }
	grep -q "^updates/dkms/$name.ko" "$m/lib/modules/$k/modules.dep" ||
		{ echo "# $k: $name.ko not in modules.dep"; return 1; }
}
# modprobe resolves tcp_bbrx to the hook's install command for kernel $1.
hook_active()
{
	in_root modprobe -n -v -S "$1" "$name" |
		grep "^install /sbin/modprobe --ignore-install $name " >/dev/null
}
src_tree_ok()
{
	local src=$m/usr/src/$name-$ver top builds

	top=$(find "$src" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' ')
	[[ $top == "Kbuild Makefile dkms.conf include module " ]] ||
		{ echo "# /usr/src/$name-$ver holds: $top"; return 1; }
	builds=$(find "$src" \( -name '*.o' -o -name '*.ko' -o -name '.*.cmd' \) -print)
	[[ -z $builds ]] || { echo "$builds" | note; return 1; }
	cmp -s "$src/dkms.conf" "$root/dkms.conf"
}
# shellcheck disable=SC2016 # dpkg-query's ${field}s, not the shell's
is_conffile()
{
	in_root dpkg-query -W -f='${Conffiles}\n' "$pkg" |
		grep "^ /etc/modprobe.d/$name.conf " >/dev/null &&
		cmp -s "$m/etc/modprobe.d/$name.conf" "$root/scripts/$name.modprobe.conf"
}
# shellcheck disable=SC2016 # as above
not_installed()
{
	local st

	st=$(in_root dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) || return 0
	[[ $st != i* && $st != ?c* ]]
}
absent()
{
	local p

	for p in "$@"; do
		[[ -e $p || -L $p ]] && { echo "# left: ${p#"$m"}"; return 1; }
	done
	return 0
}
no_dep_lines()
{
	local f

	f=$(grep -l "/$name\.ko" "$m"/lib/modules/*/modules.dep || true)
	[[ -z $f ]] || { echo "${f//"$m"/}" | note; return 1; }
}

# The root must start without bbrx (say, after a `make install` on the
# host): such files would shadow what the package installs.
for p in "$m/usr/src/$name"-* "$m/var/lib/dkms/$name" "$m/etc/modprobe.d/$name.conf" \
	"$m/etc/bbrx"; do
	[[ -e $p ]] || continue
	echo "# host has ${p#"$m"}; removed in the overlay"
	rm -rf "$p"
done
upper_changes >"$tmp/before"

# Debian's postinst (/usr/lib/dkms/common.postinst) builds for `uname -r`
# and the newest kernel in /boot; here `uname -r` would name the host's
# kernel, so answer as a fleet host running the default pinned kernel.
cat >"$m/usr/local/bin/uname" <<EOF
#!/bin/sh
if [ "\$*" = -r ]; then echo $default_kver; else exec /usr/bin/uname "\$@"; fi
EOF
chmod +x "$m/usr/local/bin/uname"
cp "$deb" "$m/tmp/$pkg.deb"
check "dpkg -i $(basename "$deb") (running kernel: $default_kver)" \
	logged "$tmp/install.log" in_root dpkg -i "/tmp/$pkg.deb"
rm -f "$m/usr/local/bin/uname" "$m/tmp/$pkg.deb"
grep -E '^(Building for|Module build for|Building initial module)' "$tmp/install.log" |
	sed 's/^/# postinst: /' || true

check "/etc/modprobe.d/$name.conf is a conffile with scripts/$name.modprobe.conf" is_conffile
check "/usr/src/$name-$ver holds Kbuild, Makefile, dkms.conf, include/, module/ and no build products" \
	src_tree_ok
check "/etc/bbrx is a directory" test -d "$m/etc/bbrx"

for k in "${kvers[@]}"; do
	if dkms_installed "$k"; then
		echo "# $k: built by the postinst"
	else
		echo "# $k: not built by the postinst; dkms autoinstall -k $k"
		logged "$tmp/auto.log" in_root dkms autoinstall -k "$k" || true
	fi
	check "dkms status: $name/$ver, $k: installed" dkms_installed "$k"
	check "$k: updates/dkms/$name.ko, vermagic $k, in modules.dep" ko_in_place "$k"
done
check "modprobe -n $name ($default_kver) runs the modprobe.d hook" hook_active "$default_kver"

check "dpkg --purge $pkg" logged "$tmp/purge.log" in_root dpkg --purge "$pkg"
check "dpkg: $pkg not installed" not_installed
shopt -s nullglob
check "gone: /usr/src/$name-*" absent "$m/usr/src/$name"-*
check "gone: /etc/modprobe.d/$name.conf" absent "$m/etc/modprobe.d/$name.conf"
check "gone: /etc/bbrx" absent "$m/etc/bbrx"
check "gone: /var/lib/dkms/$name" absent "$m/var/lib/dkms/$name"
check "gone: /lib/modules/*/updates/dkms/$name.ko*" absent "$m"/lib/modules/*/updates/dkms/"$name".ko*
shopt -u nullglob
check "no modules.dep lists $name.ko" no_dep_lines

upper_changes >"$tmp/after"
comm -13 "$tmp/before" "$tmp/after" | while IFS= read -r c; do
	expected_change "$c" || echo "$c"
done >"$tmp/left"
note <"$tmp/left"
check "nothing else left in the overlay (its upper dir against the host's root)" \
	test ! -s "$tmp/left"

echo "deb-check: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
