#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Shared library of the bbrx selftests (model: the kernel's
# tools/testing/selftests/net/forwarding/lib.sh).
#
# A test script sets ALL_TESTS, sources this file, and calls tests_run then
# exit $EXIT_STATUS.  Every test function ends with exactly one log_test.
#
# This file holds the framework (TAP, checks, requirements, background
# processes, cleanup, the dmesg check) and sources the rest, one file per
# concern:
#   lib_num.sh     numbers: medians, repetitions, margins, float compare
#   lib_module.sh  the knobs' tables, load and unload, counters, sysctls
#   lib_topo.sh    the namespaces and the NICs lent to them
#   lib_shape.sh   shaping the path
#   lib_flow.sh    iperf3, ping, the sink helper, batches of short flows
#   lib_ss.sh      ss -ti samples, snmp and netstat counters
#   lib_trace.sh   tracefs, bbrx's and kprobe trace events
# The hook tests also source lib_hooks.sh (hook states, requirements).
#
# Topology (topo_create), three network namespaces with unique names:
#
#   snd-<sfx>  SND_IF ============== RTR_IF_S  rtr-<sfx>  RTR_IF_R ---- RCV_IF  rcv-<sfx>
#   10.71.1.1       NIC pair (NETIFS)     10.71.1.2   10.71.2.1    veth     10.71.2.2
#   fd71:1::1       or veth                fd71:1::2   fd71:2::1            fd71:2::2
#
# The sender-router hop uses two NICs cabled back to back (in the VM two
# virtio-net NICs wired by QEMU), named as the kernel's forwarding/lib.sh
# takes them: the script's arguments ("test.sh if0 if1"), else NETIFS[p1]
# and NETIFS[p2] of a forwarding.config beside the tests, else the string
# NETIFS="if0 if1"; a veth pair when none names them.  Each NIC gets back
# its offloads (ethtool -k), gso_max_size/gso_max_segs, qdiscs, addresses
# and up state when the script ends.  The router-receiver hop is always
# veth.
# Shaping, so that queues form where real networks form them: the
# bottleneck (tbf, or htb with a sized child) sits on the router's egress
# toward the receiver,
# delay (netem, limit above the BDP) on the receiver's egress (ACK path),
# random loss per packet after segmentation on the router hop.
#
# Environment knobs:
#   NETIFS       "if0 if1" NIC pair for the sender-router hop (default: veth;
#                a forwarding.config or the script's arguments win)
#   TESTS        run only these test functions (default: $ALL_TESTS)
#   BBRX_KO      path of tcp_bbrx.ko: every load is an insmod of it, not a
#                modprobe (tests of the kernel's on-demand load, which only
#                finds an installed module, skip those parts)
#   BBRX_BIN_DIR where the C helpers and test modules were built, when not
#                beside the scripts
#   BBRX_REPS    repetitions for medians (default 3)
#   BBRX_VERBOSE 1 = dump raw samples on failure
#   BBRX_FUNCTIONAL 1 = throughput/goodput/rate assertions (check_ratio) are
#                logged, not asserted (make check-debug: a debug kernel
#                under TCG is too slow for them); counters and mechanisms
#                are still asserted

ksft_skip=4

# Minimal systems (the VM initramfs) may have mawk or gawk but no "awk".
# BBRX_AWK=mawk forces one (to check the scripts with mawk on a full host).
if [[ -n ${BBRX_AWK:-} ]]; then
	eval "awk() { $BBRX_AWK \"\$@\"; }"
elif ! command -v awk >/dev/null; then
	if command -v mawk >/dev/null; then
		awk() { mawk "$@"; }
	elif command -v gawk >/dev/null; then
		awk() { gawk "$@"; }
	fi
