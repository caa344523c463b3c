#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx3's per-socket block (module/cc_bbrx3.c: struct bbrx3_block, the state
# beyond ICSK_CA_PRIV_SIZE): allocated in .init, freed in .release, and the
# model runs without it when the allocation fails.  The test-only module
# parameter fault_block=1 makes every allocation fail (Debian's kernels
# have no fault injection).  Bbrx3Blocks (a gauge: blocks in use in the
# netns) is the exact leak check; the slab caches are too noisy for one.
# Path: SND -> RTR -> RCV, RATE Mbit/s, RTT ms, a 2 x BDP buffer.
#
#   block_flow           fault_block=0, a bbrx3 iperf3 flow of SECS (3 s)
#        with bbrx3_round on: Bbrx3NoBlock does not move, the data
#        connection's PROBE_BW rounds carry tx_in_flight (the ring's
#        packets in flight when the round-ending ACK's data was sent) > 0
#        in at least 90% of them; the kernel's view agrees: their median
#        is 0.3-2 x the median of `ss -ti` unacked sampled every 0.2 s
#        (the ring's snapshot is taken in cong_control, after the ACK
#        freed its packets and before the sends it allows, so it reads
#        low by about one ACK's worth: 0.48 x at 18.9 Mbit/s on 6.1,
#        0.9-1.2 x at 14-17 Mbit/s),
#        and the median over the rounds of tx_in_flight / cwnd is 0.2-1.25
#        (the flight never exceeds cwnd at send; pacing keeps it near one
#        BDP of a cwnd of 2 x BDP and more).  Bytes, a saturated, stale or
#        garbage value fall outside.
#   no_block_flow        fault_block=1, the same flow: Bbrx3NoBlock rises by
#        the bbrx3 sockets started (Bbrx3SocketsInit's rise, at least 1:
#        iperf3 sets -C on its data connection, its control connection
#        takes the netns default), Bbrx3Blocks does not, and every round
#        event has tx_in_flight 0; goodput and retransmits of
#        the two flows logged side by side, goodput asserted within a
#        factor 2 (the model must not depend on the block).
#   fault_block_input    a write of "2" to the parameter fails, logs why
#        (dmesg) and leaves the value.
#   disconnect_reconnect a bbrx3 socket sends 1 MB, disconnects
#        (connect(AF_UNSPEC): tcp_disconnect() calls .release and zeroes
#        the private area), connects again and sends 1 MB more: .init ran
#        twice (Bbrx3SocketsInit +2) and once closed, Bbrx3Blocks is back
#        where it was (no block leaked, none freed twice).
#   cc_switch            a reno socket is switched to bbrx3, to reno and to
#        bbrx3 again while it sends 3 MB (TCP_CONGESTION on a live socket:
#        tcp_reinit_congestion_control() calls .release, then .init), then
#        closed: Bbrx3SocketsInit +2 and Bbrx3Blocks back where it was.
# Then, as every test, the kernel log: no WARN, BUG or Oops (dmesg_check).
#
# Knobs: BBRX3_BLOCK_SECS (3) per iperf3 flow; at 20 Mbit/s and 20 ms, 3 s
# is about 100 PROBE_BW rounds, 15 ss samples.

ALL_TESTS="
	block_flow
	no_block_flow
	fault_block_input
	disconnect_reconnect
	cc_switch
"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX3_BLOCK_SECS:-3}
[[ $SECS =~ ^[1-9][0-9]?$ ]] || { echo "# BBRX3_BLOCK_SECS='$SECS': want 1-99 seconds"; exit 1; }
RATE=20		# Mbit/s
RTT=20		# ms
BDP=$(bdp_bytes $RATE $RTT)
PARAM=/sys/module/tcp_bbrx/parameters/fault_block
NS_INO=
FAULT0=

# block_traced ID: a bbrx3 flow of SECS with bbrx3_round on and ss -ti
# sampled; the data connection's round events in $TMPD/ID.ev.
block_traced()
{
	local id=$1 of

	trace_start bbrx3_round || { echo "# cannot enable bbrx3_round"; return 1; }
	FLOW_SS=0.2 flow_run "$id" bbrx3 "$SECS" || return 1
	of=$(trace_stop "$TMPD/$id.trace")
	((of == 0)) || log_info "$id: the ring buffer lost $of events"
	trace_of "$TMPD/$id.trace" bbrx3_round "$NS_INO" "$FLOW_CPORT" >"$TMPD/$id.ev"
	[[ -s $TMPD/$id.ev ]] || { echo "# $id: no round event"; return 1; }
}

