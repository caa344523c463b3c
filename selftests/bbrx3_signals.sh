#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx3's loss signal and PROBE_BW state machine, read from its round events
# (bbrx3_round, one per packet-timed round: the state and bounds at the
# round's end, before that round's own cuts).  Each case checks one rule of
# Google's BBRv3 release (github.com/google/bbr, branch v3, tcp_bbr.c) that
# module/cc_bbrx3.c follows; the module before each rule was kept fails its case
# (docs/results/2026-12-03-bbrx3-signals.md), except signals_random_loss,
# which guards the first rule from the other side (a bound pinned too low).  Paths: SND -> RTR -> RCV,
# the rate and buffer on the router, the delay on the ACK path.
#
#   signals_startup_bound  20 Mbit/s, 20 ms, a 0.25 x BDP buffer, one
#        bbrx3 flow of SECS (8 s; up to three more while STARTUP ends on
#        its bandwidth plateau): STARTUP ends on loss
#        (Bbrx3StartupExitCong) and the inflight_hi it set is not raised
#        before the first bandwidth probe: no round between the exit and
#        the first UP round reports more.  inflight_hi may grow only to a
#        flight whose losses were judged (bbr_adapt_upper_bounds(): to
#        rs->tx_in_flight when rs->lost is under loss_thresh of it); DRAIN's
#        ACKs acknowledge STARTUP's lossy overshoot.
#   signals_refill         the same flow: every UP round follows a REFILL
#        round (bbr_update_cycle_phase() returns after
#        bbr_start_bw_probe_refill(), also when a probe stopped at
#        inflight_hi without loss and re-probes at once), and at least one
#        probe happened.
#   signals_startup_aggr   20 Mbit/s, 20 ms, a 4 x BDP buffer (STARTUP
#        ends on its bandwidth plateau, not on loss), ACKs released in
#        10 ms slots (ACK aggregation): a 2 s flow with extra_acked_gain 0,
#        then one with the default.  STARTUP's last cwnd over cwnd_gain x
#        BDP is at least 10% higher with the allowance: the release adds
#        bbr_ack_aggregation_cwnd() to the target in STARTUP too, over a
#        one-round window while the bw estimate still doubles.  One pair
#        of flows, a second pair if the first falls short.
#   signals_drain_rounds   20 Mbit/s for a path's first 8 x BDP of data,
#        5 Mbit/s after (htb over a tbf with that bucket,
#        shape_peak_bucket), 20 ms, a 4 x BDP buffer: STARTUP measures
#        20 Mbit/s, and at DRAIN's 0.5 of it the queue never falls to the
#        BDP.  Up to three 3 s flows: no flow spends more than 4 round
#        events in DRAIN and one spends 4.  The draft's CheckDrainDone
#        (draft-ietf-ccwg-bbr-06, 5.3.2) ends DRAIN when round_count >
#        drain_start_round + 3; ending it on the 3rd round hands STARTUP's
#        queue to PROBE_BW a round early.
#   signals_undo           20 Mbit/s, 20 ms, the router sending one in
#        50 packets 10 ms ahead of the rest and dropping 0.2% (so that
#        lossy rounds set inflight_lo between the spurious episodes), the
#        sender's RACK window fixed at min_rtt / 4 (tcp_recovery 3, so the
#        reordering keeps reading as loss), SECS: TCP marks packets lost,
#        retransmits, then undoes the episode on the DSACKs.  kprobe events
#        on bbrx3_ssthresh (an episode begins; the model saves its bounds)
#        and bbrx3_undo_cwnd share the ring buffer with the round events.
#        Every undo whose episode showed a lower inflight_hi in a round
#        event is followed by a round whose inflight_hi is back at least to
#        the episode's first round's (unset counts as above all); every
#        undo of an episode that began with inflight_lo set, followed by a
#        round that keeps the lower bounds (DRAIN, DOWN, CRUISE), shows
#        inflight_lo set and at least what the rounds around the episode's
#        start bound its saved value to (not lifted; undo_episodes());
#        there is at least one of each (up to eight flows until there
#        are).  bbrx3_loss_thresh is 1 per mille in these flows, so that
#        any loss a probe meets cuts inflight_hi: at the default 2%, 3 of
#        8 flows showed an undo after a cut, at 1 per mille 5 of 8
#        (2026-12-07); the undo rule judged does not depend on it.  The
#        release's bbr_undo_cwnd() takes the max of each bound
#        and its copy saved by bbr_ssthresh().
#   signals_loss_round     20 Mbit/s, 60 ms, a 4 x BDP buffer (the flow
#        loses nothing of its own), two 9 s flows (a third if either case
#        below has too few events): from 2 s on, five
#        bursts 1.1 s apart of 30% loss on the router for 20 ms, a third of
#        a round.  Bbrx3InflightLoLoss moves at most once per burst, and
#        once for at least 3 bursts.  The release judges a loss episode once,
#        when the data sent at its first loss is acked (bbr_note_loss(), the
#        draft's NoteLoss); cutting at the end of every main round with a
#        loss cuts a burst twice when its losses straddle a round's end.
#   signals_recovery_cwnd  the same flows, with bbrx3_state events: at each
#        entry into fast recovery in PROBE_BW, cwnd is at least 0.8 of the
#        socket's cwnd in its event before or of the bounds at entry (a
#        probe's loss may set inflight_hi there), and there are at least 3.  v3
#        removed packet conservation (cwnd = inflight + acked for a round)
#        and the cut by each ACK's losses: the release's bbr_set_cwnd() has
#        no recovery branch; the lower bounds are the loss response.
#   signals_ecn_once       100 Mbit/s into one fq_codel queue marking CE
#        above 1 ms, 3 ms RTT (inside bbrx3_ecn_max_rtt_us), sender
#        tcp_ecn 1, bbrx3_ecn 1, SECS: Bbrx3InflightLoEcn moved exactly
#        once per round that had CE (the round event's ce > 0) in a state
#        that adapts the lower bounds (not STARTUP, REFILL or UP), and at
#        least once.  The release takes a round's CE from that round's
#        count; rs->delivered_ce spans the acked packet's sampling interval
#        and reaches into the round before, so it would cut the round after
#        a marked one again.
#   signals_random_loss    20 Mbit/s, 20 ms, 0.5% random loss, a 2 x BDP
#        buffer, SECS: in the second half of the PROBE_BW rounds the
#        median inflight_hi (where set) is at least 0.9 of one BDP (bw x
#        min_rtt of the same rounds, in packets): loss below loss_thresh
#        (2%) on average must not pin the bound under the pipe.  The margin:
#        a flight of ~30 packets reads one loss as 3.3%, over loss_thresh,
#        so a probe may set the bound at the flight it reached, near one
#        BDP; the ratio was 0.96 in one make check run and 1.12 to 3.0 in
#        ten others (2026-12-07).  A bound that never grows back stays near
#        beta (0.7) of the target.
#   signals_loss_rate      50 Mbit/s, 60 ms, a 2 x BDP buffer, every 80th
#        packet dropped on the router (1.25%, under loss_thresh's 2% of any
#        flight of 250 packets or more, give or take a loss), bbrx3_beta
#        1000 (no lower-bound cuts, so flights stay near the BDP), SECS + 2,
#        two arms in alternating flows: "flight" (the per-socket block's
#        ring judges the losses since the acked data was sent against its
#        flight then, as the release's rs->lost and rs->tx_in_flight; up to
#        six flows until 6 probes) and "round" (fault_block=1: no block, the
#        fallback counts the losses since the start of the round before,
#        up to two rounds against one flight, the rule before 263d5f4; until
#        3 probes).  The flight arm's share of probes (REFILL rounds) that
#        Bbrx3InflightHiLoss ends is lower than the round arm's.  Measured:
#        the round rule ended 10 of 10 probes (2026-12-05); the flight rule
#        0 to 1 of 6-8 on an idle host, 2 of 5 and 3 of 7 inside make check
#        (2026-12-07), where goodput was 39-42 Mbit/s against 44-45 idle.
#   signals_tlp_loss       20 Mbit/s, 20 ms, sender tcp_ecn 0, one
#        1448-byte write per 400 ms (each packet the whole flight), every
#        4th full-sized packet dropped on the router, SECS + 2: each drop is
#        repaired by a tail loss probe (TcpExtTCPLossProbeRecovery, at least
#        3), which marks nothing lost; Bbrx3LossRounds moves as often, but
#        for the last (its loss round may be open at the flow's end).  The
#        release notes such a loss (bbr_run_loss_probe_recovery()
#        on its kernel's TLP event); a stock kernel shows it only as CWR.
#   signals_before_init    8 parallel connections (2 s) with bbrx3 the
#        sender's default congestion control (a socket that starts with it,
#        as opposed to one switched by setsockopt after connect()): no
#        PROBE_RTT (Bbrx3ProbeRttEnter) in flows shorter than its 5 s
#        window.  On 6.1 an active open's SYN-ACK is acked before
#        tcp_init_transfer() calls .init; on zeroed state the model finds
#        min_rtt last refreshed at jiffies 0 and enters PROBE_RTT, once the
#        guest has been up ~305 s (jiffies start at -300 s).  The release
#        guards .cong_control with its "initialized" flag.
#   signals_tso_floor      20 Mbit/s without added delay (min_rtt well
#        under 1 ms), a buffer no flow fills, SECS: in PROBE_BW (outside
#        PROBE_RTT) cwnd is at least tso_margin x the release's low-RTT
#        burst allowance, (64 KB >> (min_rtt_us / 512)) / MSS segments
#        (bbr_tso_segs_generic()), in 90% of the rounds.
#
# Knobs: BBRX3_SIGNALS_SECS (8) per flow; BBRX3_SIGNALS_KEEP=DIR keeps each
# flow's round events there (ID.ev).

