#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Shared library of the bbrx selftests (model: the kernel's
# tools/testing/selftests/net/forwarding/lib.sh).
#
# A test script sets ALL_TESTS, sources this file, and calls tests_run then
# exit $EXIT_STATUS.  Every test function ends with exactly one log_test.
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

# The knobs of net.ipv4.bbrx: name default min max. The names must be the
# module's (bbrx_sysctl.sh fails on a name in one and not the other, read
# from /proc/sys/net/ipv4/bbrx of the loaded module); the defaults and
# ranges are the tests' own copy of bbrx_params[] in module/sysctl.c on
# purpose, as the oracle: a test that read them from the module could not
# catch a wrong default or range.
# BBRX_SYSCTL_TABLE: the model knobs.
BBRX_SYSCTL_TABLE="\
scope 0 0 1
high_gain 2885 1000 10000
drain_gain 344 100 1000
cwnd_gain 2000 1000 10000
probe_bw_up_gain 1250 1000 3000
probe_bw_down_gain 750 100 1000
extra_acked_gain 1000 0 10000
min_rtt_win_ms 10000 100 600000
probe_rtt_ms 200 10 10000
tso_margin 3 0 16
gso_cap 0 0 1
pacing_shift 10 4 16
lt_bw 1 0 1
bbrx3_loss_thresh 20 1 500
bbrx3_beta 700 100 1000
bbrx3_headroom 150 0 500
bbrx3_ecn 0 0 1
bbrx3_ecn_thresh 500 1 1000
bbrx3_ecn_max_rtt_us 5000 0 10000000
bbrx3_probe_rtt_win_ms 5000 100 10000"

# BBRX_POLICY_TABLE: the hook policies (0 = the kernel's behaviour); which
# hooks each needs: POLICY_HOOKS in lib_hooks.sh.
BBRX_POLICY_TABLE="\
autocork 0 0 3
tsq 0 0 2
rcvbuf 0 0 1
delack 0 0 2"

# bbrx_policy_names: the hook policies of BBRX_POLICY_TABLE, space separated.
bbrx_policy_names()
{
	awk '{ printf "%s%s", sep, $1; sep = " " } END { print "" }' <<<"$BBRX_POLICY_TABLE"
}

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
# Numbers

