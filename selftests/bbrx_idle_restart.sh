#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Restart after idle reaches both models on this kernel.  When a flow
# sends with nothing in flight and the application left it idle, the
# kernel raises CA_EVENT_TX_START; bbrx and bbrx3 then pace at gain 1 in
# PROBE_BW, may end PROBE_RTT, and restart the ACK-aggregation epoch
# (in-tree tcp_bbr.c does the same).  Until 7.1 the event came through
# .cwnd_event; from 7.1 only through .cwnd_event_tx_start (upstream
# d1e59a469737), so a model wired to the wrong op never restarts and
# nothing else shows it.  Each restart counts IdleRestart (bbrx) or
# Bbrx3IdleRestart (bbrx3) in /proc/net/bbrx_stat.
#
# Per model, side by side: ROUNDS bursts of 12 KB with 300 ms of idle
# between them (tcp_write_pattern), and a bulk iperf3 flow of the same
# model for as long.  Asserts: the bursts restart at least ROUNDS/2 times
# (each burst after the first starts idle), and more often than the bulk
# flow, which idles only at its start (and where the guest stalls it).
# The counts are printed.

ALL_TESTS="
	idle_restart_bbrx
	idle_restart_bbrx3
"
source "$(dirname "$0")/lib.sh"

ROUNDS=${BBRX_IDLE_RESTART_ROUNDS:-10}
GAP_MS=300

# restarts CC COUNTER: BURSTS and BULK, the counter's growth over the
# bursts and over the bulk flow.
restarts()
{
	local cc=$1 ctr=$2 c0 c1 c2 secs

	c0=$(bbrx_stat "$ctr" "$SND")
	ip netns exec "$SND" "$BIN_DIR/tcp_write_pattern" -C "$cc" -n \
		-r "$ROUNDS" -g "$GAP_MS" "$RCV_IP4" "$SINK_PORT" psh \
		>"$TMPD/$cc-bursts.out" 2>"$TMPD/$cc-bursts.err"
	check_err $? "tcp_write_pattern -C $cc failed: $(head -c 200 "$TMPD/$cc-bursts.err")"
	c1=$(bbrx_stat "$ctr" "$SND")
	secs=$(((ROUNDS * GAP_MS + 999) / 1000))
	flow_run "bulk-$cc" "$cc" "$secs" >/dev/null
	check_err $? "bulk $cc flow failed"
	c2=$(bbrx_stat "$ctr" "$SND")
	BURSTS=$((${c1:-0} - ${c0:-0}))
	BULK=$((${c2:-0} - ${c1:-0}))
	log_info "$cc: $ctr +$BURSTS over $ROUNDS bursts ${GAP_MS} ms apart, +$BULK over a ${secs}s bulk flow"
}

check_restarts()
{
	local cc=$1 ctr=$2

	restarts "$cc" "$ctr"
	((BURSTS >= ROUNDS / 2))
	check_err $? "$ctr +$BURSTS over $ROUNDS idle gaps (want >= $((ROUNDS / 2))): the model did not see CA_EVENT_TX_START"
	((BURSTS > BULK))
	check_err $? "$ctr +$BURSTS over the bursts, +$BULK over a bulk flow: not an idle restart count"
	log_test "$cc restarts after idle" "$ctr +$BURSTS in $ROUNDS bursts, +$BULK bulk"
}

idle_restart_bbrx()
{
	check_restarts bbrx IdleRestart
}

idle_restart_bbrx3()
{
	check_restarts bbrx3 Bbrx3IdleRestart
}

require_command iperf3 jq tc ss
require_bbrx
require_helper cc_setsockopt tcp_write_pattern
require_topo
require_qdisc tbf netem
iperf3_server_start || exit 1
sink_start || { echo "# sink did not start"; exit 1; }
path_bottleneck 1 || { echo "# shaping failed"; exit 1; }

tests_run
tests_done
exit $EXIT_STATUS
