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
# patches its own text under load (docs/testing.md, "Known problems of the
# VM": a vCPU keeps running a stale translation of a patch site). On
# bookworm this script adds the bookworm-backports suite (Debian's own
# archive) and installs qemu-system-x86 >= 10 from it; elsewhere, or if
# that fails (a warning, not an error), an older QEMU stays and
# scripts/vm-run falls back to single-threaded TCG.
#
# deps.sh --host installs only what the host itself needs (its packages and
# its own kernels' headers), not the build chroots of other suites: mostly
# download and unpacking, which scripts/check overlaps with the host's
# builds.
#
# deps.sh --deb installs only what building the Debian package needs
# (`make deb` on a build machine: make, debhelper, dh-dkms, dpkg-dev), no
# QEMU, kernels or chroots.
#
# deps.sh --demo [NAME] installs only what `make demo` needs: QEMU and the
# programs vm-run copies into the guest, make and gcc, and the headers and
# image of the one kernel the demo boots (NAME, default the default pinned
# kernel; one the host's APT serves). No other kernels, no chroots, no
# static checkers, packaging tools or plotting.
#
# deps.sh --vm installs what scripts/vm-run itself needs when QEMU is
# missing: the --demo list without a kernel.
set -euo pipefail

MODE=all
DEMO_KERNEL=
case ${1:-} in
--host) MODE=host ;;
--deb) MODE=deb ;;
--demo) MODE=demo DEMO_KERNEL=${2:-} ;;
--vm) MODE=vm ;;
'') ;;
*) echo "usage: deps.sh [--host | --deb | --demo [NAME] | --vm]" >&2; exit 2 ;;
esac

QEMU_MIN=1:10

# what make demo needs (deps.sh --demo), then the rest
VM_PKGS=(
	# VM runner: emulator and the host tools copied into the guest's
	# initramfs
	qemu-system-x86 cpio zstd xz-utils kmod
	iperf3 iproute2 ethtool jq tcpdump iputils-ping procps util-linux
	# building the module
	make gcc
)
PKGS=(
	"${VM_PKGS[@]}" dkms
	# the selftests in a kernel tree (lib.mk's install copies with rsync)
	rsync
	# make deb: a DKMS source package built with debhelper's dh_dkms
	debhelper dh-dkms dpkg-dev
	# static checks: sparse, and checkpatch.pl from the kernel source
	sparse linux-source-6.1
	# benchmark plots
	gnuplot-nox
	# build chroots of the suites the host does not run (scripts/suite)
	mmdebstrap
)
# make deb alone: the package holds source only, so no compiler either
DEB_PKGS=(make debhelper dh-dkms dpkg-dev)
[[ $MODE != deb ]] || PKGS=("${DEB_PKGS[@]}")
[[ $MODE != demo && $MODE != vm ]] || PKGS=("${VM_PKGS[@]}")
SCRIPTS=$(dirname "$(readlink -f "$0")")
RESOLVED=$(dirname "$SCRIPTS")/.cache/kernels.resolved
if [[ $MODE == demo ]]; then
	DEMO_KERNEL=$("$SCRIPTS/vm-kver" --name "$DEMO_KERNEL") || exit 2
	if ! BBRX_PINS_ONLY=1 "$SCRIPTS/vm-kver" --list host |
		awk -v n="$DEMO_KERNEL" '$1 == n && $3 != "compile" { f = 1 } END { exit !f }'; then
		echo "deps.sh: error: make demo boots a build the host's APT serves; $DEMO_KERNEL" \
			"is compiled only or built in another suite's chroot (scripts/lanes boots those" \
			"after make deps)" >&2
		exit 2
	fi
fi

installed()
{
	local st

	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true)
	[[ $st == ii* ]]
}

# The pinned kernel builds the host's APT serves (scripts/kernels.conf):
# image and headers of the booted ones, headers of the compile-only ones.
# A build deps.sh substituted earlier (kernels.resolved) counts as the pin
# while it is installed.
kpkgs() { echo "linux-headers-$1"; [[ $2 == compile ]] || echo "linux-image-$1"; }
host_builds=()
while [[ $MODE != deb && $MODE != vm ]] && read -r name rel lane _; do
	[[ $MODE != demo || $name == "$DEMO_KERNEL" ]] || continue
	sub=$(awk -v n="$name" '$1 == n { print $2 }' "$RESOLVED" 2>/dev/null || true)
	if [[ -n $sub && $sub != "$rel" ]] && installed "linux-headers-$sub"; then
		rel=$sub
	fi
	host_builds+=("$name $rel $lane")
done < <(BBRX_PINS_ONLY=1 "$SCRIPTS/vm-kver" --list host)

missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done
kmissing=()
for b in "${host_builds[@]}"; do
	read -r name rel lane <<<"$b"
	for p in $(kpkgs "$rel" "$lane"); do
		installed "$p" || { kmissing+=("$b"); break; }
	done
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
if [[ $MODE != deb && $codename == bookworm ]] && ! qemu_new_enough; then
	want_bpo=1
