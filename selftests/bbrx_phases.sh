#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The BBR model's phases, seen through /proc/net/bbrx_stat and `ss -ti`, on
# the 100 Mbit/s, 20 ms path:
#  - STARTUP -> DRAIN -> PROBE_BW (counters; the pacing_gain of the
#    bbrx_round events, or of ss samples without tracefs, takes 1.25, 0.75
#    and 1 afterwards and never goes back to the STARTUP gain);
#  - PROBE_RTT: none in the 8 s flow above with the default 10 s min_rtt
#    window; with a short window (BBRX_PHASES_RTT_WIN_MS, 1000, over a
#    BBRX_PHASES_RTT_SECS flow, 6 s; the long form 2000 over 10 s) entered,
#    and at most once per window the flow lasted;
#  - PROBE_RTT ends when the flow restarts from idle after its time at
#    cwnd 4 has passed (the kernel's BBR on CA_EVENT_TX_START): 12 KB
#    bursts 300 ms apart with min_rtt_win_ms=100 and probe_rtt_ms=50 count
#    ProbeRttIdleExit;
#  - an app-limited flow (iperf3 -b 10M) beside in-tree bbr's: goodput not
#    above the app rate and at least 0.9 x bbr's, bw not below 0.8 x its
#    goodput and at most 2 x bbr's bw, app-limited samples counted;
#  - random per-packet loss on the router hop drives loss recovery, and the
#    flow keeps at least half the goodput of a flow on the same hop without
#    loss.
# What the guest's CPU delivers varies from host to host, so rates are
# compared with a flow of the same run or bounded from above by a
# configured rate, never floored by a figure.  app_limited, the one
# comparison with noisy maxima (bw), is retried once with BBRX_APP_REPS
# more runs per cc, medians over all.

ALL_TESTS="
	startup_drain_probebw
	probe_rtt_default_window
	probe_rtt_short_window
	probe_rtt_idle_exit
	app_limited
	loss_recovery
"
RETRY_TESTS="app_limited"
source "$(dirname "$0")/lib.sh"

STARTUP_GAIN_MIN=2.5	# 2885 per mille; anything above 2.5 is STARTUP
LOSS_PCT=${BBRX_LOSS_PCT:-1}

# stat_snap FILE: save the sender netns counters.
stat_snap()
{
	ip netns exec "$SND" cat /proc/net/bbrx_stat >"$1"
}