ALL_TESTS="
	signals_startup_bound
	signals_refill
	signals_startup_aggr
	signals_drain_rounds
	signals_before_init
	signals_tso_floor
	signals_ecn_once
	signals_undo
	signals_loss_round
	signals_recovery_cwnd
	signals_random_loss
	signals_loss_rate
	signals_tlp_loss
"
# One pair of 2 s flows decides the aggregation case: a second pair if the
# first falls short (one measurement so far: +22% against the +10% bound).
RETRY_TESTS="signals_startup_aggr"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX3_SIGNALS_SECS:-8}
[[ $SECS =~ ^[1-9][0-9]?$ ]] || { echo "# BBRX3_SIGNALS_SECS='$SECS': want 1-99 seconds"; exit 1; }
SIG_RATE=20	# Mbit/s
SIG_RTT=20	# ms
SIG_BDP=$(bdp_bytes $SIG_RATE $SIG_RTT)
NS_INO=
SHALLOW_DONE=		# the shallow flow ran (shared by two cases)
SHALLOW_RC=1
SHALLOW_EXIT_CONG=0

# traced_flow ID SECS [iperf3 args]: one bbrx3 flow with bbrx3_round on
# (and TRACED_EVENTS); its round events (every port of the netns) in
# $TMPD/ID.ev, the whole trace in $TMPD/ID.trace.
traced_flow()
{
	local id=$1 secs=$2 of

	shift 2
	# shellcheck disable=SC2086 # a list of event names
	trace_start bbrx3_round ${TRACED_EVENTS:-} ||
		{ echo "# cannot enable bbrx3_round ${TRACED_EVENTS:-}"; return 1; }
	flow_run "$id" "${TRACED_CC:-bbrx3}" "$secs" "$@" || return 1
	of=$(trace_stop "$TMPD/$id.trace")
	((of == 0)) || log_info "$id: the ring buffer lost $of events"
	trace_of "$TMPD/$id.trace" bbrx3_round "$NS_INO" >"$TMPD/$id.ev"
	[[ -z ${BBRX3_SIGNALS_KEEP:-} ]] || cp "$TMPD/$id.ev" "$BBRX3_SIGNALS_KEEP/"
	[[ -s $TMPD/$id.ev ]] || { echo "# $id: no round event"; return 1; }
}

