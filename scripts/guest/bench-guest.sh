#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench-guest.sh - one scenario of `make bench`, run inside the VM next to the
# selftests' lib.sh (scripts/bench/bench stages both and boots one VM per
# scenario).  Measures only; the host aggregates and draws.
#
# Usage: bench-guest.sh SCENARIO...  (names from bench-matrix.sh; several
#                                     run one after the other, each on a
#                                     fresh topology)
#
# Environment (vm-run passes BBRX_*):
#   BBRX_BENCH_QUICK  0 the full matrix, 1 the short one, 2 the smoke form
#                     (bench-matrix.sh)
#   BBRX_BENCH_REPS   repetitions per arm (default 3)
#   BBRX_BENCH_ARMS   only these arms (scripts/bench/bench's ARMS)
#   BBRX_BENCH_GROUPS only these groups (scripts/bench/bench's BENCH_GROUPS)
#   BBRX_BENCH_BASE   1: load ./tcp_bbrx3base.ko too (scripts/bench/bench's
#                     BENCH_BASE), for the bbrx3base arms
#   BBRX_BENCH_STEP   number of this scenario's first step in the whole run,
#   BBRX_BENCH_STEPS  and the total, for the "[i/N]" progress lines
#   VM_OUT            output directory (vm-run copies it back to the host)
#
# The module is loaded once, with the hooks all the scenarios need.
# Output in $VM_OUT/SCENARIO/: runs.jsonl, one JSON object per flow (or pair
# of flows) with the run's metrics and per-second series; meta.json with the
# setup.  Progress lines on stderr: "[i/N] SCENARIO GROUP ARM, run r/R ...".
# Exit 0 if every flow ran, 1 otherwise (the output is written either way).

cd "$(dirname "$0")" || exit 1
[[ $# -gt 0 ]] || { echo "usage: bench-guest.sh SCENARIO..." >&2; exit 2; }

# lib.sh takes a script's arguments for NIC names: not the scenarios
scenarios=("$@")
set --
# shellcheck source=../selftests/lib.sh
source ./lib.sh
set -- "${scenarios[@]}"
# shellcheck source=../selftests/lib_hooks.sh
source ./lib_hooks.sh
BENCH_QUICK=${BBRX_BENCH_QUICK:-0}
BENCH_REPS=${BBRX_BENCH_REPS:-3}
BENCH_ARMS=${BBRX_BENCH_ARMS:-}
BENCH_GROUPS=${BBRX_BENCH_GROUPS:-}
BENCH_BASE_ARMS=${BBRX_BENCH_BASE:-0}
# staged next to this script by scripts/bench/bench
# shellcheck source=../bench/bench-matrix.sh
source ./bench-matrix.sh

for SCEN in "$@"; do
	[[ " $BENCH_SCENARIOS " == *" $SCEN "* ]] || { echo "bench-guest: unknown scenario $SCEN" >&2; exit 2; }
done

STEP=${BBRX_BENCH_STEP:-1}
TOTAL=${BBRX_BENCH_STEPS:-}
if [[ -z $TOTAL ]]; then
	TOTAL=0
	for SCEN in "$@"; do
		TOTAL=$((TOTAL + $(bench_steps "$SCEN")))
	done
fi
PORT2=5202		# second iperf3 server ("fair")
NETIFS_GIVEN=${NETIFS:-}
FAILS_ALL=0

# scenario_init SCEN: the per-scenario globals.
scenario_init()
{
	local c

	SCEN=$1
	OUT=${VM_OUT:-/tmp/bench-out}/$SCEN
	RUNS=$OUT/runs.jsonl
	mkdir -p "$OUT" && : >"$RUNS"
	SECS=$(bench_secs "$SCEN")
	PNS=$SND
	[[ $(bench_policy_ns "$SCEN") == rcv ]] && PNS=$RCV
	FAILS=0
	SETUP=()		# what the scenario set up, for meta.json
	IPERF_ARGS=()		# per group
	NETIFS=$NETIFS_GIVEN
	# Counters snapshotted around every flow, per netns.  The
	# receiver's TcpOutSegs over the sender's is ACKs per data segment.
	# Retransmission timeouts and tail loss probes, in every scenario:
	# an RTO is a collapse, not a rule of the model.
	CTRS_SND=(TcpOutSegs TcpRetransSegs TcpExtTCPTimeouts TcpExtTCPLossProbes)
	CTRS_RCV=(TcpOutSegs)
	case $SCEN in
	bottleneck|shallow|policer|loss) CTRS_SND+=(Bbrx:Bbrx3InflightHiLoss Bbrx:Bbrx3InflightLoLoss) ;;
	ecn) CTRS_SND+=(Bbrx:Bbrx3InflightHiEcn Bbrx:Bbrx3InflightLoEcn) ;;
	autocork) CTRS_SND+=(TcpExtTCPAutoCorking) ;;
	fidelity) CTRS_SND+=(Bbrx:LtBwUsed) ;;
	esac
	# A hook scenario's counters, in its policy's netns.
	for c in $(bench_hook_counters "$SCEN"); do
		if [[ $(bench_policy_ns "$SCEN") == rcv ]]; then
			CTRS_RCV+=("Bbrx:$c")
		else
			CTRS_SND+=("Bbrx:$c")
		fi
	done
}