# stat_delta NAME BEFORE AFTER: counter difference between two snapshots.
stat_delta()
{
	local name=$1 a b

	a=$(awk -v n="$name" 'NR == 1 { for (i = 2; i <= NF; i++) if ($i == n) c = i }
			      NR == 2 && c { print $c }' "$2")
	b=$(awk -v n="$name" 'NR == 1 { for (i = 2; i <= NF; i++) if ($i == n) c = i }
			      NR == 2 && c { print $c }' "$3")
	echo $(( ${b:-0} - ${a:-0} ))
}

stat_deltas()
{
	local n out=

	for n in SocketsInit StartupExit DrainExit ProbeRttEnter RecoveryEnter \
		 LossEnter Undo AppLimited ProbeRttIdleExit; do
		out+="$n+$(stat_delta $n "$1" "$2") "
	done
	echo "$out"
}

# pb_flow: the 8 s bulk flow that startup_drain_probebw and
# probe_rtt_default_window read (once).  With tracefs, its bbrx_round
# events go to pb.rounds: one line per round whatever the guest's speed,
# where ss, sampled as fast as the guest runs it (53 samples in 8 s on
# 6.1, 2026-12-02), sees each one-round phase of the gain cycle only a few
# times.
pb_flow()
{
	[[ -n ${PB_RC:-} ]] && return
	if [[ -n $EV_ROUND ]]; then
		echo 0 >"$TRACEFS/events/bbrx/enable"
		: >"$TRACEFS/trace"
		echo 1 >"$EV_ROUND/enable" && echo 1 >"$TRACEFS/tracing_on" || EV_ROUND=
	fi
	stat_snap "$TMPD/s0"
	FLOW_SS=0.05 flow_run pb bbrx 8
	PB_RC=$?
	stat_snap "$TMPD/s1"
	if [[ -n $EV_ROUND ]]; then
		echo 0 >"$EV_ROUND/enable"
		awk -v sp=" sport=$FLOW_CPORT " '/ bbrx_round: / && index($0, sp) {
			sub(/.* bbrx_round: /, ""); print }' "$TRACEFS/trace" >"$TMPD/pb.rounds"
		: >"$TRACEFS/trace"
	fi
	log_info "counters: $(stat_deltas "$TMPD/s0" "$TMPD/s1")"
	BULK_APPLIMITED=$(stat_delta AppLimited "$TMPD/s0" "$TMPD/s1")
	PB_PROBERTT=$(stat_delta ProbeRttEnter "$TMPD/s0" "$TMPD/s1")
}

startup_drain_probebw()
{
	local d_up d_drain d_rtt gains first_pb last_su n_up n_down n_one n su dr

	pb_flow
	check_err "$PB_RC" "iperf3 flow failed"

	d_up=$(stat_delta StartupExit "$TMPD/s0" "$TMPD/s1")
	d_drain=$(stat_delta DrainExit "$TMPD/s0" "$TMPD/s1")
	d_rtt=$(stat_delta ProbeRttEnter "$TMPD/s0" "$TMPD/s1")
	((d_up == 1))
	check_err $? "StartupExit +$d_up for one flow"
	((d_drain == 1))
	check_err $? "DrainExit +$d_drain for one flow"
	((d_rtt == 0))
	check_err $? "ProbeRttEnter +$d_rtt in an 8 s flow with the 10 s window"

	if [[ -s $TMPD/pb.rounds ]]; then
		# Gains in 1/256 as ss prints them; "late": from the first
		# PROBE_BW round on.
		src="bbrx_round events"
		awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(pacing|cwnd)_gain=/) {
			split($i, p, "="); $i = p[1] "=" p[2] / 256 } print }' \
			"$TMPD/pb.rounds" >"$TMPD/pb.all"
		awk 'f || / mode=PROBE_BW / { f = 1; print }' "$TMPD/pb.all" >"$TMPD/pb.late"
	else
		src="ss samples (no tracefs); late: after 2 s"
		ss_samples "$TMPD/pb.ss" >"$TMPD/pb.all"
		ss_samples "$TMPD/pb.ss" 2 >"$TMPD/pb.late"
	fi
	n=$(wc -l <"$TMPD/pb.all")
	# Sample index of the first PROBE_BW gain and of the last STARTUP gain.
	first_pb=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^pacing_gain=(1|1\.25|0\.75)$/) { print NR; exit } }' "$TMPD/pb.all")
	last_su=$(awk -v g=$STARTUP_GAIN_MIN '{ for (i = 1; i <= NF; i++) if ($i ~ /^pacing_gain=/) { split($i, p, "="); if (p[2] + 0 > g) l = NR } } END { print l + 0 }' "$TMPD/pb.all")
	su=$(ss_field pacing_gain "pacing_gain > $STARTUP_GAIN_MIN" <"$TMPD/pb.all" | head -n 1)
	dr=$(ss_field pacing_gain 'pacing_gain < 0.5' <"$TMPD/pb.all" | head -n 1)
	n_up=$(ss_field pacing_gain 'pacing_gain == 1.25' <"$TMPD/pb.late" | wc -l)
	n_down=$(ss_field pacing_gain 'pacing_gain == 0.75' <"$TMPD/pb.late" | wc -l)
	n_one=$(ss_field pacing_gain 'pacing_gain == 1' <"$TMPD/pb.late" | wc -l)
	gains=$(ss_field pacing_gain <"$TMPD/pb.late" | sort -g | uniq -c | awk '{ printf "%s x%s, ", $2, $1 }')
	log_info "$n $src; STARTUP gain seen: ${su:-no}, DRAIN gain seen: ${dr:-no};" \
		"late: $gains"
	log_info "cwnd_gain late: $(ss_field cwnd_gain <"$TMPD/pb.late" | sort -u | tr '\n' ' ');" \
		"$(ss_samples "$TMPD/pb.ss" | wc -l) ss samples"

	[[ -n $first_pb ]]
	check_err $? "no PROBE_BW pacing_gain (1.25/0.75/1) in $n samples"
	((last_su < ${first_pb:-0} || last_su == 0))
	check_err $? "STARTUP gain seen (sample $last_su) after PROBE_BW (sample $first_pb)"
	# The 1.25 phase lasts until inflight reaches 1.25 BDP (or a loss):
	# on a guest too slow to fill the path it takes most rounds (103 of
	# 195 on 6.1, 2026-12-02), so the shares are printed, not compared.
	((n_up > 0 && n_down > 0 && n_one > 0))
	check_err $? "PROBE_BW gains (late $src): 1.25 x$n_up, 0.75 x$n_down, 1 x$n_one"
	log_test "STARTUP -> DRAIN -> PROBE_BW (counters, gain cycle)" "$src"
}

