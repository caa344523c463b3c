#!/bin/bash
# deps.sh - install every Debian package bbrx needs to build, check and test
# the module (host build, sparse/checkpatch, Debian package, QEMU VM runner,
# benchmarks).
#
# Idempotent and quiet: when everything is present it prints nothing and
# exits 0 without touching apt. Otherwise it runs `apt-get update` once and
# installs only the missing packages. Needs root (or sudo) for that step.
#
# QEMU: bookworm's 7.2 hangs multi-threaded TCG guests when the guest kernel
# patches its own text under load (README, "Known problems": a vCPU keeps
# running a stale translation of a patch site). On bookworm this script adds
# the bookworm-backports suite (Debian's own archive) and installs
# qemu-system-x86 >= 10 from it; elsewhere, or if that fails (a warning,
# not an error), an older QEMU stays and scripts/vm-run falls back to
# single-threaded TCG.
set -euo pipefail

QEMU_MIN=1:10

PKGS=(
	# VM runner: emulator and the host tools copied into the guest's
	# initramfs
	qemu-system-x86 cpio zstd xz-utils kmod
	iperf3 iproute2 ethtool jq tcpdump iputils-ping procps util-linux
	# building the module
	make gcc dkms
	# make deb: a DKMS source package built with debhelper's dh_dkms
	debhelper dh-dkms dpkg-dev
	# static checks: sparse, and checkpatch.pl from the kernel source
	sparse linux-source-6.1
	# benchmark plots
	gnuplot-nox
)
# The pinned kernel builds (scripts/kernels.conf): image and headers of the
# ones the VM boots (full and smoke lanes), headers of the compile-only ones.
while read -r _ rel lane; do
	PKGS+=("linux-headers-$rel")
	[[ $lane == compile ]] || PKGS+=("linux-image-$rel")
done < <("$(dirname "$(readlink -f "$0")")/vm-kver" --list)

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ $st == ii* ]] || missing+=("$p")
done
qemu_new_enough()
{
	local v

	v=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null) || return 1
	dpkg --compare-versions "$v" ge "$QEMU_MIN"
}

# shellcheck source=/dev/null
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
want_bpo=0
if [[ $codename == bookworm ]] && ! qemu_new_enough; then
	want_bpo=1
fi
[[ ${#missing[@]} -eq 0 && $want_bpo -eq 0 ]] && exit 0

[[ ${#missing[@]} -eq 0 ]] || echo "deps.sh: installing: ${missing[*]}" >&2
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null; then
		SUDO=(sudo)
	else
		echo "deps.sh: error: not root and no sudo; install as root: ${missing[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
# The mirror that already serves the machine's "bookworm" suite, from its
# deb822 or one-line APT sources: no archive host is written here.
bookworm_mirror()
{
	local f

	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -e $f ]] || continue
		awk '
			/^[[:space:]]*$/ { if (s && u) { print u; exit } s = 0; u = ""; next }
			/^URIs:/ { u = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") s = 1 }
			END { if (s && u) print u }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -e $f ]] || continue
		awk '$1 == "deb" && $3 == "bookworm" { print $2 }' "$f"
	done
}
if ((want_bpo)); then
	mirror=$(bookworm_mirror | head -n 1)
	if [[ -z $mirror ]]; then
		want_bpo=0
		echo "deps.sh: warning: no APT source serves bookworm; not adding bookworm-backports" >&2
	else
		echo "deps.sh: adding bookworm-backports from $mirror" >&2
		printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			"$mirror" | "${SUDO[@]}" tee /etc/apt/sources.list.d/bbrx-backports.sources >/dev/null
	fi
fi
# Without backports the run still works, on one TCG thread: warn, go on.
no_bpo()
{
	echo "deps.sh: warning: $1; QEMU stays older than $QEMU_MIN and" \
		"scripts/vm-run uses single-threaded TCG (slower)" >&2
	want_bpo=0
}
if ! "${SUDO[@]}" apt-get update -qq; then
	if ((want_bpo)); then
		"${SUDO[@]}" rm -f /etc/apt/sources.list.d/bbrx-backports.sources
		no_bpo "apt-get update failed with bookworm-backports"
	fi
	if ! "${SUDO[@]}" apt-get update -qq; then
		echo "deps.sh: error: apt-get update failed" >&2
		exit 1
	fi
fi
if [[ ${#missing[@]} -ne 0 ]] &&
	! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	-o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "deps.sh: error: apt-get install failed for: ${missing[*]}" >&2
	exit 1
fi
if ((want_bpo)) && ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends \
	-t bookworm-backports qemu-system-x86 >/dev/null; then
	no_bpo "installing qemu-system-x86 from bookworm-backports failed"
fi
if ((want_bpo)) && ! qemu_new_enough; then
	no_bpo "qemu-system-x86 from bookworm-backports is still too old"
fi
# Re-check: apt-get can exit 0 and still leave a package unconfigured.
fail=()
for p in "${missing[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ $st == ii* ]] || fail+=("$p")
done
if [[ ${#fail[@]} -ne 0 ]]; then
	echo "deps.sh: error: still not installed: ${fail[*]}" >&2
	exit 1
fi
echo "deps.sh: done" >&2
