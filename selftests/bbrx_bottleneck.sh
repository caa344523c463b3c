#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Bulk flow through the router's 100 Mbit/s tbf with a 1-BDP buffer, 20 ms
# RTT, bbr and bbrx alternating in one run: bbrx must match in-tree bbr
# (goodput of the best run of each within 5%) and not queue more (median
# ping RTT under load at most bbr's + 20%).  A busy host only takes
# goodput away, from either cc's runs at random (one run of 8 s at 22
# Mbit/s next to 89, 2026-12-02), so each cc's best run is the one the
# guest disturbed least; the medians are printed.  What the guest's CPU
# delivers varies from host to host, so the share of the goodput limit
# (95.6 Mbit/s) is printed, not asserted; the tbf rate bounds every run
# from above (the path is shaped).
# BBRX_BOTTLENECK_REPS runs of BBRX_BOTTLENECK_SECS per cc (2 of 8 s; the
# long form 3 of 10 s); cubic, for the table only, joins with
# BBRX_BOTTLENECK_CCS="bbr bbrx cubic" (check-full).
# The two comparisons are retried once with REPS more runs of each cc,
# over all runs then (the first set stays in).

ALL_TESTS="
	goodput_vs_bbr
	goodput_shaped
	rtt_vs_bbr
	bbrx_counters
"
RETRY_TESTS="goodput_vs_bbr rtt_vs_bbr"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX_BOTTLENECK_SECS:-8}
REPS=${BBRX_BOTTLENECK_REPS:-${BBRX_REPS:-2}}
CCS=${BBRX_BOTTLENECK_CCS:-"bbr bbrx"}
declare -A GP BEST RTT RETR

NREP=0		# runs so far (a retry adds REPS more of bbr and bbrx)

# measure [CCS]: REPS more alternating runs of each cc, then the medians
# over all runs so far, and the table.
measure()
{
	local ccs=${1:-$CCS} rep last cc id gps rtts retrs cw

	X0=${X0:-$(bbrx_stat StartupExit "$SND")}
	last=$((NREP + REPS))
	for ((rep = NREP + 1; rep <= last; rep++)); do
		for cc in $ccs; do
			id=$cc-$rep
			FLOW_PING=1 flow_run "$id" "$cc" "$SECS"
			[[ $? -ne 0 ]] && FLOW_FAILS+=" $id"
			log_info "run $rep $cc: goodput $(iperf3_goodput "$TMPD/$id.json") Mbit/s," \
				"retrans $(iperf3_retrans "$TMPD/$id.json")," \
				"ping median $(ping_median "$TMPD/$id.ping") ms ($(ping_count "$TMPD/$id.ping") replies)"
		done
	done
	NREP=$last
	X1=$(bbrx_stat StartupExit "$SND")
	NBBRX=$(ls "$TMPD"/bbrx-*.json 2>/dev/null | wc -l)

	printf '# %-6s %14s %8s %10s %12s %10s\n' cc "goodput Mbit/s" best retrans "ping RTT ms" "max cwnd"
	for cc in $CCS; do
		gps=() rtts=() retrs=() cw=()
		for ((rep = 1; rep <= NREP; rep++)); do
			[[ -f $TMPD/$cc-$rep.json ]] || continue
			gps+=("$(iperf3_goodput "$TMPD/$cc-$rep.json")")
			retrs+=("$(iperf3_retrans "$TMPD/$cc-$rep.json")")
			rtts+=("$(ping_median "$TMPD/$cc-$rep.ping")")
			cw+=("$(iperf3_max_cwnd "$TMPD/$cc-$rep.json")")
		done
		GP[$cc]=$(median "${gps[@]}")
		BEST[$cc]=$(printf '%s\n' "${gps[@]}" | sort -g | tail -n 1)
		RETR[$cc]=$(median "${retrs[@]}")
		RTT[$cc]=$(median "${rtts[@]}")
		printf '# %-6s %14s %8s %10s %12s %10s   (runs: %s)\n' "$cc" "${GP[$cc]}" "${BEST[$cc]}" \
			"${RETR[$cc]}" "${RTT[$cc]}" "$(median "${cw[@]}")" "${gps[*]}"
	done
	echo "# medians of alternating ${SECS}s runs; tbf ${PATH_RATE}mbit, 1-BDP" \
		"($PATH_BDP B) buffer, ${PATH_RTT} ms RTT; goodput limit $PATH_GOODPUT_MAX Mbit/s"
}

