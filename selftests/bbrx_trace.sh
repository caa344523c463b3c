#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx's trace events (module/bbrx_trace.h), enabled through tracefs and
# read back from its `trace` file; every check compares an event's fields
# with what the same run shows elsewhere (iperf3, /proc/net/bbrx_stat).
#
#   trace_rounds  a bbrx and a bbrx3 flow (ROUND_SECS, 4 s) through a
#                 5 Mbit/s, 20 ms bottleneck with a 3-packet buffer (a rate
#                 even a TCG guest sharing its host fills, a BDP of 8
#                 packets, so that bbrx3 probes every 8 rounds, and a buffer
#                 its probes overflow, so that it sets inflight_hi),
#                 bbrx_round and bbrx3_round enabled.  Per flow:
#                 one event per round (the rounds' delivered packets sum
#                 to what iperf3 received, see below; at most two events
#                 per path RTT of the flow's wall time: a round lasts at
#                 least one RTT, and the model ends one early only at the
#                 start of a recovery or PROBE_RTT, which themselves last
#                 a round trip; how many rounds fit depends on the guest,
#                 so that count is printed, not floored), the first
#                 in STARTUP at the model's STARTUP gain (bbrx 739, bbrx3
#                 710 in 1/256), PROBE_BW reached, min_rtt_us on the path's
#                 RTT, bw at most 2 x the configured bottleneck rate (tbf's
#                 burst), and in PROBE_BW a median of at most 1.5 x that
#                 rate and at least 0.8 x the flow's goodput, cwnd and
#                 pacing_rate set, loss_pm consistent with lost and
#                 delivered, the rounds' delivered packets summing to what
#                 iperf3 received (0.9-1.05), their lost packets to at most
#                 1.2 x its retransmits + 10 (and > 0 when there were any);
#                 bbrx reports no inflight bounds, bbrx3 reports an
#                 inflight_hi exactly when its counters say it set one
#                 (Bbrx3InflightHiLoss/HiEcn/StartupExitCong), which the
#                 shallow buffer must make happen, and its phases are
#                 named DOWN/CRUISE/REFILL/UP; in each of its rounds bw is
#                 min(max_bw, bw_lo).  bbrx3_state, on in the bbrx3 flow
#                 (off in the bbrx one): at least STARTUP's end, each
#                 event a change of mode, phase or recovery whose prev_
#                 fields are the state the event before entered, totals
#                 of delivered and lost never falling.
#   trace_hooks   the decision names of the hook events' format are those
#                 of BBRX_DECISION_TABLE (lib_hooks.sh); each row of that
#                 table with its policy on (scope 1), one 2 s flow of its
#                 workload (on 6.1: autocork 1 corked, 3 declined; tsq 1
#                 single_skb, 2 withheld, over late TX completions, 3 ms,
#                 as hook_tsq.sh; rcvbuf 1 sized, grown; delack 1
#                 push_marked, 2 suppressed). The decision's counter moved and the events of that
#                 decision in the netns equal its delta (no ring-buffer
#                 overrun allowed), each carrying the policy set and a
#                 non-zero value; then with every event disabled a flow
#                 with all policies on writes nothing.

ALL_TESTS="
	trace_rounds
	trace_hooks
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

ROUND_SECS=${BBRX_TRACE_SECS:-4}
ROUND_RATE=5	# Mbit/s
ROUND_BUF=4542	# bytes: 3 full frames
HOOK_SECS=2

# bbrx3_hi_count: times bbrx3 set inflight_hi in the sender's netns.
bbrx3_hi_count()
{
	local c n=0

	for c in Bbrx3InflightHiLoss Bbrx3InflightHiEcn Bbrx3StartupExitCong; do
		n=$((n + $(bbrx_stat "$c" "$SND")))
	done
	echo "$n"
}

