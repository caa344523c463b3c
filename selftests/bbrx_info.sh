#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `ss -ti` shows bbr:(bw,mrtt,pacing_gain,cwnd_gain) for a bbrx flow
# (.get_info fills struct tcp_bbr_info), and the numbers match the path:
# 100 Mbit/s tbf on the router, 20 ms RTT (netem on the ACK path).

ALL_TESTS="
	info_present
	info_mrtt
	info_bw
	info_cwnd
"
RETRY_TESTS="info_present info_mrtt info_bw info_cwnd"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX_INFO_SECS:-8}
SKIP=3		# seconds of the flow not looked at (STARTUP, DRAIN)

measure()
{
	FLOW_SS=0.2 flow_run info bbrx "$SECS"
	FLOW_RC=$?
	ss_samples "$TMPD/info.ss" "$SKIP" >"$TMPD/info.samples"
	NSAMP=$(wc -l <"$TMPD/info.samples")
	GOODPUT=$(iperf3_goodput "$TMPD/info.json")
	MRTT=$(ss_field mrtt <"$TMPD/info.samples" | median)
	BW=$(ss_field bw <"$TMPD/info.samples" | median)
	BW_MBIT=$(calc "$BW / 1e6")
	log_info "flow: goodput $GOODPUT Mbit/s, $NSAMP ss samples after ${SKIP}s," \
		"median bw $BW_MBIT Mbit/s, median mrtt $MRTT ms"
	log_info "last sample: $(tail -n 1 "$TMPD/info.samples")"
}

info_present()
{
	local n_cc n_bbr

	((TEST_ATTEMPT > 0)) && measure
	check_err "$FLOW_RC" "iperf3 flow failed"
	((NSAMP >= 5))
	check_err $? "only $NSAMP ss samples of the flow"
	n_cc=$(grep -c ' cc=bbrx' "$TMPD/info.samples")
	n_bbr=$(grep ' bw=' "$TMPD/info.samples" | grep ' mrtt=' |
		grep ' pacing_gain=' | grep -c ' cwnd_gain=')
	((n_cc == NSAMP))
	check_err $? "ss shows cc bbrx in $n_cc of $NSAMP samples"
	((n_bbr == NSAMP))
	check_err $? "ss shows bbr:(bw,mrtt,pacing_gain,cwnd_gain) in $n_bbr of $NSAMP samples"
	log_test "ss -ti shows bbr:(bw,mrtt,pacing_gain,cwnd_gain) for a bbrx flow"
}

info_mrtt()
{
	((TEST_ATTEMPT > 0)) && measure
	in_range "$MRTT" "$PATH_RTT" $((PATH_RTT + 10))
	check_err $? "median mrtt $MRTT ms, path RTT $PATH_RTT ms"
	log_test "mrtt matches the path RTT" "median $MRTT ms in [$PATH_RTT, $((PATH_RTT + 10))]"
}

info_bw()
{
	((TEST_ATTEMPT > 0)) && measure
	in_range "$BW_MBIT" 70 110
	check_ratio $? "median bw $BW_MBIT Mbit/s on a $PATH_RATE Mbit/s bottleneck"
	log_test "bw matches the bottleneck rate" "median $BW_MBIT Mbit/s in [70, 110]"
}

# cwnd in PROBE_BW is cwnd_gain x BDP plus the burst allowance (plus ACK
# aggregation): with a 1-BDP buffer it must sit between 1 and 4 BDPs.
info_cwnd()
{
	local cwnd bdp lo hi

	((TEST_ATTEMPT > 0)) && measure
	cwnd=$(ss_field cwnd 'pacing_gain == 1' <"$TMPD/info.samples" | median)
	bdp=$(awk -v b="$BW" -v r="$MRTT" 'BEGIN { printf "%d", b / 8 * r / 1000 / 1448 + 0.5 }')
	lo=$bdp
	hi=$((4 * bdp))
	in_range "$cwnd" "$lo" "$hi"
	check_err $? "median PROBE_BW cwnd $cwnd, BDP from ss $bdp packets"
	log_test "cwnd consistent with bw x mrtt" "cwnd $cwnd, BDP $bdp pkts"
}

require_command iperf3 jq tc ss
require_bbrx
require_topo
require_qdisc tbf netem
iperf3_server_start || exit 1
path_bottleneck 1 || { echo "# shaping failed"; exit 1; }

measure
tests_run
tests_done
exit $EXIT_STATUS