# The shallow path's flow serves the first two cases. Its STARTUP ends on
# loss or on its bandwidth plateau, whichever comes first: the two race on
# this path (plateau first in 2 of 8 flows on 6.1, 2026-12-05, and 2 of
# 12 on 2026-12-06), so up to four flows until one ends on loss: with two,
# both ended on the plateau in about 1 run in 16 to 36.
shallow_flow()
{
	local c0 try

	[[ -n $SHALLOW_DONE ]] && return "$SHALLOW_RC"
	SHALLOW_DONE=1
	path_bottleneck_at $SIG_RATE $SIG_RTT "$((SIG_BDP / 4))"
	for ((try = 1; try <= 4; try++)); do
		c0=$(bbrx_stat Bbrx3StartupExitCong "$SND")
		traced_flow shallow "$SECS"
		SHALLOW_RC=$?
		SHALLOW_EXIT_CONG=$(($(bbrx_stat Bbrx3StartupExitCong "$SND") - c0))
		((SHALLOW_RC != 0 || SHALLOW_EXIT_CONG > 0)) && break
		log_info "shallow flow $try: STARTUP ended on its bandwidth plateau"
	done
	shape_clear
	return "$SHALLOW_RC"
}

# path_bottleneck_at RATE RTT BUF_BYTES [LOSS_PCT]
path_bottleneck_at()
{
	shape_bottleneck "$1" "$3" $4 && shape_delay "$2" "$SIG_BDP"
}

signals_startup_bound()
{
	local res

	shallow_flow
	check_err $? "shallow flow failed"
	((SHALLOW_EXIT_CONG > 0))
	check_err $? "STARTUP did not end on loss (Bbrx3StartupExitCong +$SHALLOW_EXIT_CONG)"
	# exit: the first round reporting an inflight_hi; then every round up
	# to the first UP round
	res=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (!hi0) { if (v["inflight_hi"] > 0) { hi0 = v["inflight_hi"]; n = NR } next }
		if (v["phase"] == "UP") { up = NR; exit }
		if (v["inflight_hi"] > max) max = v["inflight_hi"]
		k++
	} END { printf "%d %d %d %d %d\n", hi0, max, k, n, up }' "$TMPD/shallow.ev")
	read -r HI0 HIMAX K EXIT_ROUND UP_ROUND <<<"$res"
	((HI0 > 0 && UP_ROUND > 0))
	check_err $? "no inflight_hi ($HI0) or no UP round ($UP_ROUND) in the shallow flow"
	((HIMAX <= HI0))
	check_err $? "inflight_hi rose from $HI0 (set at round $EXIT_ROUND) to $HIMAX before the first probe (round $UP_ROUND)"
	log_test "inflight_hi set at STARTUP's loss exit holds until the first probe" \
		"exit at round $EXIT_ROUND with $HI0 packets, max $HIMAX over the $K rounds to the first UP (round $UP_ROUND), $(iperf3_goodput "$TMPD/shallow.json") Mbit/s, $(iperf3_retrans "$TMPD/shallow.json") retransmits"
}

signals_refill()
{
	local res ups bad

	shallow_flow
	check_err $? "shallow flow failed"
	res=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		p = v["mode"] == "PROBE_BW" ? v["phase"] : v["mode"]
		if (p == "UP" && prev != "UP") { ups++; if (prev != "REFILL") bad++; seq = seq " " prev ">UP" }
		prev = p
	} END { printf "%d %d%s\n", ups, bad, seq }' "$TMPD/shallow.ev")
	read -r ups bad _ <<<"$res"
	((ups > 0))
	check_err $? "no bandwidth probe (UP round) in the shallow flow"
	((bad == 0))
	check_err $? "$bad of $ups probes began without a REFILL round:${res#* * }"
	log_test "every bandwidth probe starts with a REFILL round" "$ups probes"
}

# startup_cwnd_ratio EVFILE: STARTUP's last round, cwnd over cwnd_gain x
# BDP (bw x min_rtt of that round, in packets); 0 without such a round.
startup_cwnd_ratio()
{
	awk -v mss="$MSS" '/ mode=STARTUP / {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		want = v["cwnd_gain"] / 256 * v["bw"] * v["min_rtt_us"] / 1e6 / mss
		r = want > 0 ? v["cwnd"] / want : 0
	} END { printf "%.3f\n", r }' "$1"
}

