#!/bin/bash
# debug-kernel.sh - build (once) a debug 6.1 kernel for `make check-debug`:
# Debian's linux-source-6.1 with the config of the kernel the VM boots
# (scripts/vm-kver, the cloud flavour) plus KASAN, KFENCE, PROVE_LOCKING,
# DEBUG_ATOMIC_SLEEP, DEBUG_OBJECTS and KMEMLEAK; tcp_output.o and
# tcp_input.o without KASAN instrumentation (NO_KASAN below says why).
#
# Usage: scripts/debug-kernel.sh [--print-env]
#
#   Builds into $BBRX_DEBUG_KERNEL_DIR (default /var/cache/bbrx/debug-kernel,
#   outside the clone so every clone on the machine shares it):
#     linux-source-6.1/   the configured, built tree (a KDIR for bbrx)
#     root/lib/modules/<release>/   modules_install output, and
#     root/boot/config-<release>    its config (VM_MODDIR=root)
#     stamp               key of the finished build; same key = no rebuild
#     build.log           the make output of the last build
#   --print-env  prints VM_KERNEL=, VM_MODDIR=, VM_KVER=, DEBUG_KDIR= lines
#   (shell syntax) for the finished kernel, building it first if needed.
#
# The key covers the linux-source-6.1 package version, the base config, the
# option list and module list below, and the compiler version; an
# interrupted build with the same key resumes (make is incremental).
#
# Only the modules the VM loads are built (scripts/vm-run's MODULES and their
# dependencies, via localmodconfig): the cloud config's other ~1100 modules
# would more than double the build time and are never loaded in the VM.
# Debug info, BTF and module signing are off (not needed by ftrace/kprobes,
# they only slow the build). Environment: BBRX_DEBUG_KERNEL_DIR,
# BBRX_DEBUG_JOBS (make -j, default: number of CPUs), BBRX_DEBUG_NICE (19).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(dirname "$(dirname "$SELF")")
PROG="debug-kernel"

die() { echo "$PROG: error: $*" >&2; exit 1; }
say() { echo "$PROG: $*" >&2; }

print_env=0
case ${1:-} in
'') ;;
--print-env) print_env=1 ;;
-h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$SELF"; exit 0 ;;
*) die "unknown argument $1 (see --help)" ;;
esac

CACHE=${BBRX_DEBUG_KERNEL_DIR:-/var/cache/bbrx/debug-kernel}
JOBS=${BBRX_DEBUG_JOBS:-$(nproc)}
NICE=${BBRX_DEBUG_NICE:-19}
SRC_TAR=/usr/src/linux-source-6.1.tar.xz
BASE_KVER=$("$REPO/scripts/vm-kver")
BASE_CONFIG=/boot/config-$BASE_KVER
LOCALVERSION=-bbrx-debug

# Build tools beyond scripts/deps.sh (CI never builds a kernel, so they are
# installed here, not there).
BUILD_PKGS=(linux-source-6.1 gcc make bc flex bison libelf-dev libssl-dev
	xz-utils cpio kmod)

# Options set on top of the base config (scripts/config syntax:
# NAME=y / NAME=n / NAME=<number> / NAME="string").
OPTS=(
	# the sanitizers and checkers the lane is about
	KASAN=y KASAN_GENERIC=y KASAN_INLINE=y KASAN_VMALLOC=y
	KFENCE=y
	PROVE_LOCKING=y DEBUG_ATOMIC_SLEEP=y
	DEBUG_OBJECTS=y DEBUG_OBJECTS_FREE=y DEBUG_OBJECTS_TIMERS=y
	DEBUG_OBJECTS_WORK=y DEBUG_OBJECTS_RCU_HEAD=y
	DEBUG_KMEMLEAK=y DEBUG_KMEMLEAK_DEFAULT_OFF=n
	# scans only when the lane asks (a scan under TCG+KASAN takes seconds)
	DEBUG_KMEMLEAK_AUTO_SCAN=n DEBUG_KMEMLEAK_MEM_POOL_SIZE=64000
	# what bbrx's hooks need (already in the cloud config; asserted below)
	KPROBES=y FUNCTION_TRACER=y DYNAMIC_FTRACE=y DYNAMIC_FTRACE_WITH_REGS=y
	LIVEPATCH=y KALLSYMS=y KALLSYMS_ALL=y MODULE_UNLOAD=y
	# faster build, nothing the lane needs
	DEBUG_INFO_NONE=y DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=n DEBUG_INFO_BTF=n
	MODULE_SIG=n MODULE_SIG_ALL=n SYSTEM_TRUSTED_KEYS='""'
	SYSTEM_REVOCATION_KEYS='""' MODULE_COMPRESS_NONE=y
	"LOCALVERSION=\"$LOCALVERSION\"" LOCALVERSION_AUTO=n
)
# Must hold in the final .config (olddefconfig silently drops what it
# cannot satisfy).
REQUIRED=(KASAN KASAN_GENERIC KFENCE PROVE_LOCKING LOCKDEP DEBUG_ATOMIC_SLEEP
	DEBUG_OBJECTS DEBUG_KMEMLEAK KPROBES KPROBES_ON_FTRACE DYNAMIC_FTRACE_WITH_REGS
	LIVEPATCH MODULE_UNLOAD NET_NS IPV6 TCP_CONG_CUBIC)