# median of the arguments, or of stdin (one number per line) if none.
median()
{
	if [[ $# -gt 0 ]]; then
		printf '%s\n' "$@"
	else
		cat
	fi | grep -E '^-?[0-9.]+(e[-+]?[0-9]+)?$' | sort -g |
		awk '{ v[NR] = $1 }
		     END { if (NR == 0) { print "nan"; exit 1 }
			   if (NR % 2) printf "%g\n", v[(NR + 1) / 2]
			   else printf "%g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# col_median N FILE: median of column N of a whitespace-separated file.
col_median()
{
	awk -v n="$1" '{ print $n }' "$2" | median
}

# mode (most frequent value) of stdin; ties go to the smaller value.
mode()
{
	grep -E '^-?[0-9.]+$' | sort -g | uniq -c |
		awk '$1 > best { best = $1; v = $2 } END { if (!NR) exit 1; print v }'
}

# calc EXPR: floating point arithmetic with awk.
calc()
{
	awk "BEGIN { printf \"%.4g\n\", $* }"
}

# fcmp A OP B: floating point comparison (returns 0 if true).
fcmp()
{
	awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"
}

# in_range V LO HI
in_range()
{
	fcmp "$1" '>=' "$2" && fcmp "$1" '<=' "$3"
}

bdp_bytes()
{
	local rate_mbit=$1 rtt_ms=$2

	awk -v r="$rate_mbit" -v t="$rtt_ms" 'BEGIN { printf "%d\n", r * 1e6 / 8 * t / 1000 }'
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

ns_kill_all()
{
	local ns=$1 pids

	pids=$(ip netns pids "$ns" 2>/dev/null)
	if [[ -n $pids ]]; then
		kill $pids 2>/dev/null
		sleep 0.2
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[[ -n $pids ]] && kill -9 $pids 2>/dev/null
	fi
	ns_abort_tcp "$ns"
}

# ns_abort_tcp NS: abort (SOCK_DESTROY, ss -K) the TCP sockets left in NS
# once its processes are gone.  A closed socket with unsent data is an
# orphan that keeps its congestion control, and so tcp_bbrx, until it
# drains or its retries run out; a slowly paced one (stress_scale's
# 200 kbit/s flows) or one whose netns is then deleted holds the module
# for minutes, and the next test's rmmod waits.  Where the kernel lacks
# CONFIG_INET_DIAG_DESTROY this does nothing and the orphans drain.
ns_abort_tcp()
{
	ip netns exec "$1" ss -K -tan &>/dev/null
}

# netif_part DEV PART: one part of a NIC's state, as netif_save keeps it:
# features (ethtool -k), gso (gso_max_size/segs), qdisc, addr (global).
netif_part()
{
	case $2 in
	features) ethtool -k "$1" 2>/dev/null ;;
	gso) ip -d link show dev "$1" | grep -o 'gso_max_[a-z]* [0-9]*' ;;
	qdisc) tc qdisc show dev "$1" ;;
	addr) ip -o addr show dev "$1" scope global ;;
	esac
}

# netif_save DEV: what the NIC has before a test changes it (offloads,
# GSO limits, qdiscs, addresses, up state), in $TMPD/netif-DEV.*.
netif_save()
{
	local dev=$1 f=$TMPD/netif-$1 p

	for p in features gso qdisc addr; do
		netif_part "$dev" "$p" >"$f.$p"
	done
	ip -o link show dev "$dev" | grep -q '[<,]UP[,>]' && echo up >"$f.up"
	return 0
}

# netif_state DEV: the state netif_save keeps, as one text (to compare).
netif_state()
{
	netif_part "$1" features
	netif_part "$1" gso
	netif_part "$1" qdisc
	netif_part "$1" addr | awk '{ print $3, $4 }'
}

# netif_restore_saved DEV: give the NIC, back in this netns, what
# netif_save saw; warns with what still differs.
netif_restore_saved()
{
	local dev=$1 f=$TMPD/netif-$1 name val kind handle spec line now

	[[ -f $f.qdisc ]] || return 0
	# Offloads: the changeable ones (not [fixed]) that differ, groups
	# before their members (ethtool -k's order), twice for the
	# dependencies. "off [requested on]": the request is what is set (the
	# device or another feature keeps it off).
	for _ in 1 2; do
		now=$(netif_part "$dev" features)
		[[ $now == "$(cat "$f.features")" ]] && break
		while IFS= read -r line; do
			[[ $'\n'$now$'\n' == *$'\n'"$line"$'\n'* ]] && continue
			name=${line%%:*}
			name=${name//$'\t'/}
			val=${line#*: }
			[[ $val == *"[requested "* ]] && val=${val##*\[requested }
			val=${val%%[]\ ]*}
			[[ $val == on || $val == off ]] || continue
			ethtool -K "$dev" "$name" "$val" &>/dev/null
		done < <(grep -v '\[fixed\]\|^Features' "$f.features")
	done
	# shellcheck disable=SC2046  # "gso_max_size N gso_max_segs N"
	ip link set dev "$dev" $(tr '\n' ' ' <"$f.gso")
	# A move between namespaces leaves the default qdisc: put back a root
	# and an ingress/clsact qdisc of another kind (their options as tc
	# shows them; filters are not restored).
	tc qdisc del dev "$dev" ingress &>/dev/null
	tc qdisc del dev "$dev" clsact &>/dev/null
	while read -r line; do
		read -r _ kind handle _ <<<"$line"
		case $line in
		*" root "*)
			[[ $(tc qdisc show dev "$dev" | grep ' root ') == "$line" ]] && continue
			[[ $handle == 0: ]] && handle= || handle="handle $handle"
			spec=$(sed 's/^qdisc [^ ]* [^ ]* root //; s/^refcnt [0-9]* //' <<<"$line")
			# tc's own words; else packet counts without their "p"
			# (tc prints "limit 500p", parses "limit 500"); else the
			# kind's defaults
			# shellcheck disable=SC2086
			tc qdisc replace dev "$dev" root $handle "$kind" $spec &>/dev/null ||
				tc qdisc replace dev "$dev" root $handle "$kind" \
					$(sed -E 's/\<([0-9]+)p\>/\1/g' <<<"$spec") &>/dev/null ||
				tc qdisc replace dev "$dev" root $handle "$kind" &>/dev/null ;;
		"qdisc ingress "*|"qdisc clsact "*)
			tc qdisc add dev "$dev" "$kind" &>/dev/null ;;
		esac
	done <"$f.qdisc"
	while read -r _ _ _ val _; do
		ip addr add "$val" dev "$dev" &>/dev/null
	done <"$f.addr"
	[[ -f $f.up ]] && ip link set dev "$dev" up
	line=$(diff <({ cat "$f.features" "$f.gso" "$f.qdisc"; awk '{ print $3, $4 }' "$f.addr"; }) \
		<(netif_state "$dev"))
	[[ -z $line ]] || log_warn "$dev not restored as it was before the test: $(tr '\n' ' ' <<<"$line")"
}

# netif_restore NS DEV: clear the NIC in NS and move it back to the initial
# netns (which resets its qdiscs); netif_restore_saved then restores it.
netif_restore()
{
	local ns=$1 dev=$2

	[[ -z $dev ]] && return
	if ip netns list | grep -qw "$ns" && ip -n "$ns" link show dev "$dev" &>/dev/null; then
		tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null
		ip -n "$ns" addr flush dev "$dev" 2>/dev/null
		ip -n "$ns" link set dev "$dev" down
		ip -n "$ns" link set dev "$dev" netns 1
	fi
}

topo_destroy()
{
	local ns i dev

	[[ $TOPO_UP -eq 1 ]] || return 0
	for ns in $SND $RTR $RCV; do
		ns_kill_all "$ns"
	done
	if [[ -n $NETIFS_USED ]]; then
		netif_restore "$SND" "$SND_IF"
		netif_restore "$RTR" "$RTR_IF_S"
	fi
	for ns in $SND $RTR $RCV; do
		ip netns del "$ns" 2>/dev/null
	done
	if [[ -n $NETIFS_USED ]]; then
		# Wait for the NICs to be back in the initial namespace so the
		# next test script finds them.
		for dev in $NETIFS_USED; do
			for ((i = 0; i < 100; i++)); do
				ip link show dev "$dev" &>/dev/null && break
				sleep 0.1
			done
			netif_restore_saved "$dev"
		done
	fi
	TOPO_UP=0
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
# Modules, counters and sysctls

bbrx_module_loaded()
{
	[[ -d /sys/module/tcp_bbrx ]]
}

# bbrx_installed: tcp_bbrx is installed where modprobe (and the kernel's
# on-demand load, request_module) finds it.
bbrx_installed()
{
	modinfo tcp_bbrx &>/dev/null
}

# bbrx_modload [PARAM=VALUE...]: load tcp_bbrx with these parameters:
# insmod $BBRX_KO when set (that file, installed or not), else modprobe.
# Errors on stderr.
bbrx_modload()
{
	if [[ -n ${BBRX_KO:-} ]]; then
		[[ -f $BBRX_KO && -r $BBRX_KO ]] ||
			{ echo "BBRX_KO=$BBRX_KO: no such file" >&2; return 1; }
		insmod "$BBRX_KO" "$@"
	elif bbrx_installed; then
		modprobe tcp_bbrx "$@"
	else
		echo "tcp_bbrx is not installed (no modinfo tcp_bbrx) and BBRX_KO is not set" >&2
		return 1
	fi
}

# bbrx_loader: how bbrx_modload loads the module, for messages.
bbrx_loader()
{
	if [[ -n ${BBRX_KO:-} ]]; then
		echo "insmod $BBRX_KO"
	else
		echo modprobe
	fi
}

# bbrx_modinfo FIELD: modinfo's FIELD of the module bbrx_modload loads.
bbrx_modinfo()
{
	modinfo -F "$1" "${BBRX_KO:-tcp_bbrx}" 2>/dev/null
}

# bbrx_on_demand: the kernel can load tcp_bbrx by name (a sysctl or
# setsockopt naming bbrx loads it). Not when BBRX_KO names the module
# only: the kernel would load the installed one, or none.
bbrx_on_demand()
{
	[[ -z ${BBRX_KO:-} ]] && bbrx_installed
}

# Load tcp_bbrx (and the modules the tests use); skip if there is none to
# load, fail if BBRX_KO names a missing file.
bbrx_module_load()
{
	local m

	for m in inet_diag tcp_diag tcp_bbr veth sch_tbf sch_htb sch_netem; do
		modprobe -q "$m" 2>/dev/null
	done
	bbrx_module_loaded && return 0
	[[ -n ${BBRX_KO:-} ]] || bbrx_installed ||
		ksft_exit_skip "tcp_bbrx is not installed (no modinfo tcp_bbrx) and BBRX_KO is not set"
	bbrx_modload || return 1
	bbrx_module_loaded
}

require_bbrx()
{
	require_root
	bbrx_module_load || {
		echo "# loading tcp_bbrx failed ($(bbrx_loader))"
		RET=1 retmsg="loading tcp_bbrx failed"
		log_test "load tcp_bbrx"
		tests_done
		exit 1
	}
}

# bbrx_stat NAME [NS]: print counter NAME of /proc/net/bbrx_stat (of netns NS).
# Handles any number of "Prefix: names" / "Prefix: values" line pairs.
bbrx_stat()
{
	local name=$1 ns=$2
	local -a cmd=(cat /proc/net/bbrx_stat)

	[[ -n $ns ]] && cmd=(ip netns exec "$ns" cat /proc/net/bbrx_stat)
	"${cmd[@]}" 2>/dev/null | awk -v n="$name" '
		{ p = $1 }
		!(p in names) { names[p] = $0; next }
		{
			split(names[p], h)
			for (i = 2; i <= NF; i++)
				if (h[i] == n) { print $i; found = 1; exit }
			delete names[p]
		}
		END { exit !found }'
}

# bbrx_stat_all [NS]: the counters as "Name=value ..." for logs.
bbrx_stat_all()
{
	local ns=$1
	local -a cmd=(cat /proc/net/bbrx_stat)

	[[ -n $ns ]] && cmd=(ip netns exec "$ns" cat /proc/net/bbrx_stat)
	"${cmd[@]}" 2>/dev/null | awk '
		{ p = $1 }
		!(p in names) { names[p] = $0; next }
		{ split(names[p], h); s = ""
		  for (i = 2; i <= NF; i++) s = s h[i] "=" $i " "
		  print s; delete names[p] }'
}

bbrx_sysctl_set()
{
	local ns=$1 name=$2 val=$3

	ip netns exec "$ns" sysctl -qw "net.ipv4.bbrx.$name=$val"
}

bbrx_sysctl_get()
{
	local ns=$1 name=$2

	ip netns exec "$ns" sysctl -n "net.ipv4.bbrx.$name"
}

##############################################################################
# Topology

ns_sysctl()
{
	local ns=$1; shift

	ip netns exec "$ns" sysctl -qw "$@"
}

# topo_create: build snd - rtr - rcv (see the header).  Returns non-zero and
# prints why on failure.
topo_create()
{
	local ns if0 if1 i

	TOPO_UP=1
	# A script that builds the topology again (the bench) starts clean.
	NETIFS_USED=
	for ns in $SND $RTR $RCV; do
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up
		ns_sysctl "$ns" net.ipv6.conf.all.accept_dad=0 \
			net.ipv6.conf.default.accept_dad=0 \
			net.ipv6.conf.all.accept_ra=0 \
			net.ipv6.conf.default.accept_ra=0 \
			net.ipv4.tcp_no_metrics_save=1
		# A new netns inherits init_net's default; make it cubic so
		# that only the flows a test chooses use bbrx (a non-init
		# netns may only pick "allowed" ones, hence no error check).
		ns_sysctl "$ns" net.ipv4.tcp_congestion_control=cubic 2>/dev/null
	done

	if [[ -n ${NETIFS:-} ]]; then
		read -r if0 if1 _ <<<"$NETIFS"
		[[ -n $if0 && -n $if1 ]] || { echo "# NETIFS needs two interfaces"; return 1; }
		for i in $if0 $if1; do
			ip link show dev "$i" &>/dev/null ||
				{ echo "# NETIFS interface $i not found"; return 1; }
		done
		[[ $if0 != "$if1" ]] || { echo "# NETIFS names $if0 twice"; return 1; }
		NETIFS_USED="$if0 $if1"
		netif_save "$if0"
		netif_save "$if1"
		log_info "sender-router hop: NICs $if0 - $if1 (${NETIFS_FROM:-NETIFS}); router-receiver: veth"
		ip link set dev "$if0" down
		ip link set dev "$if1" down
		ip addr flush dev "$if0"
		ip addr flush dev "$if1"
		ip link set dev "$if0" netns "$SND" || return 1
		ip link set dev "$if1" netns "$RTR" || return 1
		SND_IF=$if0
		RTR_IF_S=$if1
	else
		log_info "sender-router and router-receiver hops: veth"
		SND_IF=s0
		RTR_IF_S=r0
		ip link add "$SND_IF" netns "$SND" type veth peer "$RTR_IF_S" netns "$RTR" || return 1
	fi
	ip link add "$RTR_IF_R" netns "$RTR" type veth peer "$RCV_IF" netns "$RCV" || return 1

	ip -n "$SND" addr add "$SND_IP4/24" dev "$SND_IF"
	ip -n "$SND" addr add "$SND_IP6/64" dev "$SND_IF" nodad
	ip -n "$RTR" addr add "$RTR_IP4_S/24" dev "$RTR_IF_S"
	ip -n "$RTR" addr add "$RTR_IP6_S/64" dev "$RTR_IF_S" nodad
	ip -n "$RTR" addr add "$RTR_IP4_R/24" dev "$RTR_IF_R"
	ip -n "$RTR" addr add "$RTR_IP6_R/64" dev "$RTR_IF_R" nodad
	ip -n "$RCV" addr add "$RCV_IP4/24" dev "$RCV_IF"
	ip -n "$RCV" addr add "$RCV_IP6/64" dev "$RCV_IF" nodad
	ip -n "$SND" link set "$SND_IF" up
	ip -n "$RTR" link set "$RTR_IF_S" up
	ip -n "$RTR" link set "$RTR_IF_R" up
	ip -n "$RCV" link set "$RCV_IF" up

	ns_sysctl "$RTR" net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	ip -n "$SND" route add default via "$RTR_IP4_S"
	ip -n "$SND" -6 route add default via "$RTR_IP6_S"
	ip -n "$RCV" route add default via "$RTR_IP4_R"
	ip -n "$RCV" -6 route add default via "$RTR_IP6_R"

	topo_wait || return 1
}

# Wait until IPv4 and IPv6 get through snd -> rcv.
topo_wait()
{
	local i

	for ((i = 0; i < 50; i++)); do
		ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP4" &>/dev/null &&
			ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP6" &>/dev/null &&
			return 0
		sleep 0.2
	done
	echo "# no connectivity snd -> rcv"
	return 1
}

# use_veth WHY: the sender-router hop is veth in this test, whatever NICs
# were named (WHY: what the test needs of veth); says so when some were.
use_veth()
{
	[[ -n ${NETIFS:-} ]] && log_info "sender-router hop: veth, not the NICs $NETIFS: $*"
	NETIFS=
}

# Create the topology or fail the whole script.
require_topo()
{
	if ! topo_create; then
		RET=1 retmsg="topology setup failed"
		log_test "topology setup"
		tests_done
		exit 1
	fi
}

##############################################################################
# Shaping (see the header: where each queue and delay sits, and why)

# The reference path of the tests: 100 Mbit/s bottleneck, 20 ms RTT.
PATH_RATE=100
PATH_RTT=20
PATH_BDP=$(bdp_bytes $PATH_RATE $PATH_RTT)
PATH_GOODPUT_MAX=$(awk -v r=$PATH_RATE -v f="$GOODPUT_FRAC" 'BEGIN { printf "%.1f", r * f }')

# path_bottleneck [BUF_BDP] [LOSS_PCT]: tbf PATH_RATE with a BUF_BDP x BDP
# buffer (default 1) on the router, PATH_RTT of delay on the ACK path.
path_bottleneck()
{
	local bufbdp=${1:-1} loss=$2 buf

	buf=$(awk -v b="$PATH_BDP" -v m="$bufbdp" 'BEGIN { printf "%d", b * m }')
	shape_bottleneck "$PATH_RATE" "$buf" $loss &&
		shape_delay "$PATH_RTT" "$PATH_BDP"
}

# shape_bottleneck RATE_MBIT BUF_BYTES [LOSS_PCT]
#   Router egress toward the receiver: tbf at RATE with a BUF_BYTES queue.
#   With LOSS_PCT: htb at RATE with a netem child dropping LOSS_PCT% per
#   packet (sized to BUF_BYTES); call hop_per_packet so the skbs are packets.
shape_bottleneck()
{
	local rate=$1 buf=$2 loss=$3
	local pkts

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	if [[ -z $loss ]]; then
		tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: \
			tbf rate "${rate}mbit" burst "$(shape_burst "$rate")" limit "$buf"
	else
		pkts=$(( buf / 1514 > 10 ? buf / 1514 : 10 ))
		shape_rate_netem "$rate" loss "${loss}%" limit "$pkts"
	fi
}

# shape_peak_bucket RATE_MBIT PEAK_MBIT BUCKET_BYTES BUF_BYTES: the
# router's egress toward the receiver at PEAK (htb) for a first
# BUCKET_BYTES, then at RATE (a tbf under it with that bucket): a path whose
# rate falls once a flow has measured PEAK.
shape_peak_bucket()
{
	local burst

	burst=$(shape_burst "$2")
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${2}mbit" ceil "${2}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: \
		tbf rate "${1}mbit" burst "$3" limit "$4"
}

# shape_burst RATE_MBIT: a shaper's bucket, 2 ms worth of tokens and at
# least 10 full frames.
shape_burst()
{
	awk -v r="$1" 'BEGIN { b = r * 1e6 / 8 * 0.002; if (b < 15140) b = 15140; printf "%d", b }'
}

# shape_rate_netem RATE_MBIT NETEM_ARGS...: the router's egress toward the
# receiver at RATE (htb, shape_burst) into a netem with those arguments.
shape_rate_netem()
{
	local rate=$1 burst

	shift
	burst=$(shape_burst "$rate")
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${rate}mbit" ceil "${rate}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: netem "$@"
}

# shape_loss LOSS_PCT: no rate limit, per-packet random loss on the router's
# egress toward the receiver.
shape_loss()
{
	local loss=$1

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root netem loss "${loss}%" limit 10000
}

# shape_delay RTT_MS [BDP_BYTES]: netem delay on the receiver's egress (the
# ACK path) so the sender's own qdisc never orphans data skbs.  The limit is
# set well above the number of packets in flight.
shape_delay()
{
	local ms=$1 bdp=${2:-0}
	local limit

	limit=$(( bdp / 500 > 10000 ? bdp / 500 : 10000 ))
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	tc -n "$RCV" qdisc add dev "$RCV_IF" root netem delay "${ms}ms" limit "$limit"
}

# shape_ack_slots RTT_MS SLOT_MS: shape_delay's netem on the ACK path,
# releasing what it holds in one burst per SLOT_MS (netem slot): the ACK
# aggregation of a Wi-Fi or DOCSIS hop.
shape_ack_slots()
{
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	tc -n "$RCV" qdisc add dev "$RCV_IF" root netem delay "${1}ms" \
		slot "${2}ms" "${2}ms" limit 10000
}

# shape_reorder RATE_MBIT DELAY_MS PCT GAP: the router's egress toward the
# receiver at RATE through a netem that delays packets DELAY_MS but sends
# every GAPth one at once, ahead of the others, with PCT% chance.
shape_reorder()
{
	shape_rate_netem "$1" delay "${2}ms" reorder "$3%" gap "$4" limit 1000
}

# shape_policer RATE_MBIT BURST_BYTES: a token-bucket policer (tc police,
#   exceeding packets dropped, no queue) on the router's egress toward the
#   receiver, in a clsact of its own beside any root qdisc.  Needs
#   act_police and cls_matchall.
shape_policer()
{
	modprobe -a act_police cls_matchall sch_ingress 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" clsact &&
		tc -n "$RTR" filter add dev "$RTR_IF_R" egress matchall \
			action police rate "${1}mbit" burst "$2" conform-exceed drop/pipe
}

# shape_drop_every N [full]: drop every Nth packet on the router's egress
#   toward the receiver (act_gact's deterministic mode, in a clsact of its
#   own beside any root qdisc): a loss rate of exactly 1/N, spread evenly,
#   so that any flight of F packets loses F/N of them, give or take one.
#   With "full", only IPv4 packets of 1500 bytes count (full-sized data
#   segments; handshakes and iperf3's control messages pass).  Counts skbs:
#   pair it with hop_per_packet.  Needs act_gact and cls_matchall or
#   cls_u32.
shape_drop_every()
{
	local -a match=(matchall)

	[[ ${2:-} == full ]] && match=(protocol ip u32 match u16 1500 0xffff at 2)
	modprobe -a act_gact cls_matchall cls_u32 sch_ingress 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" clsact &&
		tc -n "$RTR" filter add dev "$RTR_IF_R" egress "${match[@]}" \
			action gact pass random determ drop "$1"
}

# shape_ce_marker RATE_MBIT CE_THRESHOLD: router egress toward the receiver
#   at RATE (htb) into a single fq_codel queue that marks CE on packets
#   whose sojourn exceeds CE_THRESHOLD (e.g. 1ms): one queue (flows 1), so
#   a ping shares the data's queue and sees its delay.  Needs sch_htb and
#   sch_fq_codel; ECN itself is the sender's net.ipv4.tcp_ecn.
shape_ce_marker()
{
	local rate=$1 thresh=$2 burst=25000

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${rate}mbit" ceil "${rate}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: \
		fq_codel ce_threshold "$thresh" flows 1 ecn
}

shape_clear()
{
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	return 0
}

# hop_per_packet: make the router hop carry one packet per skb, so that a
# loss qdisc on the router drops single packets, not GSO/GRO aggregates:
# software segmentation on the sender's NIC (tso/gso off: veth honours it,
# the QEMU NICs have no offloads anyway) and no GRO on the router's ingress.
hop_per_packet()
{
	ip netns exec "$SND" ethtool -K "$SND_IF" tso off gso off &>/dev/null
	ip netns exec "$RTR" ethtool -K "$RTR_IF_S" gro off &>/dev/null
	ip netns exec "$RTR" ethtool -K "$RTR_IF_R" tso off gso off &>/dev/null
	ip netns exec "$RCV" ethtool -K "$RCV_IF" gro off &>/dev/null
	return 0
}

# set_gso_max_segs N: the sender NIC's gso_max_segs (read by sockets at
# connect time).  Also turns TSO off where the NIC lets us.
set_gso_max_segs()
{
	local n=$1

	ip netns exec "$SND" ethtool -K "$SND_IF" tso off &>/dev/null
	ip -n "$SND" link set dev "$SND_IF" gso_max_segs "$n"
}

get_gso_max_segs()
{
	ip -n "$SND" -d link show dev "$SND_IF" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "gso_max_segs") print $(i + 1) }'
}