# blocks_settle G0: wait up to 5 s for Bbrx3Blocks to come back to G0
# (closed sockets reach .release when they leave FIN_WAIT); prints it.
blocks_settle()
{
	local i g

	for ((i = 0; i < 25; i++)); do
		g=$(bbrx_stat Bbrx3Blocks "$SND")
		((g == $1)) && break
		sleep 0.2
	done
	echo "$g"
}

block_flow()
{
	local n0 i0 n i res

	RET=0
	echo 0 >"$PARAM"
	n0=$(bbrx_stat Bbrx3NoBlock "$SND")
	i0=$(bbrx_stat Bbrx3SocketsInit "$SND")
	block_traced block
	check_err $? "bbrx3 flow failed"
	n=$(($(bbrx_stat Bbrx3NoBlock "$SND") - n0))
	i=$(($(bbrx_stat Bbrx3SocketsInit "$SND") - i0))
	((n == 0 && i >= 1))
	check_err $? "Bbrx3NoBlock +$n (want 0), Bbrx3SocketsInit +$i (want >= 1)"
	# rounds, with tx_in_flight > 0, median tx_in_flight / cwnd, median tx
	res=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["mode"] != "PROBE_BW" || v["cwnd"] <= 0) next
		n++
		if (v["tx_in_flight"] > 0) pos++
		print v["tx_in_flight"] / v["cwnd"], v["tx_in_flight"] >"/dev/stderr"
	} END { printf "%d %d\n", n, pos }' "$TMPD/block.ev" 2>"$TMPD/block.ratio")
	read -r n i <<<"$res"
	BLOCK_RATIO=$(col_median 1 "$TMPD/block.ratio")
	BLOCK_TXF=$(col_median 2 "$TMPD/block.ratio")
	BLOCK_UNACKED=$(grep -o 'unacked:[0-9]*' "$TMPD/block.ss" | cut -d: -f2 | median)
	((n >= 5))
	check_err $? "only $n PROBE_BW rounds"
	((i * 10 >= n * 9))
	check_err $? "tx_in_flight > 0 in $i of $n PROBE_BW rounds (want 90%)"
	[[ $BLOCK_UNACKED != nan ]] &&
		in_range "$(calc "$BLOCK_TXF / $BLOCK_UNACKED")" 0.3 2
	check_err $? "median tx_in_flight $BLOCK_TXF, ss unacked $BLOCK_UNACKED (want 0.3-2 x)"
	in_range "$BLOCK_RATIO" 0.2 1.25
	check_err $? "median tx_in_flight / cwnd $BLOCK_RATIO (want 0.2-1.25)"
	BLOCK_GP=$(iperf3_goodput "$TMPD/block.json")
	BLOCK_RTX=$(iperf3_retrans "$TMPD/block.json")
	log_test "block: tx_in_flight in PROBE_BW rounds, no Bbrx3NoBlock" \
		"$i of $n rounds > 0, median $BLOCK_TXF pkts, x$BLOCK_RATIO of cwnd, ss unacked median $BLOCK_UNACKED; $BLOCK_GP Mbit/s, $BLOCK_RTX retrans"
}

no_block_flow()
{
	local n0 i0 g0 n i g res gp rtx

	RET=0
	echo 1 >"$PARAM"
	n0=$(bbrx_stat Bbrx3NoBlock "$SND")
	i0=$(bbrx_stat Bbrx3SocketsInit "$SND")
	g0=$(bbrx_stat Bbrx3Blocks "$SND")
	block_traced noblock
	check_err $? "bbrx3 flow failed"
	echo 0 >"$PARAM"
	n=$(($(bbrx_stat Bbrx3NoBlock "$SND") - n0))
	i=$(($(bbrx_stat Bbrx3SocketsInit "$SND") - i0))
	g=$(($(bbrx_stat Bbrx3Blocks "$SND") - g0))
	((n == i && i >= 1 && g == 0))
	check_err $? "Bbrx3NoBlock +$n, Bbrx3SocketsInit +$i (want equal, >= 1), Bbrx3Blocks +$g (want 0)"
	res=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		n++
		if (v["tx_in_flight"] != 0) bad++
	} END { printf "%d %d\n", n, bad }' "$TMPD/noblock.ev")
	read -r res g <<<"$res"
	((res >= 5 && g == 0))
	check_err $? "$g of $res round events with tx_in_flight != 0 (want none of >= 5)"
	gp=$(iperf3_goodput "$TMPD/noblock.json")
	rtx=$(iperf3_retrans "$TMPD/noblock.json")
	log_info "goodput with block $BLOCK_GP Mbit/s ($BLOCK_RTX retrans), without $gp Mbit/s ($rtx retrans)"
	fcmp "$gp" '>' 0 && in_range "$(calc "$gp / ($BLOCK_GP + 0.001)")" 0.5 2
	check_ratio $? "goodput without the block $gp Mbit/s, with $BLOCK_GP (want within x2)"
	log_test "no block: the same model, Bbrx3NoBlock per socket, tx_in_flight 0" \
		"+$n Bbrx3NoBlock for +$i sockets, $res rounds; $gp vs $BLOCK_GP Mbit/s, $rtx vs $BLOCK_RTX retrans"
}