REQUIRED_M=(VETH VIRTIO_NET NET_SCH_TBF NET_SCH_HTB NET_SCH_NETEM NET_SCH_FQ
	NET_SCH_INGRESS NET_CLS_BPF INET_DIAG INET_TCP_DIAG TCP_CONG_BBR TUN DUMMY)

# Objects built without KASAN instrumentation: the ones holding the code the
# tsq and delack verifiers match (tcp_small_queue_check.isra.0 in
# tcp_output.c; the PSH test in tcp_event_data_recv() and the receive-buffer
# targets in tcp_input.c). Inline KASAN puts shadow checks in front of and
# between the instructions the verifiers read, so they refuse (correctly)
# and the lane would not exercise those hooks. The kernel's own TCP code in
# these two files is then not checked by KASAN; bbrx's replacements and
# handlers (module code) and everything else are.
NO_KASAN=(net/ipv4:tcp_output.o net/ipv4:tcp_input.o)

# The VM's module list, read from scripts/vm-run (one list to maintain).
vm_modules() {
	sed -n '/^MODULES=(/,/)/p' "$REPO/scripts/vm-run" |
		sed -e 's/^MODULES=(//' -e 's/).*//' | tr -s ' \t' '\n' | sed '/^$/d'
}

# An lsmod-format list of those modules and their dependencies, as the base
# kernel resolves them, for localmodconfig.
lsmod_file() {
	local m kind kp
	echo "Module Size Used by"
	for m in $(vm_modules); do
		while read -r kind kp _; do
			[[ $kind == insmod ]] || continue
			kp=${kp##*/}
			kp=${kp%%.ko*}
			echo "$kp 0 0"
		done < <(modprobe -S "$BASE_KVER" --show-depends "$m" 2>/dev/null || true)
	done | sort -u
}

build_key() {
	{
		dpkg-query -W -f='${Version}\n' linux-source-6.1
		stat -c '%s %Y' "$SRC_TAR"
		sha256sum <"$BASE_CONFIG"
		printf '%s\n' "${OPTS[@]}" "${REQUIRED[@]}" "${REQUIRED_M[@]}"
		lsmod_file
		printf '%s\n' "${NO_KASAN[@]}"
		gcc --version | head -1
		echo v1	# bump when the build steps change
	} | sha256sum | cut -c1-16
}

emit_env() {
	local rel
	rel=$(cat "$CACHE/kernelrelease")
	# vm-run puts it in the guest's /boot (debug_report.sh checks it).
	[[ -f $CACHE/root/boot/config-$rel ]] ||
		install -D -m 0644 "$TREE/.config" "$CACHE/root/boot/config-$rel"
	printf 'VM_KERNEL=%q\nVM_MODDIR=%q\nVM_KVER=%q\nDEBUG_KDIR=%q\n' \
		"$TREE/arch/x86/boot/bzImage" "$CACHE/root" "$rel" "$TREE"
}

install_deps() {
	local p st missing=()
	for p in "${BUILD_PKGS[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
		[[ $st == ii* ]] || missing+=("$p")
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	say "installing build dependencies: ${missing[*]}"
	[[ $(id -u) -eq 0 ]] || die "not root; install: ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
		{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; } ||
		die "apt-get install failed"
}

configure() {
	local o o2 lsm
	say "configuring from $BASE_CONFIG"
	cp "$BASE_CONFIG" "$TREE/.config"
	make -s -C "$TREE" olddefconfig >&2
	lsm=$CACHE/lsmod.txt
	lsmod_file >"$lsm"
	# localmodconfig keeps the built-ins and only the listed modules.
	make -s -C "$TREE" LSMOD="$lsm" localmodconfig >"$CACHE/localmodconfig.log" 2>&1 </dev/null ||
		die "localmodconfig failed (see $CACHE/localmodconfig.log)"
	for o in "${OPTS[@]}"; do
		case $o in
		*=y) "$TREE/scripts/config" --file "$TREE/.config" -e "${o%%=*}" ;;
		*=m) "$TREE/scripts/config" --file "$TREE/.config" -m "${o%%=*}" ;;
		*=n) "$TREE/scripts/config" --file "$TREE/.config" -d "${o%%=*}" ;;
		*=\"*) o2=${o#*=}; o2=${o2#\"}; o2=${o2%\"}
			"$TREE/scripts/config" --file "$TREE/.config" --set-str "${o%%=*}" "$o2" ;;
		*) "$TREE/scripts/config" --file "$TREE/.config" --set-val "${o%%=*}" "${o#*=}" ;;
		esac
	done
	# Modules the selftests need that localmodconfig could not see (not
	# loaded by name, e.g. pulled by a qdisc kind): make sure they are =m.
	for o in "${REQUIRED_M[@]}"; do
		grep -q "^CONFIG_$o=[ym]$" "$TREE/.config" ||
			"$TREE/scripts/config" --file "$TREE/.config" -m "$o"
	done
	make -s -C "$TREE" olddefconfig >&2
	for o in "${REQUIRED[@]}"; do
		grep -q "^CONFIG_$o=y$" "$TREE/.config" || die "CONFIG_$o=y did not survive olddefconfig"
	done
	for o in "${REQUIRED_M[@]}"; do
		grep -q "^CONFIG_$o=[ym]$" "$TREE/.config" || die "CONFIG_$o did not survive olddefconfig"
	done
	cp "$TREE/.config" "$CACHE/config"
}