signals_startup_aggr()
{
	local gain0 off on

	gain0=$(bbrx_sysctl_get "$SND" extra_acked_gain)
	shape_bottleneck $SIG_RATE "$((SIG_BDP * 4))" && shape_ack_slots $SIG_RTT 10
	check_err $? "cannot set up the ACK-aggregating path"
	bbrx_sysctl_set "$SND" extra_acked_gain 0 &&
		traced_flow aggr-off 2
	check_err $? "flow without the aggregation allowance failed"
	bbrx_sysctl_set "$SND" extra_acked_gain "$gain0" &&
		traced_flow aggr-on 2
	check_err $? "flow with the aggregation allowance failed"
	shape_clear
	off=$(startup_cwnd_ratio "$TMPD/aggr-off.ev")
	on=$(startup_cwnd_ratio "$TMPD/aggr-on.ev")
	fcmp "$off" '>' 0 && fcmp "$on" '>' 0
	check_err $? "no STARTUP round with a bw and min_rtt (off $off, on $on)"
	fcmp "$on" '>=' "$(awk -v o="$off" 'BEGIN { print o * 1.1 }')"
	check_err $? "STARTUP's cwnd over cwnd_gain x BDP: $on with the allowance, $off without: want +10%"
	log_test "STARTUP's cwnd carries the ACK-aggregation allowance" \
		"last STARTUP cwnd / (cwnd_gain x BDP): $on with extra_acked_gain $gain0, $off with 0, ACKs in 10 ms slots"
}

# drain_rounds EVFILE: the most round events one socket ended in DRAIN.
drain_rounds()
{
	awk '/ mode=DRAIN / {
		for (i = 1; i <= NF; i++) if ($i ~ /^sport=/) n[$i]++
	} END { m = 0; for (k in n) if (n[k] > m) m = n[k]; print m }' "$1"
}

signals_drain_rounds()
{
	local try d all= most=0

	shape_peak_bucket 5 $SIG_RATE "$((SIG_BDP * 8))" "$((SIG_BDP * 4))" &&
		shape_delay $SIG_RTT "$SIG_BDP"
	check_err $? "cannot set up the falling-rate path"
	# DRAIN may still end on inflight in a flow: up to three until one
	# reaches the round limit
	for ((try = 1; RET == 0 && try <= 3 && most < 4; try++)); do
		traced_flow drain$try 3
		check_err $? "flow $try failed"
		d=$(drain_rounds "$TMPD/drain$try.ev")
		log_info "flow $try, its first rounds (mode/Mbit/s/cwnd/min_rtt_us): $(awk '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (NR <= 16) printf "%s/%.1f/%s/%s ", substr(v["mode"], 1, 5), v["bw"] * 8e-6, v["cwnd"], v["min_rtt_us"]
		}' "$TMPD/drain$try.ev")"
		all+=" $d"
		((d > most)) && most=$d
	done
	shape_clear
	((most <= 4))
	check_err $? "a flow spent $most rounds in DRAIN (per flow:$all): CheckDrainDone ends it on the 4th"
	((most == 4))
	check_err $? "DRAIN rounds per flow:$all; want one flow held to the limit of 4 on this path"
	log_test "DRAIN ends on its 4th round at the latest" \
		"DRAIN rounds per flow:$all, 20 Mbit/s falling to 5"
}

# undo_episodes TRACE: "undos cut bad lo lobad examples" from the ring
# buffer's order.  saved = inflight_hi of the first round after an episode
# began; "cut" if a later round of it shows less; the first round after its
# undo must show saved again (unset counts as above all).  lo: undos whose
# episode began with inflight_lo set and whose next round is one that
# keeps the lower bounds (DRAIN, DOWN, CRUISE; not after PROBE_RTT, whose
# end lifts them); "lobad" if that round shows inflight_lo unset or below
# the least of: bbrx3_beta of the round just before the episode began and
# the round just after (a loss round may end between them and move
# inflight_lo either way, so the value saved at the episode's start lies in
# neither, but one cut keeps beta of it; either unset, or an undo between
# the round before and the episode's start: not judged),
# and that round's inflight_hi (CRUISE's start caps it there); not judged
# either if a round of the episode showed it lifted (by a probe: max() with
# unset stays unset).
undo_episodes()
{
	awk -v ns=" netns=$NS_INO " -v beta="$(bbrx_sysctl_get "$SND" bbrx3_beta)" '
		/ bbrx3_ssthresh: / { ep = 1; saved = -1; slo = -1; cut = 0; alo = prevlo; next }
		/ bbrx3_undo_cwnd: / {
			if (ep && saved >= 0) { pending = 1; want = saved; wascut = cut; wantlo = slo }
			# the undo may lift or restore inflight_lo before the next round
			prevlo = -1
			# PROBE_RTT lifts the bounds when it ends
			if (lastmode == "PROBE_RTT") wantlo = -1
			n++; ep = 0; next
		}
		/ bbrx3_round: / && index($0, ns) {
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			hi = v["inflight_hi"] == 0 ? 4294967295 : v["inflight_hi"]
			lo = v["inflight_lo"]
			lastmode = v["mode"]
			if (pending && wascut) {
				cuts++
				if (hi < want) { bad++; ex = ex " " want ">" hi }
			}
			keeps = v["mode"] == "DRAIN" || (v["mode"] == "PROBE_BW" &&
				(v["phase"] == "DOWN" || v["phase"] == "CRUISE"))
			if (pending && wantlo > 0 && keeps) {
				los++
				# the start of CRUISE caps inflight_lo at inflight_hi
				floor = wantlo < hi ? wantlo : hi
				if (lo == 0 || lo < floor) { lobad++; ex = ex " lo:" floor ">" lo }
			}
			pending = 0
			prevlo = lo
			if (ep) {
				if (saved < 0) {
					saved = hi
					# one loss round may end between: a cut keeps beta
					# of it, truncated as in the model (integer math)
					alo = int(alo * beta / 1000)
					slo = alo > 0 && alo < lo ? alo : lo
					if (alo <= 0) slo = 0
				} else if (hi < saved) cut = 1
				# lifted during the episode (a probe): the max keeps it so
				if (lo == 0) slo = 0
			}
		}
		END { printf "%d %d %d %d %d%s\n", n, cuts, bad, los, lobad, substr(ex, 1, 200) }' "$1"
}