# The 8 s flow of startup_drain_probebw, shorter than the 10 s window by
# its configuration (iperf3 -t).
probe_rtt_default_window()
{
	local d

	pb_flow
	check_err "$PB_RC" "iperf3 flow failed"
	d=$PB_PROBERTT
	log_info "min_rtt_win_ms=$(bbrx_sysctl_get "$SND" min_rtt_win_ms), 8 s flow: ProbeRttEnter +$d"
	((d == 0))
	check_err $? "ProbeRttEnter +$d in an 8 s flow with a 10 s min_rtt window"
	log_test "no PROBE_RTT within the default 10 s window" "ProbeRttEnter +$d"
}

RTT_WIN_MS=${BBRX_PHASES_RTT_WIN_MS:-1000}
RTT_SECS=${BBRX_PHASES_RTT_SECS:-6}

# Entries are counted against the windows the flow really lasted: from
# the min_rtt stamp at init, PROBE_RTT starts when the window has passed
# and the stamp is taken again when it ends (probe_rtt_ms at cwnd 4 and a
# round), so a flow of T ms has at most T / window entries (wall time
# around iperf3, more than the socket lives).  Without fresher min_rtt
# samples it would have about T / (window + probe_rtt_ms) (printed), but
# every sample below the current min_rtt starts the window over, and a
# guest whose RTT samples vary more takes more of them (2 entries of 5 on
# a slow run, 3 on a faster one; 6.1, 2026-12-02): at least one entry is
# asserted, against none in the same flow length with the default window.
probe_rtt_short_window()
{
	local d n4 cw t0 t1 wall_ms data_ms prt hi exp

	prt=$(bbrx_sysctl_get "$SND" probe_rtt_ms)
	bbrx_sysctl_set "$SND" min_rtt_win_ms "$RTT_WIN_MS"
	check_err $? "setting min_rtt_win_ms=$RTT_WIN_MS failed"
	stat_snap "$TMPD/r2"
	t0=${EPOCHREALTIME/./}
	FLOW_SS=0.05 flow_run rttshort bbrx "$RTT_SECS"
	check_err $? "iperf3 flow failed"
	t1=${EPOCHREALTIME/./}
	stat_snap "$TMPD/r3"
	bbrx_sysctl_set "$SND" min_rtt_win_ms 10000
	d=$(stat_delta ProbeRttEnter "$TMPD/r2" "$TMPD/r3")
	wall_ms=$(((t1 - t0) / 1000))
	data_ms=$(jq -r '(.end.sum_sent.seconds // 0) * 1000 | floor' "$TMPD/rttshort.json" 2>/dev/null)
	hi=$(((wall_ms + RTT_WIN_MS - 1) / RTT_WIN_MS))
	exp=$((${data_ms:-0} / (RTT_WIN_MS + prt)))
	ss_samples "$TMPD/rttshort.ss" 1 >"$TMPD/rttshort.s"
	n4=$(ss_field cwnd 'cwnd <= 4' <"$TMPD/rttshort.s" | wc -l)
	cw=$(ss_field cwnd <"$TMPD/rttshort.s" | median)
	log_info "min_rtt_win_ms=$RTT_WIN_MS, probe_rtt_ms=$prt, ${RTT_SECS} s flow" \
		"(${data_ms} ms sending, ${wall_ms} ms wall; $exp windows without fresher samples):" \
		"$(stat_deltas "$TMPD/r2" "$TMPD/r3")"
	log_info "ss: $n4 of $(wc -l <"$TMPD/rttshort.s") samples with cwnd <= 4 (PROBE_RTT), median cwnd $cw," \
		"goodput $(iperf3_goodput "$TMPD/rttshort.json") Mbit/s"
	((d >= 1 && d <= hi))
	check_err $? "ProbeRttEnter +$d, want [1, $hi] for ${wall_ms} ms wall with a $RTT_WIN_MS ms window"
	log_test "PROBE_RTT at most once per min_rtt_win_ms ($RTT_WIN_MS ms)" \
		"ProbeRttEnter +$d in [1, $hi], $exp windows"
}

