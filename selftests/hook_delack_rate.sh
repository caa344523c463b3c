#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Delayed-ACK policy (net.ipv4.bbrx.delack), the report behind reverting
# upstream 4720852ed9af ("tcp: fix delayed ACKs for MSS boundary
# condition", 6.6, October 2023; in 6.1 through stable): a receiver marks
# ICSK_ACK_PUSHED for a PSH segment of >= rcv_mss bytes, so it ACKs as soon
# as the application has read it; an embedded lwIP sender, whose every
# segment is one MSS with PSH, lost 27% of its throughput (11% on a radio
# link) to the extra ACKs.  Modes on the
# receiver (scope=1), alternating within each repetition (BBRX_REPS, 3):
#	0 kernel        6.1 (has the change)
#	2 pre-change    a PSH segment >= rcv_mss does not mark PUSHED: it is
#			ACKed with the next one (one ACK per two segments) or by
#			the delayed-ACK timer
#	1 post-change   6.1's behaviour run by bbrx (counts the marks)
#
# Sender, modelled on the embedded peer: gso_max_segs 1 on its device and
# 1448-byte TCP_NODELAY writes (iperf3 -l 1448 -N), so that every segment
# is one MSS with PSH (a GSO sender would send multi-MSS segments); a
# small window, cwnd locked at 4 by
# the route (`cwnd lock 4`; the kernel applies a locked route cwnd only
# through the tcp_metrics cache, so the sender saves metrics and a warm-up
# flow creates the entry); and a slow link: fq maxrate 20 Mbit/s on the
# sender's NIC, so segments arrive one at a time.  The slow link is needed
# under QEMU TCG: at 30-140 Mbit/s the emulated receiver reads several
# segments per recvmsg() (backlog and receive-queue coalescing), each read
# then ACKs for "more than one MSS unacked" and PUSHED never decides
# anything: we measured 0.3 ACKs per segment in all three modes with cwnd 4
# and no pacing.  At 20 Mbit/s every read finds one segment: the kernel ACKs
# it at the read (PUSHED), mode 2 only every second one.  veth between
# sender and router whatever NETIFS says.
#
# Measured: receiver ACKs per data segment (receiver TcpOutSegs delta /
# sender TcpOutSegs delta) and goodput per mode.  Each comparison is the
# median of the ratios of the runs of one repetition (run side by side, so
# a guest that slows down during the test slows both sides of a ratio).
# Asserted: ACKs per segment at least 1.25x lower in mode 2 than in mode
# 0; mode 1 within 20% of mode 0 (the same code; TCG timing noise); DelackPushSuppressed
# moves in mode 2 only, DelackPushMarked in mode 1 only, nothing in mode 0;
# the sender's cwnd stayed 4; mode 2 does not starve the sender (goodput
# >= 0.7x mode 0, a guard).  Beyond that guard goodput is reported, not
# asserted: with cwnd locked at 4
# a Linux sender loses little or nothing with fewer ACKs (one ACK for two
# segments refills the window; ~5-10% less under QEMU 7.2, within 2.5%
# under QEMU 10: 18.42 / 18.32 / 17.98 Mbit/s in modes 0 / 2 / 1); the lwIP
# report was the opposite direction because an lwIP sender pays CPU for
# every ACK it processes, which a Linux sender does not.

ALL_TESTS="
	dl_setup
	dl_acks_per_segment
	dl_mode1_as_kernel
	dl_counters
	dl_throughput
"
RETRY_TESTS="dl_acks_per_segment dl_mode1_as_kernel dl_throughput"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

SECS=${BBRX_DELACK_SECS:-3}
RATE=${BBRX_DELACK_RATE:-20}	# Mbit/s, fq maxrate on the sender
CWND=4
MODES="0 2 1"
CTRS_RCV="TcpOutSegs Bbrx:DelackPushMarked Bbrx:DelackPushSuppressed"
NREP=0
MEAS_ATTEMPT=0
declare -A APS GP MARKED SUPP
CWNDS=

