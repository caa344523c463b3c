#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx demo (run by `make demo` inside the VM, next to the selftests' lib.sh):
# cubic, in-tree bbr, bbrx and bbrx3 on three paths, one table.
#
#   bottleneck  router tbf 100 Mbit/s with a 1-BDP buffer, 20 ms RTT:
#               cubic, bbr, bbrx (bbrx is bbr's v1 model)
#   shallow     the same with a 0.25-BDP buffer: cubic, bbr, bbrx3 (what
#               bbrx3 is for: drops, not queues, meet the flow; bbr's v1
#               retransmits heavily there)
#   gso2        no bottleneck, sender NIC gso_max_segs 2 (TSO off where the
#               NIC allows), bbrx with gso_cap 0 (fixed) and 1 (pre-fix),
#               ACK-aggregation allowance off (extra_acked_gain 0), so that
#               cwnd is 2 BDP + tso_margin x the burst goal: the goal is
#               what the fix (upstream 350c9f484bde) changes
#
# One short flow per row (DEMO_SECS, default 6 s): a demo, not a benchmark.
# DEMO_REPS=N runs every mode of a path N times, the modes alternating
# within each repetition, and the table gives the medians. Figures come
# from an emulated CPU (QEMU TCG): compare rows, do not read them as what
# the hardware does; docs/models.md, "Where bbrx3 stands", has bbrx3's
# measured standing (make bench).

# shellcheck disable=SC2119  # median reads stdin
cd "$(dirname "$0")" || exit 1
# shellcheck source=../selftests/lib.sh
source ./lib.sh

SECS=${DEMO_SECS:-6}
REPS=${DEMO_REPS:-1}
SKIP=2		# seconds of each flow the cwnd and goal medians leave out
ROWS=()
declare -A GP CWND GOAL RTT RTX

require_bbrx
require_topo
iperf3_server_start || exit 1

# run PATH MODE REP: one flow of MODE ("cc" or "bbrx:gso_cap=N"), its
# goodput, cwnd and burst goal (medians of the ss samples after SKIP s),
# ping under load and retransmits.
run()
{
	local path=$1 mode=$2 rep=$3 cc=${2%%:*} id=$1-${2//[:=]/_}-$3 cap=0

	if [[ $mode == *gso_cap=* ]]; then
		cap=${mode#*gso_cap=}
		bbrx_sysctl_set "$SND" gso_cap "$cap"
	fi
	FLOW_SS=0.2 FLOW_PING=1 flow_run "$id" "$cc" "$SECS"
	GP[$path $mode $rep]=$(iperf3_goodput "$TMPD/$id.json")
	RTX[$path $mode $rep]=$(iperf3_retrans "$TMPD/$id.json")
	RTT[$path $mode $rep]=$(ping_median "$TMPD/$id.ping")
	CWND[$path $mode $rep]=$(ss_samples "$TMPD/$id.ss" "$SKIP" | ss_field cwnd | median)
	GOAL[$path $mode $rep]=-
	[[ $cc == bbrx ]] && GOAL[$path $mode $rep]=$(ss_samples "$TMPD/$id.ss" "$SKIP" |
		ss_burst_goal "$(bbrx_sysctl_get "$SND" pacing_shift)" \
			"$( ((cap)) && get_gso_max_segs)" | median)
	echo "# $path $mode, run $rep/$REPS: ${GP[$path $mode $rep]} Mbit/s, cwnd ${CWND[$path $mode $rep]}" >&2
	bbrx_sysctl_set "$SND" gso_cap 0
}

# path PATH MODE...: REPS alternating runs of the modes, then a table row
# of medians per mode.
path()
{
	local path=$1 rep m k runs; shift
	local -A med

	for ((rep = 1; rep <= REPS; rep++)); do
		for m in "$@"; do
			run "$path" "$m" "$rep"
		done
	done
	for m in "$@"; do
		for k in GP CWND GOAL RTT RTX; do
			local -n arr=$k
			med[$k]=$(for ((rep = 1; rep <= REPS; rep++)); do
				echo "${arr[$path $m $rep]}"; done | median)
			unset -n arr
		done
		[[ ${m%%:*} == bbrx ]] || med[GOAL]=-
		runs=
		((REPS == 1)) || runs=$(for ((rep = 1; rep <= REPS; rep++)); do
			printf '%s ' "${GP[$path $m $rep]}"; done)
		ROWS+=("$(printf '%-11s %-14s %9s %6s %6s %8s %8s%s' "$path" "${m//:/ }" \
			"${med[GP]}" "${med[CWND]}" "${med[GOAL]}" "${med[RTT]}" "${med[RTX]}" \
			"${runs:+   $runs}")")
	done
}

path_bottleneck 1
path bottleneck cubic bbr bbrx
path_bottleneck 0.25
path shallow cubic bbr bbrx3

shape_clear
set_gso_max_segs 2
bbrx_sysctl_set "$SND" extra_acked_gain 0
path gso2 cubic bbr bbrx:gso_cap=0 bbrx:gso_cap=1
bbrx_sysctl_set "$SND" extra_acked_gain 1000

echo
if ((REPS == 1)); then
	echo "kernel $(uname -r); one ${SECS}s flow per row: indicative only, not a benchmark"
else
	echo "kernel $(uname -r); ${SECS}s flows, medians of $REPS alternating runs per row"
fi
echo "(bbrx3's measured standing: docs/models.md, \"Where bbrx3 stands\");"
echo "cwnd, goal = medians of ss samples after ${SKIP}s (segments; goal: bbrx's burst goal,"
echo "tso_segs_goal, from pacing_rate and mss); rtt = median ping under load (ms);"
echo "bottleneck, shallow: tbf 100 Mbit/s with a 1 and a 0.25 BDP buffer, 20 ms RTT; gso2: no"
echo "bottleneck, gso_max_segs $(get_gso_max_segs), extra_acked_gain 0 (cwnd = 2 BDP + tso_margin" \
	"$(bbrx_sysctl_get "$SND" tso_margin) x goal)"
if ((REPS == 1)); then
	printf '%-11s %-14s %9s %6s %6s %8s %8s\n' path cc Mbit/s cwnd goal rtt_ms retrans
else
	printf '%-11s %-14s %9s %6s %6s %8s %8s   %s\n' path cc Mbit/s cwnd goal rtt_ms retrans "Mbit/s per run"
fi
printf '%s\n' "${ROWS[@]}"
# Why (one boot, medians of 3, docs/results/2026-12-04-demo.md): bbr took
# about 0.7 pacing-timer softirqs per skb and was cwnd-limited in none of
# its ss samples; paced by fq instead it got 127 against 84 Mbit/s, and with
# the NIC's default gso_max_segs (64 KB skbs) it matched cubic, 455 and 426.
echo "gso2: cubic is unpaced; bbr and bbrx pace each skb (2 segments) by a timer the emulated CPU caps"
echo
bbrx_stat_all "$SND" | sed 's/^/bbrx_stat: /'