# Bursts with idle time between them: the min_rtt window (100 ms) expires
# during each burst, PROBE_RTT starts, the burst ends, and the next write
# comes after probe_rtt_ms (50) has passed, with nothing in flight.
IDLE_ROUNDS=${BBRX_IDLE_ROUNDS:-10}	# 20 gave 11 entries, 10 idle exits (6.1, 2026-12-02)

probe_rtt_idle_exit()
{
	local d_exit d_enter

	bbrx_sysctl_set "$SND" min_rtt_win_ms 100 &&
		bbrx_sysctl_set "$SND" probe_rtt_ms 50
	check_err $? "setting min_rtt_win_ms=100, probe_rtt_ms=50 failed"
	stat_snap "$TMPD/i0"
	ip netns exec "$SND" "$BIN_DIR/tcp_write_pattern" -C bbrx -n \
		-r "$IDLE_ROUNDS" -g 300 "$RCV_IP4" "$SINK_PORT" psh \
		>"$TMPD/idle.out" 2>"$TMPD/idle.err"
	check_err $? "tcp_write_pattern failed: $(head -c 200 "$TMPD/idle.err")"
	stat_snap "$TMPD/i1"
	bbrx_sysctl_set "$SND" min_rtt_win_ms 10000
	bbrx_sysctl_set "$SND" probe_rtt_ms 200
	d_enter=$(stat_delta ProbeRttEnter "$TMPD/i0" "$TMPD/i1")
	d_exit=$(stat_delta ProbeRttIdleExit "$TMPD/i0" "$TMPD/i1")
	log_info "$IDLE_ROUNDS bursts of 12 KB, 300 ms apart: $(stat_deltas "$TMPD/i0" "$TMPD/i1")"
	((d_enter >= 1 && d_exit >= 1))
	check_err $? "ProbeRttEnter +$d_enter, ProbeRttIdleExit +$d_exit (both expected >= 1)"
	log_test "PROBE_RTT ends on the restart from idle" \
		"ProbeRttEnter +$d_enter, ProbeRttIdleExit +$d_exit in $IDLE_ROUNDS bursts"
}

# iperf3 -b with 1448-byte writes (default 128 KB writes come in bursts that
# make delivery-rate samples far above the average rate).  Under TCG the
# sender still stalls now and then and catches up in a burst whose samples
# the max filter keeps, more often the slower the guest: bw is compared
# with in-tree bbr's in the same run, not with the path rate.
APP_RATE=${BBRX_APP_RATE:-10}	# Mbit/s
APP_REPS=${BBRX_APP_REPS:-1}	# runs per cc (and per retry); long form 2
APP_SECS=${BBRX_APP_SECS:-8}
APP_NREP=0
APP_D=0
declare -A APP_BWS APP_GPS