# shape_sender_tbf RATE_MBIT: a tbf on the sender's own NIC, the closest model
# of a RATE NIC: skbs stay charged to the socket until they leave for the
# "wire" (hook_tsq.sh, bench scenario tsq).
shape_sender_tbf()
{
	tc -n "$SND" qdisc replace dev "$SND_IF" root tbf rate "${1}mbit" \
		burst 15140 limit 150000
}

# shape_sender_fq RATE_MBIT [fq args...]: fq with maxrate on the sender's own
# NIC: a just-sent skb waits in fq, charged to the socket, until its time on
# the "wire" (hook_autocork_semantics.sh, hook_delack_rate.sh, bench).
shape_sender_fq()
{
	local rate=$1; shift

	tc -n "$SND" qdisc replace dev "$SND_IF" root fq maxrate "${rate}mbit" "$@"
}

# late_completion_setup RATE_MBIT DELAY_US: the sender's route to the
# receiver leaves through a NIC model whose TX completions come DELAY_US
# after the packet left at RATE_MBIT (tx_delay.c has the why):
#   socket -> lc0 (veth, tbf RATE: the line rate, skbs charged) -> lc1
#   ingress: clone out of SND_IF (the wire), original -> lcd (dummy, fq
#   holding it DELAY_US, still charged) -> freed: the TX completion.
# Needs cls_bpf, sch_fq, dummy and a bpffs (mounted under $TMPD).  Returns
# non-zero and says why on failure.  late_completion_delay DELAY_US changes
# the delay.
# link_field NS DEV FIELD: one field of `ip -j link show` (address, ifindex...).
link_field()
{
	ip -n "$1" -j link show "$2" | jq -r ".[0].$3"
}

