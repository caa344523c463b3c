#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Long-term (policer) bandwidth sampling, net.ipv4.bbrx.lt_bw, the kernel's
# tcp_bbr.c behaviour since BBR's first release ("tcp_bbr: add BBR
# congestion control", Sep 2016).  Behind a token-bucket policer, the rate
# delivered from one loss to the next is the policed rate; two such
# intervals (4..16 rounds each, >= 20% of the packets lost) at rates within
# 12.5% of each other make BBR pace at their mean, gain 1, for 48 rounds,
# instead of probing into the policer's drops.
#
# Path: a 20 Mbit/s policer (tc police, burst 64 KB, exceeding packets
# dropped) on the router's egress toward the receiver, 40 ms RTT, sender
# GSO and TSO off so that the policer drops packets, not 64 KB aggregates
# (20 s flows on this path before bbrx had lt_bw: cubic 263, in-tree bbr
# 2189, bbrx 2742 retransmits).  Modes alternate within each repetition
# (BBRX_POLICER_REPS, default 2), one bbrx flow of BBRX_POLICER_SECS (10) each:
#	lt_bw 1   the kernel's rule (default)
#	lt_bw 0   no long-term sampling (bbrx before 2026-12-01)
# plus, with BBRX_POLICER_MODES="lt1 lt0 bbr cubic" (make check-full), one
# in-tree bbr and one cubic flow per repetition for reference.
# Asserts: LtBwUsed moves in every lt_bw 1 flow and never with lt_bw 0 (the
# mechanism); the median retransmits with lt_bw 1 are not above those with
# lt_bw 0 (check_ratio, 10% margin: the mechanism exists to cut the
# policer's drops); goodput medians and retransmits of every mode are printed.

ALL_TESTS="
	policer_flows
	policer_lt_bw_engages
	policer_retransmits
"
# A failed ratio is measured again with REPS more flows per mode; the
# medians then cover both attempts.
RETRY_TESTS="policer_retransmits"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX_POLICER_SECS:-10}
# shellcheck disable=SC2034  # read by reps_more (lib.sh)
REPS=${BBRX_POLICER_REPS:-2}
NREP=0			# flows per mode measured so far
POLICE_RATE=20		# Mbit/s
POLICE_BURST=65536	# bytes
RTT=40			# ms
MODES=${BBRX_POLICER_MODES:-"lt1 lt0"}
declare -A GP RTX LT

police_setup()
{
	shape_policer "$POLICE_RATE" "$POLICE_BURST" &&
		shape_delay "$RTT" &&
		ip netns exec "$SND" ethtool -K "$SND_IF" tso off gso off
}

# run_mode MODE REP: one flow; its goodput, retransmits and LtBwUsed delta.
run_mode()
{
	local m=$1 rep=$2 id="$1-$2" cc=bbrx l0 l1

	case $m in
	lt1) bbrx_sysctl_set "$SND" lt_bw 1 ;;
	lt0) bbrx_sysctl_set "$SND" lt_bw 0 ;;
	*) cc=$m ;;
	esac
	l0=$(bbrx_stat LtBwUsed "$SND")
	flow_run "$id" "$cc" "$SECS" || FLOW_FAILS+=" $id"
	l1=$(bbrx_stat LtBwUsed "$SND")
	LT[$id]=$(( ${l1:-0} - ${l0:-0} ))
	GP[$id]=$(iperf3_goodput "$TMPD/$id.json")
	RTX[$id]=$(iperf3_retrans "$TMPD/$id.json")
}

# measure: REPS more flows per mode, alternating the modes.
measure()
{
	local rep m

	reps_more run_mode
	bbrx_sysctl_set "$SND" lt_bw 1
	for m in $MODES; do
		GP[$m]=$(reps_median GP "$m")
		RTX[$m]=$(reps_median RTX "$m")
	done
	echo "# policer ${POLICE_RATE} Mbit/s (burst $POLICE_BURST B), RTT ${RTT} ms, GSO off, ${SECS}s flows, $NREP repetitions"
	printf '# %-22s %10s %12s %s\n' mode goodput retransmits "per run: goodput/retransmits/LtBwUsed"
	for m in $MODES; do
		printf '# %-22s %10s %12s %s\n' "$m" "${GP[$m]}" "${RTX[$m]}" \
			"$(for ((rep = 1; rep <= NREP; rep++)); do
				printf '%s/%s/%s ' "${GP[$m-$rep]}" "${RTX[$m-$rep]}" "${LT[$m-$rep]:-0}"
			done)"
	done
	echo "# (lt1 = bbrx lt_bw 1, lt0 = bbrx lt_bw 0; goodput Mbit/s and retransmits are medians)"
}

policer_flows()
{
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	log_test "policed flows ran in every mode ($MODES x $NREP)"
}

policer_lt_bw_engages()
{
	local rep bad=

	for ((rep = 1; rep <= NREP; rep++)); do
		[[ ${LT[lt1-$rep]} -gt 0 ]] || bad+=" lt_bw=1 run $rep: LtBwUsed +${LT[lt1-$rep]};"
		[[ ${LT[lt0-$rep]} -eq 0 ]] || bad+=" lt_bw=0 run $rep: LtBwUsed +${LT[lt0-$rep]};"
	done
	[[ -z $bad ]]
	check_err $? "policer detection:$bad"
	log_test "lt_bw=1 finds the policer in every flow, lt_bw=0 never" \
		"LtBwUsed per lt_bw=1 flow: $(for ((rep = 1; rep <= NREP; rep++)); do printf '%s ' "${LT[lt1-$rep]}"; done)"
}

policer_retransmits()
{
	((TEST_ATTEMPT > 0)) && measure
	fcmp "${RTX[lt1]}" '<=' "$(calc "1.1 * ${RTX[lt0]}")"
	check_ratio $? "median retransmits with lt_bw=1 (${RTX[lt1]}) above 1.1 x lt_bw=0 (${RTX[lt0]})"
	log_test "retransmits with lt_bw=1 not above lt_bw=0" \
		"${RTX[lt1]} vs ${RTX[lt0]}${RTX[bbr]:+; in-tree bbr ${RTX[bbr]}}${RTX[cubic]:+, cubic ${RTX[cubic]}}"
}

require_command iperf3 jq tc ethtool
require_bbrx
require_topo
police_setup || ksft_exit_skip "cannot set up the policer (act_police, cls_matchall)"
iperf3_server_start || exit 1
measure
tests_run
tests_done
exit $EXIT_STATUS
