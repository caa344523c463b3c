#!/bin/bash
# deps.sh - install every Debian package bbrx needs to build, check and test
# the module (host build, sparse/checkpatch, QEMU VM runner, benchmarks).
#
# Idempotent and quiet: when everything is present it prints nothing and
# exits 0 without touching apt. Otherwise it runs `apt-get update` once and
# installs only the missing packages. Needs root (or sudo) for that step.
set -euo pipefail

PKGS=(
	# VM runner: emulator, the guest kernel and the host tools copied into
	# the guest's initramfs
	qemu-system-x86 linux-image-cloud-amd64 cpio zstd xz-utils kmod
	iperf3 iproute2 ethtool jq tcpdump iputils-ping procps util-linux
	# building the module (cloud = VM target; rt = PREEMPT_RT compile check)
	make gcc linux-headers-cloud-amd64 linux-headers-rt-amd64 dkms
	# static checks: sparse, and checkpatch.pl from the kernel source
	sparse linux-source-6.1
	# benchmark plots
	gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ $st == ii* ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "deps.sh: installing: ${missing[*]}" >&2
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
if ! "${SUDO[@]}" apt-get update -qq; then
	echo "deps.sh: error: apt-get update failed" >&2
	exit 1
fi
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	-o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "deps.sh: error: apt-get install failed for: ${missing[*]}" >&2
	exit 1
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