# check_model CC FILE: the round checks of one flow (FILE: its events).
check_model()
{
	local cc=$1 f=$2 json=$TMPD/rounds-$1.json
	local n max_n first gain pbw rtt bwmax bwmed gp gpB sent mss dsum lsum rtx bad

	n=$(wc -l <"$f")
	max_n=$((2 * ROUND_WALL_MS[$cc] / PATH_RTT + 2))
	((n > 0 && n <= max_n))
	check_err $? "$cc: $n round events in ${ROUND_WALL_MS[$cc]} ms (want 1..$max_n, 2 per $PATH_RTT ms RTT)"
	((n > 0)) || return

	first=$(head -1 "$f" | tf mode)
	gain=$(head -1 "$f" | tf pacing_gain)
	[[ $first == STARTUP && $gain == "${STARTUP_GAIN[$cc]}" ]]
	check_err $? "$cc: first round mode=$first pacing_gain=$gain (want STARTUP, ${STARTUP_GAIN[$cc]})"
	pbw=$(grep -c ' mode=PROBE_BW ' "$f")
	((pbw > 0))
	check_err $? "$cc: no round in PROBE_BW"

	rtt=$(tf min_rtt_us <"$f" | median)
	in_range "$rtt" $((PATH_RTT * 1000)) $(((PATH_RTT + 10) * 1000))
	check_err $? "$cc: median min_rtt_us $rtt on a $PATH_RTT ms path"

	gp=$(iperf3_goodput "$json")
	gpB=$(calc "$gp * 1e6 / 8")
	bwmax=$(tf bw <"$f" | sort -n | tail -1)
	bwmed=$(grep ' mode=PROBE_BW ' "$f" | tf bw | median)
	# The max filter keeps samples that tbf's burst (15 KB, 24 ms of
	# tokens at 5 Mbit/s) let through faster than the rate.
	fcmp "$bwmax" '<=' "$(calc "2 * $ROUND_RATE * 1e6 / 8")" &&
		fcmp "${bwmed:-0}" '<=' "$(calc "1.5 * $ROUND_RATE * 1e6 / 8")" &&
		fcmp "${bwmed:-0}" '>=' "$(calc "0.8 * $gpB")"
	check_ratio $? "$cc: bw max $bwmax, PROBE_BW median $bwmed bytes/s; goodput $gpB bytes/s on $ROUND_RATE Mbit/s"

	bad=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		t = v["delivered"] + v["lost"]
		pm = t ? int(v["lost"] * 1000 / t) : 0
		if (v["cwnd"] < 1 || v["pacing_rate"] < 1 || v["loss_pm"] != pm) n++
	} END { print n + 0 }' "$f")
	((bad == 0))
	check_err $? "$cc: $bad rounds with cwnd or pacing_rate 0 or loss_pm not lost/(delivered+lost)"

	mss=$(jq -r '.start.tcp_mss_default // 1448' "$json")
	# What the receiver got: bytes the sender wrote may still sit in its
	# buffer when the flow ends (at 5 Mbit/s about 15% of them).
	sent=$(jq -r '.end.sum_received.bytes // 0' "$json")
	dsum=$(tf delivered <"$f" | awk '{ s += $1 } END { print s + 0 }')
	lsum=$(tf lost <"$f" | awk '{ s += $1 } END { print s + 0 }')
	rtx=$(iperf3_retrans "$json")
	in_range "$(calc "$dsum * $mss / ($sent + 1)")" 0.9 1.05
	check_err $? "$cc: rounds delivered $dsum x $mss bytes against $sent bytes received"
	# A packet marked lost whose SACK comes before its retransmission
	# counts in lost but not in retransmits.
	((lsum <= rtx * 6 / 5 + 10)) && { ((rtx == 0)) || ((lsum > 0)); }
	check_err $? "$cc: rounds lost $lsum packets, iperf3 retransmits $rtx"
	ROUND_MSG+="$cc $n rounds ($(calc "$n * $PATH_RTT / ${ROUND_WALL_MS[$cc]}") per $PATH_RTT ms of ${ROUND_WALL_MS[$cc]} ms), $pbw in PROBE_BW, min_rtt $rtt us, bw median $(calc "$bwmed * 8 / 1e6") Mbit/s (goodput $gp), delivered $dsum, lost $lsum (rtx $rtx); "
}