signals_undo()
{
	local rec0 lt0 res try undos=0 cuts=0 bad=0 los=0 lobad=0 ex= u c b l lb e

	rec0=$(ip netns exec "$SND" sysctl -n net.ipv4.tcp_recovery)
	lt0=$(bbrx_sysctl_get "$SND" bbrx3_loss_thresh)
	# reordering for spurious episodes, real loss so that lossy rounds
	# set inflight_lo before some of them
	shape_rate_netem $SIG_RATE delay "$((SIG_RTT / 2))ms" reorder 10% gap 5 \
		loss 0.2% limit 1000 &&
		shape_delay "$((SIG_RTT / 2))" "$SIG_BDP" &&
		ns_sysctl "$SND" net.ipv4.tcp_recovery=3 &&
		bbrx_sysctl_set "$SND" bbrx3_loss_thresh 1
	check_err $? "cannot set up the reordering path"
	# an episode begins (the model saves its bounds), TCP undoes it
	kprobe_events_add bbrxsig bbrx3_ssthresh=tcp_bbrx:bbrx3_ssthresh \
		bbrx3_undo_cwnd=tcp_bbrx:bbrx3_undo_cwnd
	check_err $? "cannot add the kprobe events"
	# A cut needs a probe that meets a spurious episode, with inflight_hi
	# above the flights the reordering's spurious losses leave: 0-2 per
	# 8 s flow, none in 3 of 8 (2026-12-07), so up to eight flows until
	# one has: all eight without one in about 1 run in 2500.
	for ((try = 1; RET == 0 && try <= 8 && (cuts == 0 || los == 0); try++)); do
		traced_flow undo$try "$SECS"
		check_err $? "reordering flow failed"
		res=$(undo_episodes "$TMPD/undo$try.trace")
		read -r u c b l lb e <<<"$res"
		log_info "undo flow $try: $u undos, $c after a cut, $l from a set inflight_lo"
		undos=$((undos + u)) cuts=$((cuts + c)) bad=$((bad + b))
		los=$((los + l)) lobad=$((lobad + lb))
		ex+=${e:+ $e}
	done
	kprobe_events_del bbrxsig
	shape_clear
	ns_sysctl "$SND" net.ipv4.tcp_recovery="$rec0"
	bbrx_sysctl_set "$SND" bbrx3_loss_thresh "$lt0"
	((cuts > 0 && los > 0))
	check_err $? "$undos undos in $((try - 1)) flows: $cuts after an inflight_hi cut, $los from a set inflight_lo"
	((bad == 0 && lobad == 0))
	check_err $? "of $cuts undos after a cut $bad left inflight_hi cut, of $los from a set inflight_lo $lobad lifted or lowered it (saved>after, unset hi 4294967295, lo 0):$ex"
	log_test "an undo gives each bound back what the episode took" \
		"$cuts of $undos undos in $((try - 1)) flows followed an inflight_hi cut, $los began with inflight_lo set; $(iperf3_goodput "$TMPD/undo1.json") Mbit/s and $(iperf3_retrans "$TMPD/undo1.json") retransmits in the first"
}

# loss_bursts N GAP_S OUT: N times, 30% loss on the router for 20 ms, then
# GAP_S seconds; a line each in OUT: Bbrx3InflightLoLoss's moves over the
# burst and its gap, and the ms between the two changes as the shell saw
# them.  One tc reads every change from a pipe, started before the first:
# a process start between the two would stretch the burst past a round.
loss_bursts()
{
	local n=$1 gap=$2 out=$3 k c0 t0 t1 fd idle
	local q="qdisc change dev $RTR_IF_R parent 1:1 handle 10: netem"
	local lim=$((SIG_BDP * 3 * 4 / 1514))

	exec {fd}> >(exec tc -n "$RTR" -force -batch -)
	# read -t on a pipe nobody writes: a 20 ms wait without a process
	exec {idle}<> <(:)
	sleep 0.3
	for ((k = 0; k < n; k++)); do
		c0=$(bbrx_stat Bbrx3InflightLoLoss "$SND")
		t0=${EPOCHREALTIME/./}
		echo "$q loss 30% limit $lim" >&"$fd"
		read -rt 0.02 -u "$idle" _ || :
		echo "$q limit $lim" >&"$fd"
		t1=${EPOCHREALTIME/./}
		sleep "$gap"
		echo "$(($(bbrx_stat Bbrx3InflightLoLoss "$SND") - c0)) $(((t1 - t0) / 1000))" >>"$out"
	done
	exec {fd}>&- {idle}>&-
}

# The burst path's flows serve two cases: 20 Mbit/s, 60 ms, a 4 x BDP
# buffer (the flow loses nothing of its own), 9 s flows with five loss
# bursts from 2 s on; round and state events.  Two flows, a third if
# fewer than 3 bursts cut the lower bounds or fewer than 3 recoveries
# began in PROBE_BW.
BURSTS_DONE=
BURSTS_RC=1
BURSTS_FLOWS=0
burst_flows()
{
	local pid lim=$((SIG_BDP * 3 * 4 / 1514)) ones=0 entries=0 n

	[[ -n $BURSTS_DONE ]] && return "$BURSTS_RC"
	BURSTS_DONE=1 BURSTS_RC=0
	shape_rate_netem $SIG_RATE limit "$lim" &&
		shape_delay $((SIG_RTT * 3)) "$((SIG_BDP * 3))" || BURSTS_RC=1
	hop_per_packet
	while ((BURSTS_RC == 0 && (BURSTS_FLOWS < 2 ||
		(BURSTS_FLOWS < 3 && (ones < 3 || entries < 3))))); do
		n=$((BURSTS_FLOWS + 1))
		rm -f "$TMPD/bursts$n"
		(sleep 2; loss_bursts 5 1.1 "$TMPD/bursts$n") &
		pid=$!
		bg_track $pid
		TRACED_EVENTS=bbrx3_state traced_flow bursts$n 9 || BURSTS_RC=1
		wait "$pid"
		BURSTS_FLOWS=$n
		ones=$((ones + $(cut -d' ' -f1 "$TMPD/bursts$n" | grep -cx 1)))
		entries=$((entries + $(recovery_entries "$TMPD/bursts$n.trace" | cut -d' ' -f1)))
		log_info "flow $n: lower-bound cuts and ms of loss per burst: $(tr '\n' ',' <"$TMPD/bursts$n") round events per mode: $(awk '{
			for (i = 1; i <= NF; i++) if ($i ~ /^mode=/) m[substr($i, 6)]++
		} END { for (k in m) printf "%s %d ", k, m[k] }' "$TMPD/bursts$n.ev")"
	done
	shape_clear
	return "$BURSTS_RC"
}