# no_kasan: KASAN_SANITIZE_<obj> := n for NO_KASAN in their directories'
# Makefiles (idempotent: a resumed build passes here again).
no_kasan() {
	local e dir obj mk
	for e in "${NO_KASAN[@]}"; do
		dir=${e%%:*} obj=${e#*:} mk=$TREE/${e%%:*}/Makefile
		[[ -f $TREE/$dir/${obj%.o}.c ]] || die "no $dir/${obj%.o}.c in the source tree"
		grep -qx "KASAN_SANITIZE_$obj := n" "$mk" ||
			printf '\n# bbrx debug lane (scripts/debug-kernel.sh, NO_KASAN)\nKASAN_SANITIZE_%s := n\n' \
				"$obj" >>"$mk"
	done
}

TREE=$CACHE/linux-source-6.1
[[ -r $SRC_TAR ]] || { install_deps; [[ -r $SRC_TAR ]] || die "$SRC_TAR missing"; }
[[ -r $BASE_CONFIG ]] || die "$BASE_CONFIG missing (the VM's kernel, scripts/deps.sh installs it)"
mkdir -p "$CACHE" 2>/dev/null || die "cannot create $CACHE (set BBRX_DEBUG_KERNEL_DIR)"
exec 9>"$CACHE/.lock"
flock 9	# two lanes on one machine build it once

key=$(build_key)
if [[ -f $CACHE/stamp && $(cat "$CACHE/stamp") == "$key" && -s $TREE/arch/x86/boot/bzImage ]]; then
	say "cached debug kernel $(cat "$CACHE/kernelrelease") in $CACHE (key $key)"
	((print_env)) && emit_env
	exit 0
fi

install_deps
if [[ -f $CACHE/building && $(cat "$CACHE/building") == "$key" && -f $TREE/.config ]]; then
	say "resuming the interrupted build in $TREE (key $key)"
else
	rm -rf "$TREE" "$CACHE/root" "$CACHE/stamp"
	say "unpacking $SRC_TAR into $CACHE"
	tar -C "$CACHE" -xJf "$SRC_TAR"
	[[ -f $TREE/Makefile ]] || die "unexpected layout of $SRC_TAR (no linux-source-6.1/Makefile)"
	configure
	echo "$key" >"$CACHE/building"
fi
no_kasan

start=$SECONDS
# About 3000 objects: 25 min on an idle 2-core host, over 90 min at nice 19
# next to busy VMs.
say "building bzImage + modules with nice -n $NICE make -j$JOBS (25-100 min on 2 cores; log: $CACHE/build.log)"
# Progress: one line a minute with the number of objects built so far.
( while sleep 60; do
	say "  ... $(( (SECONDS - start) / 60 )) min, $(find "$TREE" -name '*.o' -newer "$CACHE/building" 2>/dev/null | wc -l) objects"
  done ) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null' EXIT
if ! nice -n "$NICE" make -C "$TREE" -j"$JOBS" bzImage modules >"$CACHE/build.log" 2>&1; then
	tail -30 "$CACHE/build.log" >&2
	die "kernel build failed (full log: $CACHE/build.log)"
fi
rm -rf "$CACHE/root"
nice -n "$NICE" make -C "$TREE" -s INSTALL_MOD_PATH="$CACHE/root" modules_install >>"$CACHE/build.log" 2>&1 ||
	die "modules_install failed (see $CACHE/build.log)"
kill "$ticker" 2>/dev/null || true
make -s -C "$TREE" kernelrelease >"$CACHE/kernelrelease"
# modules_install leaves links into the tree; the VM runner needs neither.
rm -f "$CACHE/root/lib/modules/$(cat "$CACHE/kernelrelease")"/{build,source}
echo "$key" >"$CACHE/stamp"
rm -f "$CACHE/building"
say "built $(cat "$CACHE/kernelrelease") in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
((print_env)) && emit_env
exit 0