late_completion_setup()
{
	local rate=$1 delay=$2 rmac widx hidx

	modprobe -a cls_bpf sch_fq dummy 2>/dev/null
	LC_BPF=$TMPD/bpf
	mkdir -p "$LC_BPF"
	mountpoint -q "$LC_BPF" || mount -t bpf bpf "$LC_BPF" ||
		{ echo "# cannot mount bpffs"; return 1; }
	rmac=$(link_field "$RTR" "$RTR_IF_S" address)
	ip -n "$SND" link add lc0 type veth peer lc1 &&
		ip -n "$SND" link add lcd type dummy &&
		ip -n "$SND" link set lc0 up &&
		ip -n "$SND" link set lc1 up &&
		ip -n "$SND" link set lcd up || { echo "# late completion: links"; return 1; }
	ns_sysctl "$SND" net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.lc1.rp_filter=0 \
		"net.ipv4.conf.$SND_IF.rp_filter=0"
	widx=$(link_field "$SND" "$SND_IF" ifindex)
	hidx=$(link_field "$SND" lcd ifindex)
	"$BIN_DIR/tx_delay" wire "$LC_BPF/wire" "$widx" "$hidx" >/dev/null ||
		{ echo "# tx_delay wire failed"; return 1; }
	tc -n "$SND" qdisc add dev lc1 clsact &&
		tc -n "$SND" filter add dev lc1 ingress bpf object-pinned "$LC_BPF/wire" da &&
		tc -n "$SND" qdisc add dev lcd clsact &&
		tc -n "$SND" qdisc replace dev lcd root fq nopacing limit 100000 flow_limit 100000 &&
		tc -n "$SND" qdisc replace dev lc0 root tbf rate "${rate}mbit" burst 15140 limit 1000000 ||
		{ echo "# late completion: tc setup failed"; return 1; }
	late_completion_delay "$delay" || return 1
	ip -n "$SND" neigh replace "$RTR_IP4_S" lladdr "$rmac" dev lc0 nud permanent &&
		ip -n "$SND" route replace "$RCV_IP4/32" via "$RTR_IP4_S" dev lc0 onlink src "$SND_IP4" ||
		{ echo "# late completion: route"; return 1; }
	ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP4" &>/dev/null ||
		{ echo "# late completion: no connectivity"; return 1; }
}