# scenario_done: tear the scenario's namespaces and servers down (the next
# scenario starts from a fresh topology and NICs).
scenario_done()
{
	[[ ${#BG_PIDS[@]} -gt 0 ]] && bg_kill "${BG_PIDS[@]}"
	BG_PIDS=()
	topo_destroy
	FAILS_ALL=$((FAILS_ALL + FAILS))
}

progress()
{
	echo "[$STEP/$TOTAL] $SCEN $*" >&2
}

# The sysctls the scenario's arms set ("CC:K=V[,K=V...]"), reset to the
# netns defaults (knob_defaults, read after setup) before every run, so that
# the other arms run with the defaults and the cubic and bbr rows with the
# kernel's behaviour.
arm_knobs()
{
	bench_arms "$SCEN" | tr ' ' '\n' | sed -n 's/^[^:]*://p' | tr ',' '\n' |
		sed -n 's/^\([a-z0-9_]*\)=.*/\1/p' | sort -u
}

declare -A KNOB_DEFAULT
knob_defaults()
{
	local k

	KNOB_DEFAULT=()
	for k in $(arm_knobs); do
		KNOB_DEFAULT[$k]=$(bbrx_sysctl_get "$PNS" "$k")
	done
}

# load_module SCEN...: only the hooks these scenarios need are installed
# (none for the hook-free ones), so each scenario measures its own hook and
# nothing else.
load_module()
{
	local need='' h dis=''

	for h in "$@"; do
		need+=" $(bench_hooks "$h")"
	done
	# Hook-free scenarios load it with every hook disabled, so that their
	# rows measure the congestion control alone (an installed redirect
	# runs on every call of its target, also at policy 0); a boot that
	# also runs hook scenarios (the smoke form's) installs theirs: loaded
	# first with none, to read the module's hooks (all_hooks_read; a
	# disabled hook keeps its line), then again without the needed ones.
	if ! bbrx_module_loaded; then
		BBRX_HOOK_PARAMS=disable=all
		bbrx_load || echo "# bench: modprobe tcp_bbrx $BBRX_HOOK_PARAMS failed" >&2
		all_hooks_read
		for h in $need; do
			[[ " $ALL_HOOKS " == *" $h "* ]] ||
				{ echo "# bench: hook $h is not a hook of tcp_bbrx ($ALL_HOOKS)" >&2; exit 2; }
		done
		if [[ -n ${need// /} ]]; then
			for h in $ALL_HOOKS; do
				[[ " $need " == *" $h "* ]] || dis+="${dis:+,}$h"
			done
			BBRX_HOOK_PARAMS=${dis:+disable=$dis}
			# shellcheck disable=SC2119  # no parameters: BBRX_HOOK_PARAMS
			bbrx_reload ||
				echo "# bench: reload of tcp_bbrx ${BBRX_HOOK_PARAMS:-(every hook)} failed" >&2
		fi
	fi
	require_bbrx
	for h in $need; do
		[[ $(hook_state "$h") == installed ]] ||
			{ echo "# bench: hook $h not installed: $(hook_line "$h")" >&2; FAILS_ALL=$((FAILS_ALL + 1)); }
	done
}

setup()
{
	case $SCEN in
	autocork|rcvbuf|delack)
		# veth between sender and router, as hook_autocork.sh,
		# hook_rcvbuf.sh and hook_delack_rate.sh (see their headers).
		NETIFS= ;;
	esac
	topo_create || { echo "# bench: $SCEN: topology setup failed" >&2; return 1; }
	iperf3_server_start || { echo "# bench: $SCEN: iperf3 server did not start" >&2; return 1; }
	case $SCEN in
	bottleneck|fidelity) qdisc_available tbf && qdisc_available netem || return 1 ;;
	shallow) qdisc_available tbf && qdisc_available netem || return 1 ;;
	loss)
		# netem drops packets, not GSO aggregates (hop_per_packet)
		qdisc_available htb && qdisc_available netem || return 1
		hop_per_packet
		SETUP+=("router htb 20mbit into netem loss, 2 BDP; 20 ms; per-packet hops") ;;
	policer)
		modprobe -a act_police cls_matchall sch_ingress 2>/dev/null
		SETUP+=("router tc police 20mbit, exceed drop; sender tso off, gso off but in -gso") ;;
	ecn)
		# As bbrx3_ecn.sh: one queue marking above 1 ms, 2 ms RTT
		# (inside bbrx3_ecn_max_rtt_us), the sender negotiates ECN.
		qdisc_available fq_codel || return 1
		if ! { shape_ce_marker 100 1ms && shape_delay 2 && ns_sysctl "$SND" net.ipv4.tcp_ecn=1; }; then
			echo "# bench: ECN marker setup failed" >&2
			return 1
		fi
		SETUP+=("$(tc -n "$RTR" qdisc show dev "$RTR_IF_R" | grep fq_codel)"
			"sender net.ipv4.tcp_ecn $(ip netns exec "$SND" sysctl -n net.ipv4.tcp_ecn)") ;;
	gso2)
		set_gso_max_segs 2
		SETUP+=("sender gso_max_segs $(get_gso_max_segs)") ;;
	fair)
		qdisc_available tbf && qdisc_available netem || return 1
		ip netns exec "$RCV" iperf3 -s -p "$PORT2" >"$TMPD/iperf3-server2.log" 2>&1 &
		bg_track $!
		sleep 0.5 ;;
	autocork)
		# TX completions 400 us after the packet, no bottleneck (as
		# hook_autocork.sh; lib_shape.sh late_completion_setup).
		late_completion_setup 10000 400 ||
			{ echo "# bench: late-completion setup failed" >&2; FAILS=$((FAILS + 1)); }
		SETUP+=("late TX completions 400 us (tx_delay), veth, no bottleneck") ;;
	tsq)
		shape_sender_tbf 100
		SETUP+=("$(tc -n "$SND" qdisc show dev "$SND_IF" | head -n 1)") ;;
	rcvbuf)
		set_gso_max_segs 1
		bbrx_sysctl_set "$RCV" scope 1
		SETUP+=("sender gso_max_segs $(get_gso_max_segs)" "receiver scope 1") ;;
	delack)
		set_gso_max_segs 1
		shape_sender_fq 20
		sender_cwnd_lock 4 || { echo "# bench: cwnd lock failed: $SENDER_METRICS" >&2; FAILS=$((FAILS + 1)); }
		bbrx_sysctl_set "$RCV" scope 1
		IPERF_ARGS=(-l 1448 -N)
		SETUP+=("sender gso_max_segs $(get_gso_max_segs)" "$SENDER_METRICS" "receiver scope 1") ;;
	esac
}