# On a retry, REPS more runs of bbr and bbrx; the medians then cover all.
measure_retry()
{
	if ((TEST_ATTEMPT > 0)); then
		measure "bbr bbrx"
	fi
}

goodput_vs_bbr()
{
	local lo

	measure_retry
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	lo=$(calc "0.95 * ${BEST[bbr]}")
	fcmp "${BEST[bbrx]}" '>=' "$lo"
	check_ratio $? "bbrx best goodput ${BEST[bbrx]} < 95% of bbr's ${BEST[bbr]} Mbit/s"
	fcmp "${BEST[bbrx]}" '<=' "$(calc "1.05 * ${BEST[bbr]}")"
	check_ratio $? "bbrx best goodput ${BEST[bbrx]} > 105% of bbr's ${BEST[bbr]} Mbit/s"
	log_test "bbrx goodput within 5% of in-tree bbr" \
		"best runs ${BEST[bbrx]} vs ${BEST[bbr]}, medians ${GP[bbrx]} vs ${GP[bbr]} Mbit/s"
}

# The tbf rate bounds goodput from above (5% for tbf's 2 ms burst and
# iperf3's interval accounting): the comparison above is one of two
# shaped flows.  The share of the limit depends on the guest's CPU: logged.
goodput_shaped()
{
	local hi cc

	hi=$(calc "1.05 * $PATH_GOODPUT_MAX")
	for cc in bbr bbrx; do
		fcmp "${BEST[$cc]}" '<=' "$hi"
		check_err $? "a $cc run's goodput ${BEST[$cc]} Mbit/s above the tbf limit $PATH_GOODPUT_MAX + 5%"
	done
	log_info "bbrx goodput (best run) ${BEST[bbrx]} Mbit/s = $(calc "100 * ${BEST[bbrx]} / $PATH_GOODPUT_MAX")%" \
		"of the goodput limit $PATH_GOODPUT_MAX (bbr $(calc "100 * ${BEST[bbr]} / $PATH_GOODPUT_MAX")%)"
	log_test "bbr and bbrx goodput bounded by the tbf rate" \
		"best runs ${BEST[bbrx]}, ${BEST[bbr]} <= $hi Mbit/s"
}

rtt_vs_bbr()
{
	local hi

	measure_retry
	[[ ${RTT[bbrx]} != nan && ${RTT[bbr]} != nan ]]
	check_err $? "no ping replies under load (bbrx ${RTT[bbrx]}, bbr ${RTT[bbr]})"
	hi=$(calc "1.2 * ${RTT[bbr]}")
	fcmp "${RTT[bbrx]}" '<=' "$hi"
	check_ratio $? "ping RTT under bbrx ${RTT[bbrx]} ms > bbr's ${RTT[bbr]} ms + 20%"
	log_test "ping RTT under load <= bbr's + 20%" "${RTT[bbrx]} vs ${RTT[bbr]} ms"
}

bbrx_counters()
{
	((X1 - X0 >= NBBRX))
	check_err $? "StartupExit went $X0 -> $X1 over $NBBRX bbrx flows"
	log_info "sender netns: $(bbrx_stat_all "$SND")"
	log_test "bbrx left STARTUP in every flow"
}

require_command iperf3 jq tc ss ping
require_bbrx
require_topo
require_qdisc tbf netem
iperf3_server_start || exit 1
path_bottleneck 1 || { echo "# shaping failed"; exit 1; }

measure
tests_run
tests_done
exit $EXIT_STATUS