fi
# foreign_builds: the builds of suites the host does not run, each in its
# suite's chroot (scripts/suite), the booted ones' images in the cache.
# Each chroot (trixie-backports shares trixie's) is made in parallel with
# the others: most of the time is download and unpacking.
foreign_builds()
{
	local base p rc=0
	local -a pids=()

	for base in $(BBRX_PINS_ONLY=1 "$SCRIPTS/vm-kver" --list chroot |
		awk '{ sub(/-backports$/, "", $4); print $4 }' | sort -u); do
		foreign_base "$base" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	# a chroot whose sparse cannot check 7.x headers borrows one that can
	"$SCRIPTS/suite" sparse || echo "deps.sh: warning: no sparse for 7.x headers in some chroot" >&2
	return "$rc"
}

# foreign_base BASE: foreign_builds' work for the suites of one chroot.
foreign_base()
{
	local name rel lane suite sub root new ok

	while read -r name rel lane suite; do
		[[ ${suite%-backports} == "$1" ]] || continue
		sub=$(awk -v n="$name" '$1 == n { print $2 }' "$RESOLVED" 2>/dev/null || true)
		root=$("$SCRIPTS/suite" root "$suite")
		[[ -n $sub && -d $root/usr/src/linux-headers-$sub ]] && rel=$sub
		if [[ -d $root/usr/src/linux-headers-$rel ]] &&
		   [[ $lane == compile || -e $("$SCRIPTS/suite" kroot "$rel")/.bbrx-ready ]]; then
			continue
		fi
		ok=1
		if ! "$SCRIPTS/suite" ensure "$suite" "$rel"; then
			new=$("$SCRIPTS/suite" newest "$suite" "$("$SCRIPTS/vm-kver" --series "$rel")" || true)
			if [[ -n $new && $new != "$rel" ]] && "$SCRIPTS/suite" ensure "$suite" "$new"; then
				echo "deps.sh: warning: $name: $rel is no longer in $suite; using the series' newest, $new" >&2
				record "$name" "$new"
				rel=$new
			else
				ok=0
			fi
		fi
		if ((ok)) && [[ $lane != compile ]]; then
			"$SCRIPTS/suite" kernel "$suite" "$rel" >/dev/null || ok=0
		fi
		if ((!ok)); then
			# a moving suite (report lane) must not stop the rest
			[[ $lane == report ]] || return 1
			echo "deps.sh: warning: $name ($suite $rel) could not be installed; its lane will fail" >&2
		fi
	done < <(BBRX_PINS_ONLY=1 "$SCRIPTS/vm-kver" --list chroot)
}

# record NAME RELEASE: NAME now means RELEASE (vm-kver reads it).
record()
{
	mkdir -p "$(dirname "$RESOLVED")"
	(
		flock 8	# foreign_base runs once per chroot, in parallel
		{ grep -v "^$1 " "$RESOLVED" 2>/dev/null || true; echo "$1 $2"; } >"$RESOLVED.new"
		mv "$RESOLVED.new" "$RESOLVED"
	) 8>"$RESOLVED.lock"
}

if [[ ${#missing[@]} -eq 0 && ${#kmissing[@]} -eq 0 && $want_bpo -eq 0 ]]; then
	[[ $MODE == all ]] || exit 0
	foreign_builds || { echo "deps.sh: error: a build chroot or kernel could not be installed" >&2; exit 1; }
	exit 0
fi

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
if ((want_bpo)); then
	# the mirror that already serves the host (want_bpo: a bookworm host),
	# from its APT sources: no archive host is written here
	mirror=$("$SCRIPTS/suite" mirror 2>/dev/null || true)
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
# A pinned build the archive no longer has: the series' newest instead.
for b in "${kmissing[@]}"; do
	read -r name rel lane <<<"$b"
	if ! apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then
		new=$(apt-cache pkgnames linux-headers- | sed -n 's/^linux-headers-//p' |
			grep -E "^$("$SCRIPTS/vm-kver" --series "$rel")\$" | sort -V | tail -n 1 || true)
		if [[ -z $new ]]; then
			echo "deps.sh: error: $name: neither $rel nor any build of its series is in the archive" >&2
			exit 1
		fi
		echo "deps.sh: warning: $name: $rel is no longer in the archive; using the series' newest, $new" >&2
		record "$name" "$new"
		rel=$new
	fi
	mapfile -t -O "${#missing[@]}" missing < <(kpkgs "$rel" "$lane")
done
# QEMU from backports first, so that the install below does not fetch and
# set up bookworm's older build only for it to be replaced.
if ((want_bpo)); then
	if "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		-o Dpkg::Use-Pty=0 --no-install-recommends \
		-t bookworm-backports qemu-system-x86 >/dev/null; then
		rest=()
		for p in "${missing[@]}"; do
			[[ $p == qemu-system-x86 ]] || rest+=("$p")
		done
		missing=("${rest[@]}")
	else
		no_bpo "installing qemu-system-x86 from bookworm-backports failed"
	fi
fi
[[ ${#missing[@]} -eq 0 ]] || echo "deps.sh: installing: ${missing[*]}" >&2
if [[ ${#missing[@]} -ne 0 ]] &&
	! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	-o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "deps.sh: error: apt-get install failed for: ${missing[*]}" >&2
	exit 1
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
[[ $MODE != all ]] ||
	foreign_builds || { echo "deps.sh: error: a build chroot or kernel could not be installed" >&2; exit 1; }
echo "deps.sh: done" >&2