late_completion_delay()
{
	rm -f "$LC_BPF/hold"
	"$BIN_DIR/tx_delay" hold "$LC_BPF/hold" "$1" >/dev/null &&
		tc -n "$SND" filter replace dev lcd egress pref 1 handle 1 bpf \
			object-pinned "$LC_BPF/hold" da ||
		{ echo "# tx_delay hold $1 failed"; return 1; }
}

# sender_cwnd_lock CWND: lock the sender's cwnd at CWND segments through its
# default route (`cwnd lock`).  The kernel applies a locked route cwnd only
# through the tcp_metrics cache, so metrics are saved and a 1 s warm-up flow
# (iperf3 server running) creates the entry later connections read.  Sets
# SENDER_METRICS (the sender's tcp_metrics line for the receiver); returns
# non-zero if a step failed.
sender_cwnd_lock()
{
	local cwnd=$1 rc=0

	ip -n "$SND" route change default via "$RTR_IP4_S" dev "$SND_IF" cwnd lock "$cwnd" || rc=1
	ns_sysctl "$SND" net.ipv4.tcp_no_metrics_save=0
	flow_run warmup - 1 >/dev/null || rc=1
	sleep 0.3
	SENDER_METRICS=$(ip -n "$SND" tcp_metrics show "$RCV_IP4" 2>&1)
	[[ $SENDER_METRICS == *"cwnd $cwnd"* ]] || rc=1
	return $rc
}