# group_rtt G DEFAULT: the RTT in ms a group names ("1-40ms": 40), else
# DEFAULT.
group_rtt()
{
	[[ $1 =~ -([0-9]+)ms ]] && echo "${BASH_REMATCH[1]}" || echo "$2"
}

# group_policer G: the policer path of group G (bench_own_groups): 20
# Mbit/s policed with a 64 KB or 16 KB bucket, 40 ms (or 20 ms) RTT.  As
# bbrx3_paths.sh, the sender's TSO and GSO are off, so that packets, not
# 64 KB aggregates, meet the policer; "-gso" turns GSO back on: the
# sender's stack then sends 64 KB bursts that its NIC segments.
group_policer()
{
	local g=$1 burst=65536 rtt gso=off

	[[ $g == 16k* ]] && burst=16384
	rtt=$(group_rtt "$g" 40)
	[[ $g == *-gso ]] && gso=on
	shape_clear
	ip netns exec "$SND" ethtool -K "$SND_IF" tso off gso "$gso" >/dev/null &&
		shape_policer 20 "$burst" && shape_delay "$rtt" "$(bdp_bytes 20 "$rtt")"
}

# group G: shape the path (or choose the writes) for group G.
group()
{
	local g=$1 rtt

	case $SCEN in
	bottleneck) path_bottleneck "$g" ;;
	fair)
		# "B-NNms": B BDPs of an NN ms path
		rtt=$(group_rtt "$g" "$PATH_RTT")
		PATH_RTT=$rtt PATH_BDP=$(bdp_bytes "$PATH_RATE" "$rtt") path_bottleneck "${g%%-*}" ||
			{ echo "# bench: fair $g: path setup failed" >&2; FAILS=$((FAILS + 1)); } ;;
	policer) group_policer "$g" ||
		{ echo "# bench: policer $g: path setup failed" >&2; FAILS=$((FAILS + 1)); } ;;
	shallow)
		shape_clear
		case $g in
		64k) shape_bottleneck 200 65536 && shape_delay 20 "$(bdp_bytes 200 20)" ;;
		*) path_bottleneck "$g" ;;
		esac || { echo "# bench: shallow $g: path setup failed" >&2; FAILS=$((FAILS + 1)); } ;;
	loss)
		shape_clear
		shape_bottleneck 20 $((2 * $(bdp_bytes 20 20))) "$g" &&
			shape_delay 20 "$(bdp_bytes 20 20)" ||
			{ echo "# bench: loss $g: path setup failed" >&2; FAILS=$((FAILS + 1)); } ;;
	fidelity)
		# The paths in-tree bbr's known behaviours show on; the policer
		# last, as it turns the sender's GSO off (packets, not 64 KB
		# aggregates, meet the policer).
		shape_clear
		case $g in
		64k) shape_bottleneck 200 65536 && shape_delay 20 "$(bdp_bytes 200 20)" ;;
		police) group_policer 64k ;;
		*) path_bottleneck "$g" ;;
		esac || { echo "# bench: fidelity $g: path setup failed" >&2; FAILS=$((FAILS + 1)); } ;;
	autocork)
		IPERF_ARGS=(-l 500)
		[[ $g == nodelay ]] && IPERF_ARGS+=(-N) ;;
	rcvbuf) shape_delay "$g" "$(bdp_bytes 1000 "$g")" ;;
	esac
}