# check_bw_terms FILE: in every bbrx3 round bw is the smaller of max_bw
# and bw_lo (0: no bound).
check_bw_terms()
{
	local bad

	bad=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		want = v["max_bw"]
		if (v["bw_lo"] > 0 && v["bw_lo"] < want) want = v["bw_lo"]
		if (v["max_bw"] == "" || v["bw"] != want) { n++; if (!ex) ex = $0 }
	} END { print n + 0, ex }' "$1")
	[[ ${bad%% *} == 0 ]]
	check_err $? "bbrx3: ${bad%% *} rounds whose bw is not min(max_bw, bw_lo), e.g. ${bad#* }"
}

# check_states FILE: bbrx3_state events of one flow: at least STARTUP's
# end, each one's prev_mode/prev_phase the state the one before entered
# (the first leaves STARTUP), a change in each, lost and delivered never
# falling.
check_states()
{
	local n bad

	n=$(wc -l <"$1")
	bad=$(awk '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		want = NR == 1 ? "STARTUP -" : m " " p
		if (v["prev_mode"] " " v["prev_phase"] != want ||
		    (v["mode"] == v["prev_mode"] && v["phase"] == v["prev_phase"] &&
		     (v["ca_state"] ~ /Recovery|Loss/) == (v["prev_ca_state"] ~ /Recovery|Loss/)) ||
		    v["lost"] + 0 < l || v["delivered"] + 0 < d) { c++; if (!ex) ex = NR ": " $0 }
		m = v["mode"]; p = v["phase"]; l = v["lost"]; d = v["delivered"]
	} END { print c + 0, ex }' "$1")
	((n > 0)) && [[ ${bad%% *} == 0 ]]
	check_err $? "bbrx3: $n state events, ${bad%% *} out of sequence (${bad#* })"
	ROUND_MSG+="bbrx3 $n state changes; "
}

trace_rounds()
{
	local cc ino of hi phases h0 h1 t0 evs

	ino=$(netns_ino "$SND")
	declare -gA STARTUP_GAIN=([bbrx]=739 [bbrx3]=710) ROUND_WALL_MS=()
	ROUND_MSG=
	shape_bottleneck "$ROUND_RATE" "$ROUND_BUF" && shape_delay "$PATH_RTT" "$PATH_BDP"
	check_err $? "shaping failed"
	for cc in bbrx bbrx3; do
		evs=("${cc}_round")
		[[ $cc == bbrx3 ]] && { h0=$(bbrx3_hi_count); evs+=(bbrx3_state); }
		trace_start "${evs[@]}"
		check_err $? "cannot enable ${evs[*]}"
		t0=${EPOCHREALTIME/./}
		flow_run "rounds-$cc" "$cc" "$ROUND_SECS"
		check_err $? "$cc flow failed"
		ROUND_WALL_MS[$cc]=$(((${EPOCHREALTIME/./} - t0) / 1000))
		of=$(trace_stop "$TMPD/rounds-$cc.trace")
		trace_of "$TMPD/rounds-$cc.trace" "${cc}_round" "$ino" "$FLOW_CPORT" \
			>"$TMPD/rounds-$cc.ev"
		# The other model's events stayed off.
		! grep -qE " $([[ $cc == bbrx ]] && echo 'bbrx3_(round|state)' || echo bbrx_round): " \
			"$TMPD/rounds-$cc.trace"
		check_err $? "$cc: the other model's events fired while disabled"
		((of == 0)) || log_info "$cc: ring buffer lost $of events"
		check_model "$cc" "$TMPD/rounds-$cc.ev"
	done
	h1=$(bbrx3_hi_count)

	hi=$(tf inflight_hi <"$TMPD/rounds-bbrx.ev" | sort -u | tr '\n' ' ')
	[[ $hi == "0 " ]] && [[ $(tf inflight_lo <"$TMPD/rounds-bbrx.ev" | sort -u) == 0 ]]
	check_err $? "bbrx reports inflight bounds: inflight_hi values '$hi'"
	hi=$(tf inflight_hi <"$TMPD/rounds-bbrx3.ev" | sort -n | tail -1)
	((h1 > h0 && ${hi:-0} > 0))
	check_err $? "bbrx3: inflight_hi set $((h1 - h0)) times by its counters behind a 3-packet buffer, max inflight_hi in the rounds ${hi:-none}"
	check_bw_terms "$TMPD/rounds-bbrx3.ev"
	trace_of "$TMPD/rounds-bbrx3.trace" bbrx3_state "$ino" "$FLOW_CPORT" >"$TMPD/state-bbrx3.ev"
	check_states "$TMPD/state-bbrx3.ev"
	phases=$(grep ' mode=PROBE_BW ' "$TMPD/rounds-bbrx3.ev" | tf phase | sort -u | tr '\n' ' ')
	[[ -n $phases && -z $(echo "$phases" | tr ' ' '\n' | grep -vxE 'DOWN|CRUISE|REFILL|UP|') ]]
	check_err $? "bbrx3 PROBE_BW phases '$phases'"
	log_info "${ROUND_MSG}bbrx3 inflight_hi max $hi, phases $phases"
	shape_clear
	log_test "round events of bbrx and bbrx3 agree with the flows" "${ROUND_MSG%; }"
}