dl_run()
{
	local id=$1 m=$2 acks data

	bbrx_sysctl_set "$RCV" delack "$m" || SET_FAILS+=" delack=$m"
	counters_snap "$RCV" "$TMPD/r.before" $CTRS_RCV
	counters_snap "$SND" "$TMPD/s.before" TcpOutSegs
	FLOW_SS=0.3 flow_run "$id" - "$SECS" -l 1448 -N || FLOW_FAILS+=" $id"
	counters_snap "$RCV" "$TMPD/r.after" $CTRS_RCV
	counters_snap "$SND" "$TMPD/s.after" TcpOutSegs
	acks=$(counters_delta "$TMPD/r.before" "$TMPD/r.after" TcpOutSegs)
	data=$(counters_delta "$TMPD/s.before" "$TMPD/s.after" TcpOutSegs)
	echo "$(calc "$acks / $data")" "$(iperf3_goodput "$TMPD/$id.json")" \
		"$(counters_delta "$TMPD/r.before" "$TMPD/r.after" Bbrx:DelackPushMarked)" \
		"$(counters_delta "$TMPD/r.before" "$TMPD/r.after" Bbrx:DelackPushSuppressed)" \
		"$acks" "$data" "$(iperf3_retrans "$TMPD/$id.json")" >>"$TMPD/$m.res"
	ss_parse "$TMPD/$id.ss" | ss_field cwnd >>"$TMPD/cwnd.samples"
}

# pair_ratio MODE_A MODE_B COL: median over the repetitions of column COL
# of MODE_A's run / MODE_B's run of the same repetition.
pair_ratio()
{
	paste -d ' ' "$TMPD/$1.res" "$TMPD/$2.res" |
		awk -v c="$3" '{ d = $(7 + c); if (d > 0) print $c / d }' | median
}

measure()
{
	local rep m last

	last=$((NREP + REPS))
	for ((rep = NREP + 1; rep <= last; rep++)); do
		for m in $MODES; do
			dl_run "dl$m-$rep" "$m"
		done
	done
	NREP=$last
	bbrx_sysctl_set "$RCV" delack 0
	for m in $MODES; do
		APS[$m]=$(col_median 1 "$TMPD/$m.res")
		GP[$m]=$(col_median 2 "$TMPD/$m.res")
		MARKED[$m]=$(col_median 3 "$TMPD/$m.res")
		SUPP[$m]=$(col_median 4 "$TMPD/$m.res")
	done
	CWNDS=$(sort -n "$TMPD/cwnd.samples" | uniq -c | awk '{ printf "%s x%s ", $2, $1 }')
	echo "# sender: gso_max_segs $(get_gso_max_segs), iperf3 -l 1448 -N, cwnd lock $CWND, fq maxrate ${RATE}mbit; receiver scope=1; ${SECS}s flows, $NREP runs per mode"
	printf '# %-10s %10s %9s %16s %20s  %s\n' mode "ACKs/seg" goodput DelackPushMarked DelackPushSuppressed "runs: ACKs/seg goodput (acks/data, retrans)"
	for m in $MODES; do
		printf '# %-10s %10s %9s %16s %20s  %s\n' \
			"$m $(case $m in 0) echo kernel;; 1) echo post;; 2) echo pre;; esac)" \
			"${APS[$m]}" "${GP[$m]}" "${MARKED[$m]}" "${SUPP[$m]}" \
			"$(awk '{ printf "%s %s (%s/%s, %s); ", $1, $2, $5, $6, $7 }' "$TMPD/$m.res")"
	done
	echo "# sender cwnd samples: $CWNDS"
}

# On a retry, measure REPS more runs once (the first retried test does).
remeasure()
{
	((TEST_ATTEMPT > MEAS_ATTEMPT)) || return 0
	MEAS_ATTEMPT=$TEST_ATTEMPT
	measure
}

dl_setup()
{
	local bad

	[[ $(hook_state delack) == installed ]]
	check_err $? "delack hook: '$(hook_line delack)'"
	[[ -z $SET_FAILS ]]
	check_err $? "setup steps failed:$SET_FAILS"
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	[[ $METRICS == *"cwnd $CWND"* ]]
	check_err $? "no locked cwnd in the sender's tcp_metrics: '$METRICS'"
	bad=$(awk -v c="$CWND" '$1 > c' "$TMPD/cwnd.samples" | wc -l)
	[[ $bad -eq 0 && -s $TMPD/cwnd.samples ]]
	check_err $? "sender cwnd above $CWND in $bad ss samples ($CWNDS)"
	[[ $(get_gso_max_segs) == 1 ]]
	check_err $? "sender gso_max_segs $(get_gso_max_segs), not 1"
	log_test "delack hook installed, sender cwnd locked at $CWND, all flows ran" "$(hook_line delack)"
}