signals_loss_round()
{
	local try res ones=0 twos=0 all=

	burst_flows
	check_err $? "burst-loss flows failed"
	for ((try = 1; try <= BURSTS_FLOWS; try++)); do
		[[ -s $TMPD/bursts$try ]] || continue
		res=$(cut -d' ' -f1 "$TMPD/bursts$try" | sort | uniq -c | awk '{ printf "%s", $2 "x" $1 " " }')
		all+=" [${res% }]"
		ones=$((ones + $(cut -d' ' -f1 "$TMPD/bursts$try" | grep -cx 1)))
		twos=$((twos + $(cut -d' ' -f1 "$TMPD/bursts$try" | grep -cvx '[01]')))
	done
	((twos == 0))
	check_err $? "$twos bursts cut the lower bounds more than once (cuts x bursts per flow:$all)"
	((ones >= 3))
	check_err $? "only $ones bursts cut the lower bounds once (cuts x bursts per flow:$all)"
	log_test "a loss burst shorter than a round cuts the lower bounds once" \
		"cuts x bursts per flow:$all"
}

# recovery_entries TRACE: "entries cut examples": fast-recovery entries in
# PROBE_BW (bbrx3_state, ca_state Recovery from Open, Disorder or CWR)
# and those whose cwnd is under 0.8 of the socket's cwnd in its event
# before (a round or state event) and of the entry's inflight_hi and
# inflight_lo (where set).
recovery_entries()
{
	awk -v ns=" netns=$NS_INO " '
		!/ bbrx3_(round|state): / || !index($0, ns) { next }
		{
			delete v
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			sp = v["sport"]
			if (/ bbrx3_state: / && v["ca_state"] == "Recovery" &&
			    v["prev_ca_state"] != "Recovery" && v["prev_ca_state"] != "Loss" &&
			    v["mode"] == "PROBE_BW" && (sp in last)) {
				n++
				# under the bounds as well: loss in a probe may set
				# inflight_hi on the ACK that enters recovery
				bound = last[sp]
				if (v["inflight_hi"] > 0 && v["inflight_hi"] < bound) bound = v["inflight_hi"]
				if (v["inflight_lo"] > 0 && v["inflight_lo"] < bound) bound = v["inflight_lo"]
				if (v["cwnd"] < 0.8 * bound) { cut++; ex = ex " " bound ">" v["cwnd"] }
			}
			last[sp] = v["cwnd"]
		}
		END { printf "%d %d%s\n", n, cut, substr(ex, 1, 200) }' "$1"
}

signals_recovery_cwnd()
{
	local try n c e entries=0 cuts=0 ex=

	burst_flows
	check_err $? "burst-loss flows failed"
	for ((try = 1; try <= BURSTS_FLOWS; try++)); do
		[[ -s $TMPD/bursts$try.trace ]] || continue
		read -r n c e <<<"$(recovery_entries "$TMPD/bursts$try.trace")"
		entries=$((entries + n)) cuts=$((cuts + c))
		ex+=${e:+ $e}
	done
	((entries >= 3))
	check_err $? "only $entries fast-recovery entries in PROBE_BW"
	((cuts == 0))
	check_err $? "$cuts of $entries fast-recovery entries cut cwnd below 0.8 of the event before (before>at entry):$ex"
	log_test "fast recovery keeps cwnd: no packet conservation" \
		"$entries entries in PROBE_BW, $cuts cut cwnd"
}

signals_random_loss()
{
	local hi bdp n

	path_bottleneck_at $SIG_RATE $SIG_RTT "$((SIG_BDP * 2))" 0.5
	hop_per_packet		# netem drops packets, not GSO bursts (last case)
	traced_flow randloss "$SECS"
	check_err $? "random-loss flow failed"
	shape_clear
	# the second half of the PROBE_BW rounds: inflight_hi (where set) and
	# the BDP in packets from the round's own bw (bytes/s) and min_rtt
	n=$(grep -c ' mode=PROBE_BW ' "$TMPD/randloss.ev")
	grep ' mode=PROBE_BW ' "$TMPD/randloss.ev" | tail -n "$((n - n / 2))" |
		awk -v mss="$MSS" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (v["inflight_hi"] > 0) print v["inflight_hi"], v["bw"] * v["min_rtt_us"] / 1e6 / mss
		}' >"$TMPD/randloss.hi"
	hi=0 bdp=0
	if [[ -s $TMPD/randloss.hi ]]; then
		hi=$(col_median 1 "$TMPD/randloss.hi")
		bdp=$(col_median 2 "$TMPD/randloss.hi")
	fi
	((n >= 4))
	check_err $? "only $n PROBE_BW rounds"
	((hi == 0)) || fcmp "$hi" '>=' "$(calc "$bdp * 0.9")"
	check_err $? "median inflight_hi $hi packets below 0.9 of the BDP, $bdp packets, in the last half of $n PROBE_BW rounds"
	log_test "0.5% random loss does not pin inflight_hi below the BDP" \
		"median inflight_hi ${hi/#0/unset} vs BDP $bdp packets over the last half of $n PROBE_BW rounds, $(iperf3_goodput "$TMPD/randloss.json") Mbit/s, $(iperf3_retrans "$TMPD/randloss.json") retransmits"
}