# app_runs: APP_REPS more alternating runs of bbr and bbrx.
app_runs()
{
	local rep cc id gp bw last=$((APP_NREP + APP_REPS))

	stat_snap "$TMPD/a0"
	for ((rep = APP_NREP + 1; rep <= last; rep++)); do
		for cc in bbr bbrx; do
			id=app-$cc-$rep
			FLOW_SS=0.2 flow_run "$id" "$cc" "$APP_SECS" -b "${APP_RATE}M" -l 1448 ||
				FLOW_FAILS+=" $id"
			gp=$(iperf3_goodput "$TMPD/$id.json")
			bw=$(ss_samples "$TMPD/$id.ss" 3 | ss_field bw | median)
			bw=$(calc "$bw / 1e6")
			APP_BWS[$cc]+="$bw "
			APP_GPS[$cc]+="$gp "
			log_info "$cc run $rep: goodput $gp Mbit/s, median bw $bw Mbit/s after 3 s"
		done
	done
	APP_NREP=$last
	stat_snap "$TMPD/a1"
	log_info "bbrx counters over runs $((last - APP_REPS + 1))..$last: $(stat_deltas "$TMPD/a0" "$TMPD/a1")" \
		"(bulk flow: AppLimited+${BULK_APPLIMITED:-?})"
	APP_D=$((APP_D + $(stat_delta AppLimited "$TMPD/a0" "$TMPD/a1")))
}

app_limited()
{
	local d gp bw gpr bwr hi lo

	app_runs
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	d=$APP_D
	bw=$(median ${APP_BWS[bbrx]}) gp=$(median ${APP_GPS[bbrx]})
	bwr=$(median ${APP_BWS[bbr]}) gpr=$(median ${APP_GPS[bbr]})
	log_info "iperf3 -b ${APP_RATE}M, $APP_NREP runs per cc: bbrx goodput $gp, bw $bw Mbit/s" \
		"($(calc "100 * $bw / $PATH_RATE")% of the path rate); bbr goodput $gpr, bw $bwr Mbit/s"

	# The application's rate bounds goodput from above; below it the
	# guest decides, so bbrx is held to bbr's.
	hi=$(calc "1.05 * $APP_RATE")
	fcmp "$gp" '<=' "$hi"
	check_err $? "bbrx goodput $gp Mbit/s above the app rate $APP_RATE + 5%"
	fcmp "$gp" '>=' "$(calc "0.9 * $gpr")"
	check_ratio $? "bbrx goodput $gp Mbit/s < 0.9 x bbr's $gpr in the app-limited flow"
	# bw: not below what the flow delivered, not inflated beyond what
	# in-tree bbr's identical filter shows beside it.
	lo=$(calc "0.8 * $gp")
	hi=$(calc "2 * $bwr")
	in_range "$bw" "$lo" "$hi"
	check_ratio $? "bbrx bw $bw Mbit/s, want [$lo, $hi] (0.8 x its goodput $gp, 2 x bbr's bw $bwr)"
	((d > 0))
	check_err $? "AppLimited +$d over $APP_NREP app-limited flows"
	if [[ -n $BULK_APPLIMITED ]]; then
		((d > 5 * APP_NREP * BULK_APPLIMITED))
		check_err $? "AppLimited +$d over $APP_NREP flows, bulk flow had +$BULK_APPLIMITED"
	fi
	log_test "app-limited flow: goodput and bw beside bbr's, samples counted" \
		"bw $bw vs $bwr Mbit/s, goodput $gp vs $gpr, AppLimited +$d"
}

# netem drops of the router's loss qdisc, and packets it saw.
netem_stats()
{
	tc -s -n "$RTR" qdisc show dev "$RTR_IF_R" | awk '
		/^qdisc netem/ { on = 1; next }
		/^qdisc/ { on = 0 }
		on && /Sent/ { for (i = 1; i <= NF; i++) { if ($i == "pkt") p = $(i - 1); if ($i == "(dropped") d = $(i + 1) } sub(/,/, "", d); print d, p; exit }'
}