# counters_json BEFORE AFTER PREFIX NAME...: {"PREFIX.NAME": delta, ...}
counters_json()
{
	local b=$1 a=$2 p=$3 n; shift 3

	for n in "$@"; do
		echo "$p${n#Bbrx:} $(counters_delta "$b" "$a" "$n")"
	done | jq -R -s 'split("\n") | map(select(length > 0) | split(" ")
		| {(.[0]): (.[1] | tonumber? // null)}) | add // {}'
}

# cwnd_series SSFILE: [[seconds since the first sample, cwnd], ...]
cwnd_series()
{
	ss_parse "$1" | awk '{
		t = ""; c = ""
		for (i = 1; i <= NF; i++) {
			split($i, p, "=")
			if (p[1] == "t") t = p[2]
			else if (p[1] == "cwnd") c = p[2]
		}
		if (t == "" || c == "") next
		if (!n++) t0 = t
		printf "%.2f %s\n", t - t0, c
	}' | jq -R -s -c 'split("\n") | map(select(length > 0) | split(" ") | map(tonumber))'
}

# bbrx3's states, as b3_states names them: a mode, or PROBE_BW's phase.
B3_STATES="STARTUP DRAIN DOWN CRUISE REFILL UP PROBE_RTT"
B3_TRACE=0		# 1: tracefs has bbrx's events (b3_trace_init)
B3_NS_INO=

# b3_trace_init: a ring buffer for a 30 s flow's round and state events.
b3_trace_init()
{
	tracefs_find trace && [[ -d $TRACEFS/events/bbrx/bbrx3_state ]] ||
		{ echo "# bench: no bbrx3_state event in tracefs: no per-state columns" >&2; return 0; }
	EV_DIR=$TRACEFS/events/bbrx
	echo 8192 >"$TRACEFS/buffer_size_kb"
	B3_TRACE=1
}

# b3_states: charge a bbrx3 flow's time, losses and bound cuts to the
# state each happened in, from its bbrx3_state and bbrx3_round events
# (stdin: trace lines of that flow).  Time and losses run from one state
# event to the next: each event gives the state left (prev_*) and the
# connection's lost total; the last state lasts to the last event, its
# losses to the total the rounds add up to.  A cut is an event whose
# inflight_hi (or inflight_lo) is set where the one before had none, or
# lower; it is charged to the state the flow was in.  A state is
# "NAME_rec" while the connection is in Recovery or Loss (RTO).
# Prints "st.STATE.pct|lost|hi|lo VALUE" lines for every state, and
# "undersent_pct VALUE": the share of PROBE_BW's time in rounds that lost
# nothing yet delivered under 60% of what cwnd and the pacing rate allowed
# over the round (MSS 1448): the sender did not send what the model let
# it, so the guest (its CPU, late TX completions) or the receive window
# held the flow, not bbrx3.
b3_states()
{
	awk -v states="$B3_STATES" '
	function name(m, p, c) {
		return (m == "PROBE_BW" ? p : m) (c ~ /^(Recovery|Loss)$/ ? "_rec" : "")
	}
	function cut(now, before) { return now > 0 && (before == 0 || now < before) }
	{
		ev = ""
		for (i = 2; i <= NF; i++)
			if ($i ~ /^bbrx3_(round|state):$/) { ev = $i; ts = $(i - 1); break }
		if (ev == "") next
		sub(/:$/, "", ts)
		delete v
		for (j = i + 1; j <= NF; j++) { split($j, kv, "="); v[kv[1]] = kv[2] }
		if (!started) { t0 = tl = ts; cur = "STARTUP"; started = 1 }
		if (ev == "bbrx3_state:") {
			left = name(v["prev_mode"], v["prev_phase"], v["prev_ca_state"])
			t[left] += ts - tl; l[left] += v["lost"] - lost; tl = ts; lost = v["lost"]
			at = left
			cur = name(v["mode"], v["phase"], v["ca_state"])
		} else {
			rlost += v["lost"]
			at = cur
			if (rt != "" && v["mode"] == "PROBE_BW") {
				d = ts - rt
				allow = v["pacing_rate"] * d / 1448
				if (v["cwnd"] < allow) allow = v["cwnd"]
				pbw += d
				if (v["lost"] == 0 && v["delivered"] < 0.6 * allow) under += d
			}
			rt = ts
		}
		if (cut(v["inflight_hi"], hi)) h[at]++
		if (cut(v["inflight_lo"], lo)) o[at]++
		hi = v["inflight_hi"]; lo = v["inflight_lo"]; te = ts
	}
	END {
		if (!started) exit
		t[cur] += te - tl
		if (rlost > lost) l[cur] += rlost - lost
		tot = te - t0
		n = split(states, s, " ")
		for (k = 1; k <= n; k++)
			for (r = 0; r < 2; r++) {
				x = s[k] (r ? "_rec" : "")
				printf "st.%s.pct %.2f\nst.%s.lost %d\nst.%s.hi %d\nst.%s.lo %d\n",
					x, (tot > 0 ? 100 * t[x] / tot : 0), x, l[x], x, h[x], x, o[x]
			}
		printf "undersent_pct %.1f\n", (pbw > 0 ? 100 * under / pbw : 0)
	}'
}

# b3_trace_done ID: stop the trace of bbrx3 flow ID (its data connection,
# FLOW_CPORT), keep its events in $OUT/traces/ID.ev, print its per-state
# figures as a JSON object (b3_states), merged into the run's metrics.
b3_trace_done()
{
	local id=$1 of

	of=$(trace_stop "$TMPD/$id.trace")
	((of == 0)) || echo "# bench: $id: the ring buffer lost $of events" >&2
	mkdir -p "$OUT/traces"
	awk -v ns=" netns=$B3_NS_INO " -v sp=" sport=$FLOW_CPORT " \
		'/ bbrx3_(round|state): / && index($0, ns) && index($0, sp)' \
		"$TMPD/$id.trace" >"$OUT/traces/$id.ev"
	rm -f "$TMPD/$id.trace"
	b3_states <"$OUT/traces/$id.ev" | jq -R -s 'split("\n") | map(select(length > 0) | split(" ")
		| {(.[0]): (.[1] | tonumber)}) | add // {}'
}