dl_acks_per_segment()
{
	local r

	remeasure
	r=$(pair_ratio 0 2 1)
	fcmp "$r" '>=' 1.25
	check_err $? "ACKs per segment: kernel / pre-change $r < 1.25 (medians ${APS[0]} / ${APS[2]})"
	log_test "ACKs per data segment >= 1.25x lower in mode 2 than mode 0" \
		"${APS[0]} vs ${APS[2]}, ratio $r (issue calibration: 0.65 in the stock kernel)"
}

dl_mode1_as_kernel()
{
	local r

	remeasure
	r=$(pair_ratio 1 0 1)
	in_range "$r" 0.80 1.20
	check_err $? "mode 1 / kernel ACKs per segment $r not within 20% (medians ${APS[1]} / ${APS[0]})"
	log_test "mode 1 (post-change, run by bbrx) ACKs like the kernel" "${APS[1]} vs ${APS[0]}, ratio $r"
}

dl_counters()
{
	local bad=

	awk '$4 < 1 || $3 != 0 { e = 1 } END { exit e }' "$TMPD/2.res" ||
		bad+=" mode 2 (marked/suppressed per run: $(awk '{ printf "%s/%s ", $3, $4 }' "$TMPD/2.res"));"
	awk '$3 < 1 || $4 != 0 { e = 1 } END { exit e }' "$TMPD/1.res" ||
		bad+=" mode 1 ($(awk '{ printf "%s/%s ", $3, $4 }' "$TMPD/1.res"));"
	awk '$3 != 0 || $4 != 0 { e = 1 } END { exit e }' "$TMPD/0.res" ||
		bad+=" mode 0 ($(awk '{ printf "%s/%s ", $3, $4 }' "$TMPD/0.res"));"
	[[ -z $bad ]]
	check_err $? "counters:$bad"
	log_test "DelackPushSuppressed in mode 2 only, DelackPushMarked in mode 1 only" \
		"suppressed ${SUPP[2]}, marked ${MARKED[1]} per run (median)"
}

dl_throughput()
{
	local r

	remeasure
	r=$(pair_ratio 2 0 2)
	log_info "goodput kernel ${GP[0]}, pre-change ${GP[2]}, post-change ${GP[1]} Mbit/s; pre/kernel $r"
	log_info "cwnd 4: a Linux sender waits for the ACK of every second segment in mode 2 instead of every segment; it does not pay per ACK like lwIP, so fewer ACKs cannot make it faster"
	# Guard, not the report's claim: with delayed ACKs the cwnd-4 sender
	# waits longer per window, but mode 2 must not starve it.
	fcmp "$r" '>=' 0.7
	check_ratio $? "mode 2 / kernel goodput $r below 0.7 (medians ${GP[2]} / ${GP[0]})"
	log_test "mode 2 goodput >= 0.7 x kernel (reported: kernel / pre / post)" "${GP[0]} / ${GP[2]} / ${GP[1]} Mbit/s"
}

require_command iperf3 jq ip tc ss
require_bbrx
require_hooks delack
require_qdisc fq
# veth on purpose, whatever NETIFS says (see the header).
use_veth "one segment per read at 20 Mbit/s needs the veth path the rates were measured on"
require_topo
set_gso_max_segs 1
iperf3_server_start || exit 1
shape_sender_fq "$RATE" || SET_FAILS+=" fq"
# dl_setup checks the locked cwnd in METRICS and in the ss samples itself.
sender_cwnd_lock "$CWND"
METRICS=$SENDER_METRICS
log_info "sender tcp_metrics: $METRICS"
bbrx_sysctl_set "$RCV" scope 1 || SET_FAILS+=" scope"

measure
tests_run
bbrx_sysctl_set "$RCV" delack 0
bbrx_sysctl_set "$RCV" scope 0
tests_done
exit $EXIT_STATUS
