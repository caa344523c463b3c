#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx over IPv6 (tcpv6_prot): setsockopt selection, a bulk flow through the
# router on the 100 Mbit/s, 20 ms path with the model working (ss info,
# counters), and its goodput and bw beside an IPv4 bbrx flow on the same
# path in the same run: the guest's CPU under TCG varies from run to run
# (the calibration below took 3.4 to 7 s on one host), so an absolute
# floor fails on a slow run (CI, 2026-12-02: 79.56 against 80.17 Mbit/s)
# where a side-by-side ratio does not.  From above, bw is bounded by the
# configured tbf rate.  The comparison (ipv6_vs_ipv4) takes the best flow
# of each family (a busy host only takes goodput away) and is retried once
# with one more IPv4/IPv6 pair, over both pairs then.

ALL_TESTS="
	ipv6_setsockopt
	ipv6_flow
	ipv6_vs_ipv4
"
RETRY_TESTS="ipv6_vs_ipv4"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX_IPV6_SECS:-8}
NPAIR=0
GP4='' GP6='' BW4='' BW6=''

ipv6_setsockopt()
{
	local cc

	cc=$(ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" bbrx "$RCV_IP6" "$SINK_PORT" 1048576)
	check_err $? "IPv6 connection with setsockopt bbrx failed"
	[[ $cc == bbrx ]]
	check_err $? "getsockopt(TCP_CONGESTION) on IPv6 says '$cc'"
	log_test "IPv6 socket takes bbrx by setsockopt"
}

# pair_run: one IPv4 and then one IPv6 bbrx flow; their goodput and
# median bw (Mbit/s, after 3 s) join GP4, GP6, BW4, BW6.  The IPv6 flow's
# files are v6-N.*, its counter deltas in S_D and X_D.
pair_run()
{
	local s0 s1 x0 x1 bw4 bw6

	NPAIR=$((NPAIR + 1))
	FLOW_SS=0.25 flow_run "v4-$NPAIR" bbrx "$SECS" || FLOW_FAILS+=" v4-$NPAIR"
	bw4=$(ss_samples "$TMPD/v4-$NPAIR.ss" 3 | ss_field bw | median)
	GP4+="$(iperf3_goodput "$TMPD/v4-$NPAIR.json") "
	BW4+="$(calc "$bw4 / 1e6") "

	s0=$(bbrx_stat SocketsInit "$SND")
	x0=$(bbrx_stat StartupExit "$SND")
	FLOW_V6=1 FLOW_SS=0.25 flow_run "v6-$NPAIR" bbrx "$SECS" || FLOW_FAILS+=" v6-$NPAIR"
	s1=$(bbrx_stat SocketsInit "$SND")
	x1=$(bbrx_stat StartupExit "$SND")
	S_D=$((s1 - s0)) X_D=$((x1 - x0))
	bw6=$(ss_samples "$TMPD/v6-$NPAIR.ss" 3 | ss_field bw | median)
	GP6+="$(iperf3_goodput "$TMPD/v6-$NPAIR.json") "
	BW6+="$(calc "$bw6 / 1e6") "
	log_info "pair $NPAIR: IPv6 goodput $(iperf3_goodput "$TMPD/v6-$NPAIR.json") Mbit/s," \
		"bw $(calc "$bw6 / 1e6"); IPv4 goodput $(iperf3_goodput "$TMPD/v4-$NPAIR.json")," \
		"bw $(calc "$bw4 / 1e6") Mbit/s"
}

# The IPv6 flow itself: bbrx on tcpv6_prot with the model working.
ipv6_flow()
{
	local f=$TMPD/v6-1 n n6 mrtt bw hi

	((NPAIR == 0)) && pair_run
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	ss_samples "$f.ss" 3 >"$f.samples"
	n=$(wc -l <"$f.samples")
	n6=$(grep -c "\[$RCV_IP6\]\|$RCV_IP6" "$f.ss")
	mrtt=$(ss_field mrtt <"$f.samples" | median)
	bw=$(ss_field bw <"$f.samples" | median)
	bw=$(calc "$bw / 1e6")
	log_info "IPv6: $n ss samples, bw $bw Mbit/s, mrtt $mrtt ms," \
		"SocketsInit +$S_D, StartupExit +$X_D"

	[[ $(iperf3_cc "$f.json") == bbrx ]]
	check_err $? "iperf3 reports sender cc '$(iperf3_cc "$f.json")'"
	((n6 > 0))
	check_err $? "ss samples are not of an IPv6 connection"
	# Every sample counts; how many the sampler took depends on the guest.
	((n >= 1)) && [[ $(grep -c ' cc=bbrx' "$f.samples") -eq $n ]]
	check_err $? "ss does not show bbrx for the IPv6 flow ($n samples)"
	((S_D > 0 && X_D > 0))
	check_err $? "counters did not move: SocketsInit +$S_D, StartupExit +$X_D"
	in_range "$mrtt" "$PATH_RTT" $((PATH_RTT + 10))
	check_err $? "mrtt $mrtt ms on a $PATH_RTT ms path"
	# The model's bw cannot exceed the tbf rate by more than a sample
	# that caught its burst (10%).
	hi=$(calc "1.1 * $PATH_RATE")
	fcmp "$bw" '<=' "$hi"
	check_err $? "bw $bw Mbit/s above $hi on a $PATH_RATE Mbit/s bottleneck"
	log_test "IPv6 bbrx flow through the router" "bw $bw <= $hi Mbit/s, mrtt $mrtt ms"
}

# largest of the arguments
best()
{
	printf '%s\n' "$@" | sort -g | tail -n 1
}

# Below the tbf rate, bw and goodput follow what the guest's CPU delivers:
# IPv6 against IPv4 on the same path in the same run (best flow of each).
ipv6_vs_ipv4()
{
	local gp gp4 bw bw4 lo

	((TEST_ATTEMPT > 0 || NPAIR == 0)) && pair_run
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	gp=$(best $GP6) gp4=$(best $GP4) bw=$(best $BW6) bw4=$(best $BW4)
	fcmp "$bw" '>=' "$(calc "0.8 * $bw4")"
	check_ratio $? "IPv6 bw $bw Mbit/s < 0.8 x IPv4's $bw4"
	# IPv6 headers leave 1428 payload bytes per 1514-byte frame, IPv4
	# (with timestamps) 1448: IPv6 within 15% of IPv4 after that.
	lo=$(calc "0.85 * $gp4 * 1428 / 1448")
	fcmp "$gp" '>=' "$lo"
	check_ratio $? "IPv6 goodput $gp Mbit/s < $lo (85% of IPv4's $gp4 scaled to IPv6 payload)"
	log_test "IPv6 goodput and bw beside IPv4's" \
		"goodput $gp vs $gp4, bw $bw vs $bw4 Mbit/s ($NPAIR pairs)"
}

require_command iperf3 jq tc ss
require_bbrx
require_helper
require_topo
require_qdisc tbf netem
sink_start -6 || exit 1
iperf3_server_start || exit 1
path_bottleneck 1 || { echo "# shaping failed"; exit 1; }

tests_run
tests_done
exit $EXIT_STATUS