# hook_case POLICY VALUE DECISION COUNTER WORKLOAD: one row of
# BBRX_DECISION_TABLE, in the netns the policy acts in.
hook_case()
{
	local knob=$1 val=$2 dec=$3 ctr=$4 work=work_$5 ev=bbrx_$1
	local ns ino c0 c1 d n of pol zero

	if [[ -z $(policies_usable "$knob") ]]; then
		# its hooks are refused on this kernel (BBRX_EXPECT_REFUSED)
		HOOK_MSG+="$knob not traced (refused here); "
		return
	fi
	ns=$(policy_ns "$knob")
	ino=$(netns_ino "$ns")
	bbrx_sysctl_set "$ns" "$knob" "$val" || { check_err 1 "sysctl $knob=$val in $ns"; return; }
	c0=$(bbrx_stat "$ctr" "$ns")
	trace_start "$ev"
	$work "$knob-$val"
	of=$(trace_stop "$TMPD/$knob-$val.trace")
	c1=$(bbrx_stat "$ctr" "$ns")
	bbrx_sysctl_set "$ns" "$knob" 0
	d=$((c1 - c0))
	trace_of "$TMPD/$knob-$val.trace" "$ev" "$ino" | grep " decision=$dec " >"$TMPD/$knob-$val.ev"
	n=$(wc -l <"$TMPD/$knob-$val.ev")
	pol=$(tf policy <"$TMPD/$knob-$val.ev" | sort -u | tr '\n' ' ')
	zero=$(tf value <"$TMPD/$knob-$val.ev" | grep -cx 0)
	((d > 0 && n == d && of == 0)) && [[ $pol == "$val " ]] && ((zero == 0))
	check_err $? "$knob=$val: $ctr +$d, $n $ev $dec events (ring buffer lost $of), policies '$pol', $zero with value 0"
	HOOK_MSG+="$knob=$val $dec $n/$d; "
}

# hook_cases late|other: the rows of BBRX_DECISION_TABLE whose workload
# is late_bulk, or all the others.
hook_cases()
{
	local which=$1 r
	local -a rows

	mapfile -t rows <<<"$BBRX_DECISION_TABLE"
	for r in "${rows[@]}"; do
		# shellcheck disable=SC2086  # the row's fields
		set -- $r
		if [[ $5 == late_bulk ]]; then
			[[ $which == late ]] && hook_case "$@"
		else
			[[ $which == other ]] && hook_case "$@"
		fi
	done
}