# probes EVFILE: bandwidth probes in a flow (REFILL rounds: a probe that
# goes too high may end before an UP round does).
probes()
{
	grep -c ' phase=REFILL ' "$1"
}

# loss_rate_flow ARM TRY: one flow of signals_loss_rate's ARM (flight or
# round); adds its probes and Bbrx3InflightHiLoss moves to ARM's totals.
loss_rate_flow()
{
	local arm=$1 try=$2 c0 n nb=0

	[[ $arm == round ]] && nb=1
	echo $nb >/sys/module/tcp_bbrx/parameters/fault_block
	c0=$(bbrx_stat Bbrx3InflightHiLoss "$SND")
	traced_flow "lossrate-$arm$try" "$((SECS + 2))"
	check_err $? "evenly lossy flow ($arm) failed"
	n=$(probes "$TMPD/lossrate-$arm$try.ev")
	LR_HILOSS[$arm]=$((LR_HILOSS[$arm] + $(bbrx_stat Bbrx3InflightHiLoss "$SND") - c0))
	LR_UPS[$arm]=$((LR_UPS[$arm] + n))
	echo 0 >/sys/module/tcp_bbrx/parameters/fault_block
	log_info "$arm flow $try: $n probes, $(iperf3_goodput "$TMPD/lossrate-$arm$try.json") Mbit/s, $(iperf3_retrans "$TMPD/lossrate-$arm$try.json") retransmits"
}

signals_loss_rate()
{
	local rate=50 rtt=60 every=80 bdp try beta0 f r
	declare -gA LR_HILOSS=([flight]=0 [round]=0) LR_UPS=([flight]=0 [round]=0)

	bdp=$(bdp_bytes $rate $rtt)
	beta0=$(bbrx_sysctl_get "$SND" bbrx3_beta)
	# no lower-bound cuts: the flights stay near the BDP, large enough
	# that a loss more or less is under loss_thresh's margin
	shape_bottleneck $rate "$((bdp * 2))" && shape_delay $rtt "$bdp" &&
		shape_drop_every $every && bbrx_sysctl_set "$SND" bbrx3_beta 1000
	check_err $? "cannot set up the evenly lossy path"
	hop_per_packet
	# a flow may probe only once in SECS: up to six flows per arm,
	# alternating, until six probes judged by the flight, three by the round
	for ((try = 1; RET == 0 && try <= 6 &&
	      (LR_UPS[flight] < 6 || LR_UPS[round] < 3); try++)); do
		((LR_UPS[flight] >= 6)) || loss_rate_flow flight $try
		((RET || LR_UPS[round] >= 3)) || loss_rate_flow round $try
	done
	shape_clear
	bbrx_sysctl_set "$SND" bbrx3_beta "$beta0"
	f="+${LR_HILOSS[flight]} over ${LR_UPS[flight]} probes"
	r="+${LR_HILOSS[round]} over ${LR_UPS[round]}"
	((LR_UPS[flight] >= 2 && LR_UPS[round] >= 2))
	check_err $? "too few bandwidth probes: $f by the flight, $r by the round"
	# the flight's share below the round's: hi_f / ups_f < hi_r / ups_r
	((LR_HILOSS[flight] * LR_UPS[round] < LR_HILOSS[round] * LR_UPS[flight]))
	check_err $? "Bbrx3InflightHiLoss $f judged by the flight, $r by the round: a loss rate of 1/$every, under loss_thresh, ended as large a share of probes by the flight"
	log_test "a probe judges its losses against its own flight" \
		"Bbrx3InflightHiLoss $f judged by the flight, $r by the round (fault_block=1), every ${every}th packet dropped"
}

# tcp_counter NAME: the sender's TcpExt counter NAME (nstat's name).
tcp_counter()
{
	ip netns exec "$SND" nstat -asz "$1" | awk -v n="$1" '$1 == n { print $2 }'
}

signals_tlp_loss()
{
	local every=4 r0 l0 tlp=0 rounds=0 ecn0

	# one 1448-byte write per 400 ms: each packet is the whole flight,
	# and a probe timeout (~1.5 RTT + 200 ms) comes before the next one
	ecn0=$(ip netns exec "$SND" sysctl -n net.ipv4.tcp_ecn)
	shape_bottleneck $SIG_RATE "$SIG_BDP" && shape_delay $SIG_RTT "$SIG_BDP" &&
		shape_drop_every $every full && ns_sysctl "$SND" net.ipv4.tcp_ecn=0
	check_err $? "cannot set up the tail-loss path"
	hop_per_packet
	r0=$(tcp_counter TcpExtTCPLossProbeRecovery)
	l0=$(bbrx_stat Bbrx3LossRounds "$SND")
	traced_flow tlp "$((SECS + 2))" -l 1448 -b 28960
	check_err $? "sparse flow failed"
	tlp=$(($(tcp_counter TcpExtTCPLossProbeRecovery) - r0))
	rounds=$(($(bbrx_stat Bbrx3LossRounds "$SND") - l0))
	shape_clear
	ns_sysctl "$SND" net.ipv4.tcp_ecn="$ecn0"
	((tlp >= 3))
	check_err $? "only $tlp losses repaired by a tail loss probe (TcpExtTCPLossProbeRecovery)"
	# the last repair's loss round may still be open when the flow ends
	((rounds >= tlp - 1))
	check_err $? "Bbrx3LossRounds +$rounds for $tlp losses that tail loss probes repaired"
	log_test "a loss repaired by a tail loss probe opens a loss round" \
		"Bbrx3LossRounds +$rounds, TcpExtTCPLossProbeRecovery +$tlp, every ${every}th full-sized packet dropped"
}