##############################################################################
# iperf3

# listen_wait NS PORT: wait up to 5 s for a TCP listener on PORT in NS.
listen_wait()
{
	local i

	for ((i = 0; i < 50; i++)); do
		[[ -n $(ip netns exec "$1" ss -ltnH "sport = :$2") ]] && return 0
		sleep 0.1
	done
	return 1
}

iperf3_server_start()
{
	ip netns exec "$RCV" iperf3 -s -p "$IPERF_PORT" >"$TMPD/iperf3-server.log" 2>&1 &
	bg_track $!
	listen_wait "$RCV" "$IPERF_PORT" && return 0
	echo "# iperf3 server did not start"
	return 1
}

# flow_run ID CC SECS [iperf3 client args...]
#   One iperf3 flow snd -> rcv with congestion control CC (sent as -C CC;
#   CC "-" leaves the default).  Results in $TMPD/ID.json.  Optional:
#   FLOW_V6=1      use IPv6
#   FLOW_SS=SEC    sample `ss -ti` of the data socket every SEC s -> ID.ss
#   FLOW_PING=1    ping snd -> rcv every 0.1 s from 2 s to the end -> ID.ping
#   FLOW_BEFORE / FLOW_AFTER: commands run before/after (eval'd)
#   Sets FLOW_CPORT (the data stream's client port).
flow_run()
{
	local id=$1 cc=$2 secs=$3; shift 3
	local pre=$TMPD/$id dst=$RCV_IP4 rc spid= ppid= pdur
	local -a ccarg=()

	[[ ${FLOW_V6:-0} -eq 1 ]] && dst=$RCV_IP6
	[[ $cc != - ]] && ccarg=(-C "$cc")
	CPORT=$((CPORT + 1))
	FLOW_CPORT=$CPORT
	rm -f "$pre".*

	if [[ -n ${FLOW_SS:-} ]]; then
		ss_sampler_start "$SND" "$FLOW_CPORT" "$pre.ss" "$FLOW_SS"
		spid=$SS_SAMPLER_PID
	fi
	if [[ ${FLOW_PING:-0} -eq 1 ]]; then
		pdur=$((secs - 3))
		((pdur < 1)) && pdur=1
		(sleep 2; exec ip netns exec "$SND" ping -n -i 0.1 -w "$pdur" "$dst") \
			>"$pre.ping" 2>&1 &
		ppid=$!
		bg_track $ppid
	fi
	ip netns exec "$SND" timeout $((secs + 60)) iperf3 -c "$dst" -p "$IPERF_PORT" \
		--cport "$FLOW_CPORT" -t "$secs" "${ccarg[@]}" -J "$@" \
		>"$pre.json" 2>"$pre.err"
	rc=$?
	[[ -n $ppid ]] && wait "$ppid" 2>/dev/null
	[[ -n $spid ]] && bg_kill "$spid"
	if [[ $rc -ne 0 ]]; then
		echo "# iperf3 ($id, $cc) exit $rc: $(jq -r '.error // empty' "$pre.json" 2>/dev/null) $(head -c 300 "$pre.err")"
	fi
	return $rc
}

iperf3_goodput()	# Mbit/s received
{
	jq -r '(.end.sum_received.bits_per_second // 0) / 1e6 | . * 100 | round / 100' "$1" 2>/dev/null || echo 0
}

iperf3_retrans()
{
	jq -r '.end.sum_sent.retransmits // 0' "$1" 2>/dev/null || echo 0
}

iperf3_max_cwnd()	# segments
{
	jq -r --argjson mss "$MSS" '(.end.streams[0].sender.max_snd_cwnd // 0) / $mss | round' "$1" 2>/dev/null || echo 0
}

iperf3_mean_cwnd()	# segments, mean of the per-interval samples
{
	jq -r --argjson mss "$MSS" '[.intervals[].streams[0].snd_cwnd] | if length > 0 then add / length / $mss | round else 0 end' "$1" 2>/dev/null || echo 0
}

iperf3_mean_rtt()	# ms, iperf3's smoothed RTT mean
{
	jq -r '(.end.streams[0].sender.mean_rtt // 0) / 1000' "$1" 2>/dev/null || echo 0
}

iperf3_cc()
{
	jq -r '.end.sender_tcp_congestion // empty' "$1" 2>/dev/null
}

##############################################################################
# ping

# ping_median FILE: median RTT in ms of the replies in a ping log.
ping_median()
{
	sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' "$1" | median
}