fault_block_input()
{
	local v0 v

	RET=0
	echo 0 >"$PARAM"
	v0=$(cat "$PARAM")
	echo 2 2>/dev/null >"$PARAM"
	check_fail $? "writing 2 to fault_block succeeded"
	v=$(cat "$PARAM")
	[[ $v == "$v0" ]]
	check_err $? "fault_block is '$v' after a refused write (was '$v0')"
	dmesg_since_start | grep -q 'bbrx: fault_block: want 0 or 1, not "2"'
	check_err $? "no dmesg line saying why"
	log_test "fault_block: bad input refused with a reason, value kept" "$v"
}

disconnect_reconnect()
{
	local i0 g0 i g out

	RET=0
	echo 0 >"$PARAM"
	i0=$(bbrx_stat Bbrx3SocketsInit "$SND")
	g0=$(bbrx_stat Bbrx3Blocks "$SND")
	out=$(ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -D bbrx3 "$RCV_IP4" \
		"$SINK_PORT" 1000000 2>&1)
	check_err $? "cc_setsockopt -D: $out"
	[[ $out == bbrx3 ]]
	check_err $? "congestion control after the reconnect: '$out'"
	g=$(($(blocks_settle "$g0") - g0))
	i=$(($(bbrx_stat Bbrx3SocketsInit "$SND") - i0))
	((i == 2 && g == 0))
	check_err $? "Bbrx3SocketsInit +$i (want 2), Bbrx3Blocks +$g after close (want 0)"
	log_test "disconnect and reconnect: .init twice, every block freed" \
		"+$i inits, Bbrx3Blocks +$g"
}

cc_switch()
{
	local i0 g0 i g out

	RET=0
	echo 0 >"$PARAM"
	i0=$(bbrx_stat Bbrx3SocketsInit "$SND")
	g0=$(bbrx_stat Bbrx3Blocks "$SND")
	out=$(ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -S bbrx3,reno,bbrx3 \
		reno "$RCV_IP4" "$SINK_PORT" 3000000 2>&1)
	check_err $? "cc_setsockopt -S: $out"
	[[ $out == bbrx3 ]]
	check_err $? "congestion control after the switches: '$out'"
	g=$(($(blocks_settle "$g0") - g0))
	i=$(($(bbrx_stat Bbrx3SocketsInit "$SND") - i0))
	((i == 2 && g == 0))
	check_err $? "Bbrx3SocketsInit +$i (want 2), Bbrx3Blocks +$g after close (want 0)"
	log_test "TCP_CONGESTION reno -> bbrx3 -> reno -> bbrx3: every block freed" \
		"+$i inits, Bbrx3Blocks +$g"
}

require_command iperf3 jq tc ss
require_qdisc netem
require_bbrx
require_helper cc_setsockopt
[[ -w $PARAM ]] || { echo "# $PARAM missing or read-only"; exit 1; }
FAULT0=$(cat "$PARAM")
bbrx_events_setup 4096
trap 'echo "$FAULT0" >"$PARAM"; bbrx_events_cleanup; cleanup' EXIT
require_topo
iperf3_server_start || exit 1
sink_start || { echo "# sink did not start"; exit 1; }
NS_INO=$(netns_ino "$SND")
shape_bottleneck $RATE $((2 * BDP)) && shape_delay $RTT "$BDP" ||
	{ echo "# shaping the path failed"; exit 1; }

tests_run
tests_done
exit $EXIT_STATUS