signals_before_init()
{
	local socks old c0 enter up

	# the netns default, not -C: iperf3 sets -C after connect(), when
	# setting it calls .init at once
	old=$(ip netns exec "$SND" sysctl -n net.ipv4.tcp_congestion_control)
	ns_sysctl "$SND" net.ipv4.tcp_congestion_control=bbrx3
	check_err $? "cannot make bbrx3 the sender's default"
	path_bottleneck_at $SIG_RATE $SIG_RTT "$SIG_BDP"
	c0=$(bbrx_stat Bbrx3ProbeRttEnter "$SND")
	TRACED_CC=- traced_flow parallel 2 -P 8
	check_err $? "parallel flows failed"
	enter=$(($(bbrx_stat Bbrx3ProbeRttEnter "$SND") - c0))
	shape_clear
	ns_sysctl "$SND" net.ipv4.tcp_congestion_control="$old"
	socks=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^sport=/) s[$i] = 1 } END { print length(s) }' \
		"$TMPD/parallel.ev")
	((socks >= 8))
	check_err $? "round events from $socks sockets, want the 8 streams"
	((enter == 0))
	check_err $? "Bbrx3ProbeRttEnter +$enter in 2 s flows of $socks sockets"
	up=$(cut -d. -f1 /proc/uptime)
	# State .init has not set says min_rtt was last refreshed at jiffies
	# 0, which is 300 s after boot (INITIAL_JIFFIES): before that even
	# such a state cannot have a PROBE_RTT due.
	((up > 310)) || log_info "uptime ${up} s: a model run before .init would enter PROBE_RTT only after ~305 s"
	log_test "no PROBE_RTT from state before .init on $socks active opens" \
		"Bbrx3ProbeRttEnter +$enter at uptime ${up} s"
}

signals_tso_floor()
{
	local margin res n low

	margin=$(bbrx_sysctl_get "$SND" tso_margin)
	shape_bottleneck $SIG_RATE $((4 * 1024 * 1024))
	traced_flow tsofloor "$SECS"
	check_err $? "low-RTT flow failed"
	shape_clear
	res=$(awk -v mss="$MSS" -v m="$margin" '/ mode=PROBE_BW / {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		r = int(v["min_rtt_us"] / 512)
		want = r < 32 ? m * int(65536 / 2 ^ r / mss) : 0
		n++
		if (v["cwnd"] < want) { low++; ex = ex " " v["cwnd"] "<" want "@" v["min_rtt_us"] "us" }
		if (n == 1 || v["min_rtt_us"] < mr) mr = v["min_rtt_us"]
	} END { printf "%d %d %d%s\n", n, low, mr, substr(ex, 1, 200) }' "$TMPD/tsofloor.ev")
	read -r n low MINRTT _ <<<"$res"
	((n >= 10))
	check_err $? "only $n PROBE_BW rounds"
	((low * 10 <= n))
	check_err $? "cwnd under tso_margin x the min_rtt allowance in $low of $n PROBE_BW rounds:${res#* * * }"
	log_test "low-RTT cwnd keeps room for tso_margin full bursts" \
		"$low of $n PROBE_BW rounds under the floor, min_rtt ${MINRTT} us, $(iperf3_goodput "$TMPD/tsofloor.json") Mbit/s"
}

signals_ecn_once()
{
	local c0 cuts want ecn0 ecn3

	ecn0=$(ip netns exec "$SND" sysctl -n net.ipv4.tcp_ecn)
	ecn3=$(bbrx_sysctl_get "$SND" bbrx3_ecn)
	shape_ce_marker 100 1ms && shape_delay 3 &&
		ns_sysctl "$SND" net.ipv4.tcp_ecn=1 && bbrx_sysctl_set "$SND" bbrx3_ecn 1
	check_err $? "cannot set up the CE-marking path"
	c0=$(bbrx_stat Bbrx3InflightLoEcn "$SND")
	traced_flow ecn "$SECS"
	check_err $? "ECN flow failed"
	cuts=$(($(bbrx_stat Bbrx3InflightLoEcn "$SND") - c0))
	shape_clear
	ns_sysctl "$SND" net.ipv4.tcp_ecn="$ecn0"
	bbrx_sysctl_set "$SND" bbrx3_ecn "$ecn3"
	want=$(awk -v gate="$(bbrx_sysctl_get "$SND" bbrx3_ecn_max_rtt_us)" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		probing = v["mode"] == "STARTUP" ||
			  (v["mode"] == "PROBE_BW" && (v["phase"] == "REFILL" || v["phase"] == "UP"))
		if (v["ce"] > 0 && !probing && (gate == 0 || v["min_rtt_us"] <= gate)) n++
	} END { print n + 0 }' "$TMPD/ecn.ev")
	((cuts == want && want > 0))
	check_err $? "Bbrx3InflightLoEcn +$cuts, rounds with CE that adapt the lower bounds: $want"
	log_test "inflight_lo cut once per CE-marked round" \
		"$cuts cuts, $want such rounds of $(wc -l <"$TMPD/ecn.ev"), $(iperf3_goodput "$TMPD/ecn.json") Mbit/s"
}

require_command iperf3 jq tc
require_qdisc fq_codel netem
require_bbrx
bbrx_events_setup 8192
trap 'kprobe_events_del bbrxsig; bbrx_events_cleanup; cleanup' EXIT
require_topo
iperf3_server_start || exit 1
NS_INO=$(netns_ino "$SND")

tests_run
tests_done
exit $EXIT_STATUS