ping_count()
{
	grep -c ' time=' "$1"
}

##############################################################################
# ss -ti

# ss_sampler_start NS SPORT FILE INTERVAL: sample `ss -tin` of the socket with
# local port SPORT every INTERVAL s.  Sets SS_SAMPLER_PID.
ss_sampler_start()
{
	local ns=$1 sport=$2 file=$3 int=$4

	ip netns exec "$ns" bash -c '
		while :; do
			echo "@ $EPOCHREALTIME"
			ss -tinH state established "( sport = :'"$sport"' )"
			sleep '"$int"'
		done' >"$file" 2>/dev/null &
	SS_SAMPLER_PID=$!
	bg_track $SS_SAMPLER_PID
}

# ss_flow NS SPORT: one sample, same format as ss_parse prints.
ss_flow()
{
	local ns=$1 sport=$2

	{ echo "@ $EPOCHREALTIME"
	  ip netns exec "$ns" ss -tinH state established "( sport = :$sport )"; } | ss_parse
}

# ss_parse: turn sampler output (stdin or FILE) into one line per sample:
#   t=<s> cc=<name> cwnd=<segs> mss=<bytes> rtt=<ms> pacing_rate=<bit/s>
#   delivery_rate=<bit/s> bw=<bit/s> mrtt=<ms> pacing_gain=<x> cwnd_gain=<x>
#   bytes_acked=<n> retrans=<n>
# Fields ss did not print are left out.  Rates are converted from ss's
# "%.1f[KMG]bps" to bit/s.
ss_parse()
{
	awk '
	function rate(s,   v, u) {
		if (!match(s, /^[0-9.]+[KMG]?bps/)) return -1
		s = substr(s, 1, RLENGTH - 3)
		u = substr(s, length(s), 1)
		if (u == "G") return substr(s, 1, length(s) - 1) * 1e9
		if (u == "M") return substr(s, 1, length(s) - 1) * 1e6
		if (u == "K") return substr(s, 1, length(s) - 1) * 1e3
		return s + 0
	}
	function flush(   k, out) {
		if (have) {
			out = "t=" t
			for (k in f) out = out " " k "=" f[k]
			print out
		}
		delete f; have = 0
	}
	/^@ / { flush(); t = $2; next }
	{
		for (i = 1; i <= NF; i++) {
			tok = $i
			if (tok ~ /^(reno|cubic|bbr|bbrx|bbr2|bbr3|dctcp|vegas|htcp|westwood|[a-z][a-z0-9_]*)$/ &&
			    !("cc" in f) && tok !~ /^(ts|sack|ecn|ecnseen|fastopen|cong|app_limited|send|pacing_rate|delivery_rate|lastsnd|lastrcv|lastack|busy|rwnd_limited|sndbuf_limited|unacked|retrans|lost|sacked|reordering|notsent|minrtt|rcv_rtt|rcv_space|rcv_ssthresh|ssthresh)$/) {
				f["cc"] = tok
			} else if (tok ~ /^cwnd:/) {
				f["cwnd"] = substr(tok, 6); have = 1
			} else if (tok ~ /^mss:/) {
				f["mss"] = substr(tok, 5)
			} else if (tok ~ /^rtt:/) {
				split(substr(tok, 5), a, "/"); f["rtt"] = a[1]
			} else if (tok ~ /^bytes_acked:/) {
				f["bytes_acked"] = substr(tok, 13)
			} else if (tok ~ /^retrans:/) {
				split(substr(tok, 9), a, "/"); f["retrans"] = a[2]
			} else if (tok == "pacing_rate") {
				f["pacing_rate"] = rate($(i + 1)); i++
			} else if (tok == "delivery_rate") {
				f["delivery_rate"] = rate($(i + 1)); i++
			} else if (tok ~ /^bbr:\(/) {
				s = tok; sub(/^bbr:\(/, "", s); sub(/\)$/, "", s)
				n = split(s, kv, ",")
				for (j = 1; j <= n; j++) {
					split(kv[j], p, ":")
					if (p[1] == "bw") f["bw"] = rate(p[2])
					else f[p[1]] = p[2]
				}
			}
		}
	}
	END { flush() }' "$@"
}

# ss_samples FILE [SKIP_S]: parsed samples of a sampler file, without those
# of the first SKIP_S seconds after the first sample that shows the socket.
ss_samples()
{
	local file=$1 skip=${2:-0}

	ss_parse "$file" | awk -v skip="$skip" '{
		split($1, p, "="); t = p[2] + 0
		if (!n++) t0 = t
		if (t - t0 >= skip) print
	}'
}

# ss_field FIELD [AWK-CONDITION] < parsed samples: the values of FIELD in
# the samples matching the condition (e.g. 'pacing_gain == 1.25').
ss_field()
{
	local field=$1 cond=${2:-1}

	awk -v fld="$field" '{
		delete v
		for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
	}
	{ if (!(fld in v)) next }
	'"$(ss_cond_awk "$cond")"' { print v[fld] }'
}

# ss_burst_goal SHIFT [CAP_SEGS] < parsed samples: bbrx's burst goal
# (tso_segs_goal, segments) at each sample, from its pacing_rate and mss:
# min(127, max(2, min(pacing_rate >> SHIFT bytes, 65279) / mss)), capped at
# CAP_SEGS where given (gso_cap = 1 and the device's gso_max_segs).  The
# docs/usage.md's burst goal; bbrx_gso.sh checks cwnd against it.
ss_burst_goal()
{
	awk -v shift="$1" -v cap="${2:-0}" '{
		delete v
		for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
		if (!("pacing_rate" in v) || !(v["mss"] > 0)) next
		bytes = int(v["pacing_rate"] / 8 / 2 ^ shift)
		if (bytes > 65536 - 1 - 256) bytes = 65536 - 1 - 256
		goal = int(bytes / v["mss"])
		if (goal < 2) goal = 2
		if (cap > 0 && goal > cap) goal = cap
		if (goal > 127) goal = 127
		print goal
	}'
}

# Translate a condition on field names into awk on v[]: "pacing_gain == 1"
# -> (v["pacing_gain"] == 1).
ss_cond_awk()
{
	echo "($1)" | sed -E 's/([a-z_]+[a-z])([ ]*[=!<>])/v["\1"]+0\2/g'
}

