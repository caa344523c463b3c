#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `ss -ti` shows bbr:(bw,mrtt,pacing_gain,cwnd_gain) for a bbrx flow
# (.get_info fills struct tcp_bbr_info), and the numbers match the path:
# 100 Mbit/s tbf on the router, 20 ms RTT (netem on the ACK path).  What
# the guest's CPU delivers varies, so bw is held to the same flow's goodput
# from below and to the configured tbf rate from above; mrtt to the
# configured delay.  One flow, no retry (nothing here compares modes).

ALL_TESTS="
	info_present
	info_mrtt
	info_bw
	info_cwnd
"
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

	check_err "$FLOW_RC" "iperf3 flow failed"
	# Every sample counts; how many the sampler took depends on the guest.
	((NSAMP >= 1))
	check_err $? "no ss sample of the flow"
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
	in_range "$MRTT" "$PATH_RTT" $((PATH_RTT + 10))
	check_err $? "median mrtt $MRTT ms, path RTT $PATH_RTT ms"
	log_test "mrtt matches the path RTT" "median $MRTT ms in [$PATH_RTT, $((PATH_RTT + 10))]"
}

# bw is the max-filtered delivery rate in payload bytes: not below the
# flow's goodput (which includes STARTUP and stalls; 15% margin), not
# above the tbf rate (10% for the tbf burst in a sample).
info_bw()
{
	local lo hi

	lo=$(calc "0.85 * $GOODPUT")
	hi=$(calc "1.1 * $PATH_RATE")
	in_range "$BW_MBIT" "$lo" "$hi"
	check_ratio $? "median bw $BW_MBIT Mbit/s, flow goodput $GOODPUT, tbf $PATH_RATE Mbit/s (want [$lo, $hi])"
	log_info "median bw $BW_MBIT Mbit/s = $(calc "100 * $BW_MBIT / $PATH_RATE")% of the tbf rate"
	log_test "bw between the flow's goodput and the bottleneck rate" \
		"median $BW_MBIT Mbit/s in [$lo, $hi]"
}

# cwnd in PROBE_BW is cwnd_gain x BDP plus the burst allowance (plus ACK
# aggregation): with a 1-BDP buffer it must sit between 1 and 4 BDPs.
info_cwnd()
{
	local cwnd bdp lo hi

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