# decisions_as_table: the decision names of the hook events' format
# (__print_symbolic of enum bbrx_trace_decision) are those of
# BBRX_DECISION_TABLE, no more, no fewer.
decisions_as_table()
{
	local mod tab

	mod=$(grep -o '{ [0-9]*, "[a-z_]*" }' "$EV_DIR/bbrx_autocork/format" |
		sed -E 's/.*"([a-z_]*)".*/\1/' | sort -u | tr '\n' ' ')
	tab=$(awk '{ print $3 }' <<<"$BBRX_DECISION_TABLE" | sort -u | tr '\n' ' ')
	[[ -n $mod && $mod == "$tab" ]]
	check_err $? "the module's decisions '$mod', BBRX_DECISION_TABLE's (lib_hooks.sh) '$tab'"
}

work_small_writes()
{
	shape_sender_tbf 100
	flow_run "$1" cubic "$HOOK_SECS" -l 500 -N >/dev/null
	check_err $? "$1: flow failed"
	tc -n "$SND" qdisc del dev "$SND_IF" root 2>/dev/null
}

work_bulk()
{
	flow_run "$1" cubic "$HOOK_SECS" >/dev/null
	check_err $? "$1: flow failed"
}

work_late_bulk()
{
	work_bulk "$@"
}

work_psh()
{
	flow_run "$1" cubic "$HOOK_SECS" -l 1448 -N >/dev/null
	check_err $? "$1: flow failed"
}

trace_hooks()
{
	local n p

	HOOK_MSG=
	bbrx_sysctl_set "$SND" scope 1 && bbrx_sysctl_set "$RCV" scope 1
	check_err $? "scope 1 failed"
	decisions_as_table
	hook_cases other

	# Disabled: nothing written while every hook acts and bbrx flows run.
	# shellcheck disable=SC2046  # a list of policy names
	for p in $(policies_usable $(bbrx_policy_names)); do
		bbrx_sysctl_set "$(policy_ns "$p")" "$p" 1
	done
	echo 0 >"$EV_DIR/enable"
	: >"$TRACEFS/trace"
	shape_sender_tbf 100
	flow_run hooks-off bbrx "$HOOK_SECS" -l 1448 -N >/dev/null
	check_err $? "hooks-off: flow failed"
	tc -n "$SND" qdisc del dev "$SND_IF" root 2>/dev/null
	n=$(grep -cE ' bbrx3?_[a-z]+: ' "$TRACEFS/trace")
	((n == 0))
	check_err $? "$n bbrx events written with every event disabled"
	# shellcheck disable=SC2046  # a list of policy names
	for p in $(policies_usable $(bbrx_policy_names)); do
		bbrx_sysctl_set "$(policy_ns "$p")" "$p" 0
	done

	# The late_bulk rows (TSQ's single-skb case needs TX completions that
	# come late, hook_tsq.sh): last, as the setup re-routes the sender.
	if late_completion_setup 100 3000; then
		hook_cases late
	else
		check_err 1 "late completion setup failed"
	fi
	bbrx_sysctl_set "$SND" scope 0 && bbrx_sysctl_set "$RCV" scope 0
	log_test "hook events equal their counters, nothing when disabled" "${HOOK_MSG%; }"
}

require_command iperf3 jq tc
require_bbrx
# Large enough for every decision of a 2 s flow (tsq's run to ~60k events).
bbrx_events_setup 16384
all_hooks_read
# shellcheck disable=SC2046,SC2086  # hook names
require_hooks $(hooks_usable $ALL_HOOKS)
require_topo
iperf3_server_start || exit 1

tests_run
tests_done
exit $EXIT_STATUS