##############################################################################
# Helpers: the cc_setsockopt C helper

# require_helper [NAME...]: skip unless these C helpers (default
# cc_setsockopt) are built.
require_helper()
{
	local h

	for h in "${@:-cc_setsockopt}"; do
		[[ -x $BIN_DIR/$h ]] ||
			ksft_exit_skip "$h not built in $BIN_DIR (run make -C selftests on the host)"
	done
}

# ss_sink_flow SECS: the ss_parse line of the sender's established
# connection to the sink (sink_start), waiting up to SECS seconds for one.
ss_sink_flow()
{
	local i line

	for ((i = 0; i < $1 * 5; i++)); do
		line=$({ echo "@ 0"; ip netns exec "$SND" ss -tinH state established \
			"( dport = :$SINK_PORT )"; } | ss_parse | head -n 1)
		if [[ -n $line ]]; then
			echo "$line"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# sink_start [-6]: start a discard server on SINK_PORT in the receiver.
sink_start()
{
	ip netns exec "$RCV" "$BIN_DIR/cc_setsockopt" -l "$@" "$SINK_PORT" \
		>"$TMPD/sink.log" 2>&1 &
	bg_track $!
	listen_wait "$RCV" "$SINK_PORT"
}

##############################################################################
# dmesg

DMESG_TAG="bbrx-selftest[$SFX]: $(basename "$0") start"
DMESG_OK=0
if echo "$DMESG_TAG" >/dev/kmsg 2>/dev/null; then
	DMESG_OK=1
else
	DMESG_LINES=$(dmesg 2>/dev/null | wc -l)
fi

# tracefs_find [ENTRY]: set TRACEFS to the mounted tracefs that has ENTRY
# (default trace; e.g. kprobe_events, instances), mounting it if needed.
tracefs_find()
{
	local d e=${1:-trace}

	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		[[ -e $d/$e ]] && { TRACEFS=$d; return 0; }
	done
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null &&
		[[ -e /sys/kernel/tracing/$e ]] &&
		{ TRACEFS=/sys/kernel/tracing; return 0; }
	return 1
}

# bbrx's trace events.
TRACEFS=
EV_DIR=
BUF_KB0=

# bbrx_events_setup KB: TRACEFS and EV_DIR ($TRACEFS/events/bbrx) set, a
# ring buffer of KB per CPU (the old size restored on exit, with every bbrx
# event off and the buffer emptied). Skips without tracefs; fails without
# the module's events.
bbrx_events_setup()
{
	tracefs_find trace || ksft_exit_skip "no tracefs"
	EV_DIR=$TRACEFS/events/bbrx
	[[ -d $EV_DIR ]] || { echo "# $EV_DIR missing: tcp_bbrx has no trace events"; exit 1; }
	trap 'bbrx_events_cleanup; cleanup' EXIT
	BUF_KB0=$(awk '{ print $1; exit }' "$TRACEFS/buffer_size_kb")
	echo "$1" >"$TRACEFS/buffer_size_kb"
}

bbrx_events_cleanup()
{
	[[ -n $EV_DIR && -d $EV_DIR ]] && echo 0 >"$EV_DIR/enable"
	[[ -n $TRACEFS ]] && : >"$TRACEFS/trace"
	[[ -n $BUF_KB0 ]] && echo "$BUF_KB0" >"$TRACEFS/buffer_size_kb"
}

# trace_start EVENT...: empty ring buffer, only these bbrx events on.
trace_start()
{
	local e

	echo 0 >"$EV_DIR/enable"
	: >"$TRACEFS/trace"
	for e in "$@"; do
		echo 1 >"$EV_DIR/$e/enable" || return 1
	done
	echo 1 >"$TRACEFS/tracing_on"
}

# kprobe_events_add GROUP NAME=TARGET...: an entry kprobe event GROUP/NAME
# on each TARGET (a symbol; MODULE:symbol for a module's), then the group
# enabled.  Says which the kernel refused.
kprobe_events_add()
{
	local g=$1 e

	shift
	for e in "$@"; do
		echo "p:$g/${e%%=*} ${e#*=}" >>"$TRACEFS/kprobe_events" ||
			{ echo "# kprobe event on ${e#*=} refused"; return 1; }
	done
	echo 1 >"$TRACEFS/events/$g/enable" ||
		{ echo "# enabling the kprobe events of $g failed"; return 1; }
}

# kprobe_events_del GROUP: every kprobe event of GROUP off and removed;
# fails if the group is still there.
kprobe_events_del()
{
	local g=$1 ev

	[[ -n ${TRACEFS:-} && -d $TRACEFS/events/$g ]] || return 0
	{ echo 0 >"$TRACEFS/events/$g/enable"; } 2>/dev/null
	for ev in $(sed -n "s|^[pr]:$g/\([^ ]*\) .*|\1|p" "$TRACEFS/kprobe_events"); do
		{ echo "-:$g/$ev" >>"$TRACEFS/kprobe_events"; } 2>/dev/null
	done
	! [[ -d $TRACEFS/events/$g ]]
}

# trace_stop FILE: every bbrx event off, the buffer into FILE; prints the
# events the ring buffer overwrote or dropped (must be 0 for exact counts).
trace_stop()
{
	echo 0 >"$EV_DIR/enable"
	cat "$TRACEFS/trace" >"$1"
	cat "$TRACEFS"/per_cpu/cpu*/stats 2>/dev/null |
		awk '/^(overrun|dropped events):/ { n += $NF } END { print n + 0 }'
}

# trace_of FILE EVENT NETNS [SPORT]: "key=value ..." of each EVENT line
# from netns inode NETNS (and local port SPORT).
trace_of()
{
	awk -v ev=" $2: " -v ns=" netns=$3 " -v sp="${4:+ sport=$4 }" '
		{
			i = index($0, ev)
			if (!i) next
			rest = " " substr($0, i + length(ev)) " "
			if (!index(rest, ns) || (sp != "" && !index(rest, sp))) next
			print substr(rest, 2, length(rest) - 2)
		}' "$1"
}

# tf KEY: the values of KEY in "key=value" lines on stdin.
tf()
{
	awk -v k="$1=" '{ for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }'
}

netns_ino()
{
	ip netns exec "$1" stat -L -c %i /proc/self/ns/net
}

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