# Both flows on the same per-packet hop (htb + netem child, GSO/GRO off),
# without loss first, then with LOSS_PCT: the CPU cost per packet is the
# same, the loss is the difference.  netem counts its random drops and
# its tail drops as one; a buffer of LOSS_BUF_BDP x BDP, above what
# bbrx's cwnd (2 x BDP, 2.89 x in STARTUP) can queue, keeps the tail
# drops out (1 BDP read 2.2-3.6% drops at 1% loss, 2026-12-05).
LOSS_SECS=${BBRX_LOSS_SECS:-6}
LOSS_BUF_BDP=4

loss_recovery()
{
	local d_rec gp gp0 retr lo drops pkts rate

	hop_per_packet
	path_bottleneck "$LOSS_BUF_BDP" 0
	check_err $? "loss qdisc setup failed"
	FLOW_SS=0.25 flow_run noloss bbrx "$LOSS_SECS"
	check_err $? "iperf3 flow without loss did not complete"
	gp0=$(iperf3_goodput "$TMPD/noloss.json")
	path_bottleneck "$LOSS_BUF_BDP" "$LOSS_PCT"
	check_err $? "loss qdisc setup failed"
	stat_snap "$TMPD/l0"
	FLOW_SS=0.25 flow_run loss bbrx "$LOSS_SECS"
	check_err $? "iperf3 flow with ${LOSS_PCT}% loss did not complete"
	stat_snap "$TMPD/l1"
	read -r drops pkts < <(netem_stats)
	d_rec=$(stat_delta RecoveryEnter "$TMPD/l0" "$TMPD/l1")
	gp=$(iperf3_goodput "$TMPD/loss.json")
	retr=$(iperf3_retrans "$TMPD/loss.json")
	rate=$(calc "100 * ${drops:-0} / (${drops:-0} + ${pkts:-0} + 1)")
	log_info "${LOSS_PCT}% loss: goodput $gp Mbit/s (without loss $gp0), retrans $retr, netem dropped ${drops:-?}" \
		"of $(( ${drops:-0} + ${pkts:-0} )) packets (${rate}%), $(stat_deltas "$TMPD/l0" "$TMPD/l1")"
	log_info "cwnd median $(ss_samples "$TMPD/loss.ss" 2 | ss_field cwnd | median)," \
		"bw median $(ss_samples "$TMPD/loss.ss" 2 | ss_field bw | median)"

	# Per packet: the drop ratio is near LOSS_PCT (an aggregate drop
	# would lose many packets per drop and show a much lower ratio).
	in_range "$rate" "$(calc "$LOSS_PCT / 3")" "$(calc "$LOSS_PCT * 3")"
	check_err $? "netem dropped ${drops:-?} of $pkts packets (${rate}%), not per packet at ${LOSS_PCT}%"
	((d_rec >= 1))
	check_err $? "RecoveryEnter +$d_rec with ${LOSS_PCT}% loss"
	((retr > 0))
	check_err $? "no retransmits with ${LOSS_PCT}% loss"
	lo=$(calc "0.5 * $gp0")
	fcmp "$gp" '>=' "$lo"
	check_ratio $? "goodput $gp Mbit/s < $lo (50% of the flow without loss, $gp0) with ${LOSS_PCT}% loss"
	log_test "per-packet loss drives recovery, flow keeps going" \
		"RecoveryEnter +$d_rec, goodput $gp vs $gp0 Mbit/s without loss"
	path_bottleneck 1
}

require_command iperf3 jq tc ss
require_bbrx
require_helper cc_setsockopt tcp_write_pattern
require_topo
require_qdisc tbf netem htb
iperf3_server_start || exit 1
sink_start || { echo "# sink did not start"; exit 1; }
path_bottleneck 1 || { echo "# shaping failed"; exit 1; }
EV_ROUND=
tracefs_find trace && [[ -d $TRACEFS/events/bbrx/bbrx_round ]] &&
	EV_ROUND=$TRACEFS/events/bbrx/bbrx_round
trap '[[ -n $EV_ROUND ]] && echo 0 >"$EV_ROUND/enable"; cleanup' EXIT

tests_run
tests_done
exit $EXIT_STATUS