fi

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The C helpers and the test modules: beside the scripts (make -C
# selftests, an installed kselftest tree), or where a kernel tree's
# selftests build put them (BBRX_BIN_DIR: the Makefile's run_tests sets it
# to the output directory, O=).
BIN_DIR=$LIB_DIR
if [[ -n ${BBRX_BIN_DIR:-} ]]; then
	BIN_DIR=$(cd "$BBRX_BIN_DIR" 2>/dev/null && pwd) ||
		{ echo "# BBRX_BIN_DIR=$BBRX_BIN_DIR: no such directory"; exit 1; }
fi
PATH=$BIN_DIR:$LIB_DIR:$PATH

# The NIC pair (see the header), as one string from here on. The
# arguments are the sourcing script's (scripts that take others, as the
# bench's guest script, source this file without them).
NETIFS_FROM=
if [[ $# -gt 0 ]]; then
	NETIFS="$1 ${2:-}"
	NETIFS_FROM="arguments"
	[[ $# -le 2 ]] || echo "# the sender-router hop needs two NICs: arguments after '$2' are not used"
elif [[ -f $LIB_DIR/forwarding.config ]]; then
	unset NETIFS
	declare -gA NETIFS=()
	# shellcheck source=/dev/null
	source "$LIB_DIR/forwarding.config" ||
		{ echo "# $LIB_DIR/forwarding.config failed"; exit 1; }
	netifs_p1=${NETIFS[p1]:-} netifs_p2=${NETIFS[p2]:-}
	unset NETIFS
	[[ -n $netifs_p1 && -n $netifs_p2 ]] ||
		{ echo "# $LIB_DIR/forwarding.config: NETIFS[p1] and NETIFS[p2] must both name a NIC"; exit 1; }
	NETIFS="$netifs_p1 $netifs_p2"
	NETIFS_FROM="forwarding.config"
elif [[ -n ${NETIFS:-} ]]; then
	NETIFS_FROM="NETIFS"
fi

EXIT_STATUS=0
RET=0
RETRY_TESTS=${RETRY_TESTS:-}
TEST_ATTEMPT=0
LOG_DRY=0
DRY_FAILED=0
retmsg=
TEST_NUM=0
N_PASS=0
N_FAIL=0
N_SKIP=0
REPS=${BBRX_REPS:-3}
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "# BBRX_REPS=$REPS: want a count, 1 or more"; exit 1; }

SFX=${BBRX_SFX:-$$}
SND=snd-$SFX
RTR=rtr-$SFX
RCV=rcv-$SFX

SND_IP4=10.71.1.1
RTR_IP4_S=10.71.1.2
RTR_IP4_R=10.71.2.1
RCV_IP4=10.71.2.2
SND_IP6=fd71:1::1
RTR_IP6_S=fd71:1::2
RTR_IP6_R=fd71:2::1
RCV_IP6=fd71:2::2

SND_IF=
RTR_IF_S=
RTR_IF_R=r1
RCV_IF=v0
NETIFS_USED=

IPERF_PORT=5201
SINK_PORT=5301
CPORT=41000
MSS=1448
# Goodput limit of an L2 rate: payload 1448 of 1514 bytes per frame.
GOODPUT_FRAC=$(awk 'BEGIN { printf "%.4f", 1448 / 1514 }')

BG_PIDS=()
TMPD=$(mktemp -d /tmp/bbrx-selftest.XXXXXX)
TOPO_UP=0


##############################################################################
# TAP and result bookkeeping

echo "TAP version 13"
echo "# $(basename "$0"): kernel $(uname -r) on $(uname -m), NETIFS='${NETIFS:-}'${NETIFS_FROM:+ (from $NETIFS_FROM)}"

log_info()
{
	echo "# INFO: $*"
}

log_warn()
{
	echo "# WARN: $*"
}

check_err()
{
	local err=$1
	local msg=$2

	if [[ $RET -eq 0 && $err -ne 0 ]]; then
		RET=$err
		retmsg=$msg
	fi
}

check_fail()
{
	local err=$1
	local msg=$2

	if [[ $RET -eq 0 && $err -eq 0 ]]; then
		RET=1
		retmsg=$msg
	fi
}

# check_ratio ERR MSG: check_err for an assertion on throughput, goodput or
# a rate measured from them. With BBRX_FUNCTIONAL=1 a failure is only
# logged: the debug-kernel lane asserts functional outcomes only.
check_ratio()
{
	if [[ ${BBRX_FUNCTIONAL:-0} -eq 1 ]]; then
		[[ $1 -eq 0 ]] || log_info "not asserted (BBRX_FUNCTIONAL=1): $2"
		return 0
	fi
	check_err "$@"
}

log_test()
{
	local name=$1
	local opt=${2:+ ($2)}

	if [[ $RET -ne 0 && ${LOG_DRY:-0} -eq 1 ]]; then
		DRY_FAILED=1
		echo "# attempt $((TEST_ATTEMPT + 1)) failed, retrying: $name$opt"
		[[ -n $retmsg ]] && echo "#	$retmsg"
		return 1
	fi
	TEST_NUM=$((TEST_NUM + 1))
	if [[ $RET -ne 0 ]]; then
		EXIT_STATUS=1
		N_FAIL=$((N_FAIL + 1))
		echo "not ok $TEST_NUM $name$opt"
		[[ -n $retmsg ]] && echo "#	$retmsg"
		return 1
	fi
	N_PASS=$((N_PASS + 1))
	echo "ok $TEST_NUM $name$opt"
	return 0
}

log_test_skip()
{
	local name=$1
	local why=$2

	TEST_NUM=$((TEST_NUM + 1))
	N_SKIP=$((N_SKIP + 1))
	echo "ok $TEST_NUM $name # SKIP $why"
}

# Skip the whole script (before or between tests).
ksft_exit_skip()
{
	echo "# SKIP: $*"
	echo "1..$TEST_NUM"
	exit $ksft_skip
}

require_command()
{
	local cmd

	for cmd in "$@"; do
		command -v "$cmd" >/dev/null ||
			ksft_exit_skip "command $cmd not found"
	done
}

require_root()
{
	[[ $(id -u) -eq 0 ]] || ksft_exit_skip "needs root"
}

# true if a qdisc kind can be instantiated (checked on a netns loopback).
qdisc_available()
{
	local kind=$1; shift
	local ns=qchk-$SFX ok=1

	if [[ $# -eq 0 ]]; then
		case $kind in
		tbf) set -- rate 1mbit burst 10k limit 10k ;;
		htb) set -- default 1 ;;
		netem) set -- delay 1ms ;;
		esac
	fi
	modprobe -q "sch_$kind" 2>/dev/null
	ip netns add "$ns" 2>/dev/null || return 1
	tc -n "$ns" qdisc add dev lo root "$kind" "$@" >/dev/null 2>&1 && ok=0
	ip netns del "$ns"
	return $ok
}

require_qdisc()
{
	local kind

	for kind in "$@"; do
		qdisc_available "$kind" || ksft_exit_skip "qdisc $kind not available"
	done
}

# measured: the test's measure(), run once, by the first case that needs
# it: a script whose cases do not all share its measurements calls this in
# those that do, so that TESTS=case pays only for what case reads.
MEASURED=0
measured()
{
	((MEASURED)) && return 0
	MEASURED=1
	measure
}

# Run each test function of $TESTS (default $ALL_TESTS), then the dmesg check.
#
# Performance tests listed in RETRY_TESTS get BBRX_RETRIES (default 1) more
# attempts: under TCG a guest whose host is busy (another VM) runs its paced
# flows slower, and one retry with more runs tells that from a real
# regression.  A failed attempt is logged as a diagnostic, only the last
# attempt's result counts.  Test functions see TEST_ATTEMPT (0, 1, ...) and
# may measure more on a retry.
tests_run()
{
	local t retries

	for t in ${TESTS:-$ALL_TESTS}; do
		retries=0
		[[ " $RETRY_TESTS " == *" $t "* ]] && retries=${BBRX_RETRIES:-1}
		for ((TEST_ATTEMPT = 0; ; TEST_ATTEMPT++)); do
			RET=0
			retmsg=
			LOG_DRY=0
			((TEST_ATTEMPT < retries)) && LOG_DRY=1
			DRY_FAILED=0
			if ((TEST_ATTEMPT > 0)); then
				log_info "--- $t (attempt $((TEST_ATTEMPT + 1)))"
			else
				log_info "--- $t"
			fi
			$t
			((DRY_FAILED)) || break
		done
		LOG_DRY=0
	done
	TEST_ATTEMPT=0
	dmesg_check
}

# Print the plan and the summary; returns the exit code for the script.
tests_done()
{
	echo "1..$TEST_NUM"
	echo "# $(basename "$0"): $N_PASS passed, $N_FAIL failed, $N_SKIP skipped"
	if [[ $N_FAIL -gt 0 ]]; then
		EXIT_STATUS=1
	elif [[ ${KSFT_FAIL_ON_SKIP:-0} == 1 && $N_SKIP -gt 0 ]]; then
		# make check: a skipped test is a test that did not run.
		echo "# $N_SKIP test(s) skipped and KSFT_FAIL_ON_SKIP=1"
		EXIT_STATUS=1
	elif [[ $N_PASS -le 1 && $N_SKIP -gt 0 ]]; then
		# Only the dmesg check passed: everything real was skipped.
		EXIT_STATUS=$ksft_skip
	fi
	return $EXIT_STATUS
}

##############################################################################
# Background processes and cleanup

bg_track()
{
	BG_PIDS+=("$@")
}

bg_kill()
{
	local p

	for p in "$@"; do
		kill "$p" 2>/dev/null
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null
	done
}


cleanup()
{
	[[ ${#BG_PIDS[@]} -gt 0 ]] && bg_kill "${BG_PIDS[@]}"
	BG_PIDS=()
	topo_destroy
	[[ -n ${LC_BPF:-} ]] && umount "$LC_BPF" 2>/dev/null
	[[ -n $EXTRA_NETNS ]] && for ns in $EXTRA_NETNS; do ip netns del "$ns" 2>/dev/null; done
	if [[ -n $TMPD && -d $TMPD ]]; then
		if [[ $EXIT_STATUS -ne 0 && ${BBRX_KEEP:-0} -eq 1 ]]; then
			echo "# kept $TMPD"
		else
			rm -rf "$TMPD"
		fi
	fi
}

trap cleanup EXIT
trap 'exit 1' INT TERM


##############################################################################
# dmesg

DMESG_TAG="bbrx-selftest[$SFX]: $(basename "$0") start"
DMESG_OK=0
if echo "$DMESG_TAG" >/dev/kmsg 2>/dev/null; then
	DMESG_OK=1
else
	DMESG_LINES=$(dmesg 2>/dev/null | wc -l)
fi

dmesg_since_start()
{
	if [[ $DMESG_OK -eq 1 ]]; then
		dmesg | awk -v tag="$DMESG_TAG" 'on { print } index($0, tag) { on = 1 }'
	else
		dmesg 2>/dev/null | tail -n +"$((DMESG_LINES + 1))"
	fi
}

# dmesg_check: fail if the kernel logged an oops, warning, bug, atomic sleep
# or lockdep report since the script started.
dmesg_check()
{
	local bad

	RET=0
	retmsg=
	if ! dmesg >/dev/null 2>&1; then
		log_test_skip "dmesg clean" "dmesg not readable"
		return
	fi
	if ! dmesg_since_start >"$TMPD/dmesg.since"; then
		check_err 1 "could not extract the kernel log since the start"
	fi
	# bbrx's own lines are not reports (a refusal may name a lockdep or
	# KASAN function the replacement calls on a debug kernel)
	bad=$(grep -v '\] bbrx: ' "$TMPD/dmesg.since" |
		grep -E 'Oops|WARNING:|BUG:|scheduling while atomic|lockdep|circular locking|KASAN|general protection fault|Call Trace:' |
		head -n 20)
	if [[ -n $bad ]]; then
		check_err 1 "kernel log since start: $(echo "$bad" | head -n 1)"
		echo "$bad" | sed 's/^/# dmesg: /'
		dmesg_since_start | tail -n 60 | sed 's/^/# dmesg: /'
	fi
	log_test "dmesg clean (no Oops, WARNING, BUG, atomic sleep, lockdep)"
}

##############################################################################
# The rest of the library, one file per concern

for lib_part in num module topo shape flow ss trace; do
	# shellcheck source=/dev/null
	source "$LIB_DIR/lib_$lib_part.sh" || { echo "# $LIB_DIR/lib_$lib_part.sh failed"; exit 1; }
done
unset lib_part