# run_one GROUP ARM REP: one flow of the arm; appends its JSON line.
run_one()
{
	local g=$1 arm=$2 rep=$3 cc=${2%%:*} id knob val kv ok=true extra='{}' series='{}'
	local -a kvs=()
	# flow_run reads these (bash locals are visible to callees).
	local FLOW_PING=0 FLOW_SS=

	id=$SCEN-$g-${arm//[:=,]/_}-$rep
	for knob in $(arm_knobs); do
		bbrx_sysctl_set "$PNS" "$knob" "${KNOB_DEFAULT[$knob]}"
	done
	[[ $arm == *:*=* ]] && IFS=, read -ra kvs <<<"${arm#*:}"
	for kv in "${kvs[@]}"; do
		knob=${kv%%=*} val=${kv#*=}
		bbrx_sysctl_set "$PNS" "$knob" "$val" ||
			{ echo "# bench: sysctl $knob=$val failed" >&2; ok=false; }
	done
	case $SCEN in
	bottleneck|fidelity|ecn) FLOW_PING=1 ;;
	shallow|policer|loss) ((SECS >= 4)) && FLOW_PING=1 ;;
	gso2) FLOW_SS=0.2 ;;
	esac
	[[ $cc == bbrx3 ]] && ((B3_TRACE)) && trace_start bbrx3_round bbrx3_state
	counters_snap "$SND" "$TMPD/s0" "${CTRS_SND[@]}"
	counters_snap "$RCV" "$TMPD/r0" "${CTRS_RCV[@]}"
	flow_run "$id" "$cc" "$SECS" "${IPERF_ARGS[@]}" || { ok=false; FAILS=$((FAILS + 1)); }
	counters_snap "$SND" "$TMPD/s1" "${CTRS_SND[@]}"
	counters_snap "$RCV" "$TMPD/r1" "${CTRS_RCV[@]}"
	[[ $cc == bbrx3 ]] && ((B3_TRACE)) && extra=$(b3_trace_done "$id")

	case $SCEN in
	bottleneck|fidelity|shallow|policer|loss|ecn)
		((FLOW_PING)) && extra=$(jq -n --argjson e "$extra" --arg r "$(ping_median "$TMPD/$id.ping")" \
			'$e + {ping_rtt_ms: ($r | tonumber? // null)}') ;;
	esac
	case $SCEN in
	ecn)
		# bbrx3's responses to CE: inflight_hi set, inflight_lo cut.
		extra=$(jq -n --argjson e "$extra" --arg h "$(counters_delta "$TMPD/s0" "$TMPD/s1" Bbrx:Bbrx3InflightHiEcn)" \
			--arg l "$(counters_delta "$TMPD/s0" "$TMPD/s1" Bbrx:Bbrx3InflightLoEcn)" \
			'$e + {ecn_bounds: (($h | tonumber? // null) as $x | ($l | tonumber? // null) as $y
				| if $x == null or $y == null then null else $x + $y end)}') ;;
	gso2)
		# cwnd: median after STARTUP (the first 1-2 s of the flow).
		# shellcheck disable=SC2119  # median reads stdin
		extra=$(jq -n --arg c "$(ss_samples "$TMPD/$id.ss" $((SECS >= 6 ? 2 : 1)) | ss_field cwnd | median)" \
			'{cwnd: ($c | tonumber? // null)}')
		series=$(jq -n --argjson c "$(cwnd_series "$TMPD/$id.ss")" '{cwnd: $c}') ;;
	esac
	jq -c -n --arg scen "$SCEN" --arg group "$g" --arg arm "$arm" --arg cc "$cc" \
		--argjson rep "$rep" --argjson ok "$ok" \
		--argjson snd "$(counters_json "$TMPD/s0" "$TMPD/s1" snd. "${CTRS_SND[@]}")" \
		--argjson rcv "$(counters_json "$TMPD/r0" "$TMPD/r1" rcv. "${CTRS_RCV[@]}")" \
		--argjson extra "$extra" --argjson series "$series" \
		--slurpfile ip <(cat "$TMPD/$id.json" 2>/dev/null || echo '{}') '
		($ip[0] // {}) as $i
		| ($snd + $rcv) as $c
		| {scenario: $scen, group: $group, arm: $arm, cc: $cc, rep: $rep, ok: $ok,
		   sender_cc: ($i.end.sender_tcp_congestion // null),
		   metrics: ({
			goodput_mbit: (($i.end.sum_received.bits_per_second // 0) / 1e6),
			retrans: ($i.end.sum_sent.retransmits // null),
			cpu_snd_pct: ($i.end.cpu_utilization_percent.host_total // null),
			bytes_per_seg: (if ($c["snd.TcpOutSegs"] // 0) > 0
				then ($i.end.sum_sent.bytes // 0) / $c["snd.TcpOutSegs"] else null end),
			acks_per_seg: (if ($c["snd.TcpOutSegs"] // 0) > 0
				then $c["rcv.TcpOutSegs"] / $c["snd.TcpOutSegs"] else null end),
			retrans_pct: (if ($c["snd.TcpOutSegs"] // 0) > 0 and ($c["snd.TcpRetransSegs"] | type) == "number"
				then 100 * $c["snd.TcpRetransSegs"] / $c["snd.TcpOutSegs"] else null end)
		   } + $extra + $c),
		   series: ({tput_mbit: [($i.intervals // [])[].sum.bits_per_second / 1e6]} + $series)}' \
		>>"$RUNS"
}

# run_pair GROUP ARM REP: two flows at once through the bottleneck ("fair"),
# CC1+CC2; shares of the summed goodput and Jain's index.  Odd repetitions
# start flow A first, to the first iperf3 server, even ones flow B, so that
# neither the head start nor the server favours one cc in the medians.
run_pair()
{
	local g=$1 arm=$2 rep=$3 a=${2%%+*} b=${2#*+} id=$SCEN-$1-$2-$3 pa pb ok=true
	local first=a pta=$IPERF_PORT ptb=$PORT2

	((rep % 2)) || { first=b pta=$PORT2 ptb=$IPERF_PORT; }
	if [[ $first == a ]]; then
		CPORT=$((CPORT + 2))
		IPERF_PORT=$pta flow_run "$id-a" "$a" "$SECS" &
		pa=$!
	fi
	CPORT=$((CPORT + 4))
	IPERF_PORT=$ptb flow_run "$id-b" "$b" "$SECS" &
	pb=$!
	if [[ $first == b ]]; then
		CPORT=$((CPORT + 2))
		IPERF_PORT=$pta flow_run "$id-a" "$a" "$SECS" &
		pa=$!
	fi
	wait "$pa" || ok=false
	wait "$pb" || ok=false
	[[ $ok == true ]] || FAILS=$((FAILS + 1))
	jq -c -n --arg scen "$SCEN" --arg group "$g" --arg arm "$arm" --arg a "$a" --arg b "$b" \
		--argjson rep "$rep" --argjson ok "$ok" --arg first "$first" \
		--slurpfile fa <(cat "$TMPD/$id-a.json" 2>/dev/null || echo '{}') \
		--slurpfile fb <(cat "$TMPD/$id-b.json" 2>/dev/null || echo '{}') '
		def gp: (.end.sum_received.bits_per_second // 0) / 1e6;
		def ser: [(.intervals // [])[].sum.bits_per_second / 1e6];
		($fa[0] | gp) as $x | ($fb[0] | gp) as $y | ($x + $y) as $s
		| {scenario: $scen, group: $group, arm: $arm, cc: $a, cc_b: $b, rep: $rep, ok: $ok,
		   first: $first,
		   metrics: {goodput_a_mbit: $x, goodput_b_mbit: $y, goodput_mbit: $s,
			share_a: (if $s > 0 then $x / $s else null end),
			share_b: (if $s > 0 then $y / $s else null end),
			jain: (if $s > 0 then $s * $s / (2 * ($x * $x + $y * $y)) else null end),
			retrans: (($fa[0].end.sum_sent.retransmits // 0) + ($fb[0].end.sum_sent.retransmits // 0))},
		   series: {tput_a_mbit: ($fa[0] | ser), tput_b_mbit: ($fb[0] | ser)}}' >>"$RUNS"
}

write_meta()
{
	local bad

	bad=$(dmesg_since_start | grep -c -E 'Oops|WARNING:|BUG:|soft lockup|Call Trace:')
	jq -n --arg scen "$SCEN" --arg title "$(bench_title "$SCEN")" \
		--arg kernel "$(uname -r)" --arg date "$(date -u +%FT%TZ)" \
		--argjson quick "$BENCH_QUICK" --argjson reps "$(bench_reps "$SCEN")" \
		--argjson secs "$SECS" --arg groups "$(bench_groups "$SCEN")" \
		--arg arms "$(bench_arms "$SCEN")" --arg netifs "${NETIFS_USED:-veth}" \
		--arg hooks "$(cat /proc/net/bbrx_hooks 2>/dev/null)" \
		--arg setup "$(printf '%s\n' "${SETUP[@]}")" --argjson fails "$FAILS" \
		--argjson dmesg_bad "${bad:-0}" '
		{scenario: $scen, title: $title, kernel: $kernel, date: $date,
		 quick: $quick, reps: $reps, secs: $secs,
		 groups: ($groups | split(" ")), arms: ($arms | split(" ")),
		 sender_hop: $netifs, hooks: ($hooks | split("\n") | map(select(length > 0))),
		 setup: ($setup | split("\n") | map(select(length > 0))),
		 failed_runs: $fails, dmesg_warnings: $dmesg_bad}' >"$OUT/meta.json"
}

require_command iperf3 jq tc ss ip ping
load_module "$@"
b3_trace_init
if ((BENCH_BASE_ARMS)) && ! grep -qw bbrx3base /proc/sys/net/ipv4/tcp_available_congestion_control; then
	insmod ./tcp_bbrx3base.ko || { echo "# bench: insmod tcp_bbrx3base.ko failed" >&2; FAILS_ALL=$((FAILS_ALL + 1)); }
fi
for s in "$@"; do
	scenario_init "$s"
	if ! setup; then
		FAILS=$((FAILS + 1))
		scenario_done
		STEP=$((STEP + $(bench_steps "$s")))
		continue
	fi
	knob_defaults
	B3_NS_INO=$(netns_ino "$SND")
	REPS_S=$(bench_reps "$SCEN")
	for g in $(bench_groups "$SCEN"); do
		group "$g"
		for ((rep = 1; rep <= REPS_S; rep++)); do
			# Arms alternate within a repetition, so slow phases of
			# the host hit every arm alike.
			for arm in $(bench_arms "$SCEN"); do
				label=$arm
				[[ $g != - ]] && label="$g $arm"
				progress "${label//:/ }, run $rep/$REPS_S ..."
				if [[ $SCEN == fair ]]; then
					run_pair "$g" "$arm" "$rep"
				else
					run_one "$g" "$arm" "$rep"
				fi
				STEP=$((STEP + 1))
			done
		done
	done
	write_meta
	echo "# bench: $SCEN done, $(wc -l <"$RUNS") runs, $FAILS failed" >&2
	scenario_done
done
((FAILS_ALL == 0))
