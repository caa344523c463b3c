#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The seed scenario ("tcp_bbr: better deal with suboptimal GSO", upstream
# 350c9f484bde): the sender's NIC has gso_max_segs 2.  If the burst goal
# (tso_segs_goal) is capped by gso_max_segs (gso_cap=1, pre-fix), the cwnd
# allowance tso_margin x goal collapses to 3 x 2 segments; with gso_cap=0
# (the fix, default) the goal follows the pacing rate (pacing_rate >>
# pacing_shift bytes).
#
# The goal rises above gso_max_segs only once pacing_rate >> pacing_shift
# exceeds 2 full segments: at the default shift 10 (about 1 ms of data)
# that takes 24 Mbit/s, which a guest whose host is busy does not always
# reach unshaped.  The arms run with pacing_shift BBRX_GSO_PACING_SHIFT (6,
# about 16 ms of data, bounded by 64 KB: above 2 segments from 2.2 Mbit/s
# on); BBRX_GSO_PACING_SHIFT=10 measures the seed's own setting.
#
# No bottleneck, ACK-aggregation allowance off (extra_acked_gain=0) so that
# in PROBE_BW
#	cwnd = even_up(ceil(cwnd_gain x bw x min_rtt) + tso_margin x goal)
#	       (+ 2 in the 1.25 phase)
#	goal = min(127, max(2, min(pacing_rate >> pacing_shift, 65279) / mss))
#	       (min(goal, gso_max_segs) with gso_cap=1)
# Every term can be read from one `ss -ti` sample (bw, mrtt, cwnd_gain,
# pacing_gain, pacing_rate, mss, cwnd), so the test checks the cwnd of each
# sample against that formula, and the gso_cap 0 / 1 difference of the
# medians against tso_margin x the goal difference.
#
# The 127-segment cap of the goal (in-tree BBR's) binds only at a small
# MSS: one more flow with MSS 388 (iperf3 -M 400) and pacing_shift 4 (about
# 1/16 s of data, so the 64 KB bound decides: 168 segments uncapped) must
# follow the formula with the goal at 127, and be 3 x 41 segments below the
# uncapped formula.  That cap binds only at a pacing rate above 127 x 16
# segments a second (6.3 Mbit/s at MSS 388) whatever the MSS: a floor in
# the definition of the cap, about a tenth of the slowest unshaped flow
# seen under TCG on an idle host, but reached by a guest sharing two cores
# with two other VMs (2026-12-02: 4.9-8 Mbit/s). Below it the formula is
# still checked and the cap logged as not reached; BBRX_GSO_CAP_STRICT=1
# (check-full) makes the cap itself a pass/fail condition.
#
# BBRX_GSO_REPS runs of each gso_cap arm (2; long form 3), BBRX_GSO_SECS
# (6 s) each.  BBRX_GSO_REPORT=1 (check-full) adds the report-only arms:
# the ACK-aggregation allowance on, in-tree bbr and cubic.  The three
# comparisons are retried once with REPS more runs of each arm, medians
# over all runs.

ALL_TESTS="
	gso_setup
	gso_cwnd_ratio
	gso_cwnd_formula
	gso_cwnd_difference
	$([[ ${BBRX_GSO_REPORT:-0} == 1 ]] && echo gso_allowance_report)
	gso_goal_cap_small_mss
"
RETRY_TESTS="gso_cwnd_ratio gso_cwnd_formula gso_cwnd_difference"
source "$(dirname "$0")/lib.sh"

SECS=${BBRX_GSO_SECS:-6}
REPS=${BBRX_GSO_REPS:-${BBRX_REPS:-2}}
SHIFT=${BBRX_GSO_PACING_SHIFT:-6}
REPORT=${BBRX_GSO_REPORT:-0}
SKIP=2			# seconds of each flow left out (STARTUP, DRAIN)
GSO_SEGS=2
# Tolerance of the cwnd formula, in segments: bdp computed from ss's bw
# (bit/s, truncated from the kernel's fixed point) and mrtt (us) can be off
# by one segment; rounding up to even adds one; a sample taken just after a
# phase change or while cwnd still grows toward the target (cwnd += acked)
# can lag by the +2 of the probe-up phase.  Medians absorb the rest.
TOL=3
declare -A CWND GP GOAL BDP RES N

# arm_samples ID...: PROBE_BW samples (gain 1.25, 0.75 or 1) of the runs,
# with the expected cwnd appended: goal=, bdp=, exp=, res= (cwnd - exp).
arm_samples()
{
	local id margin shift cap

	margin=$(bbrx_sysctl_get "$SND" tso_margin)
	shift=$(bbrx_sysctl_get "$SND" pacing_shift)
	for id in "$@"; do
		cap=$(cat "$TMPD/$id.cap" 2>/dev/null || echo 0)
		ss_samples "$TMPD/$id.ss" "$SKIP" | awk -v margin="$margin" \
			-v shift="$shift" -v cap="$cap" -v gsosegs="$GSO_SEGS" '
		{
			delete v
			for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
			if (!("pacing_gain" in v) || !("pacing_rate" in v) || !("bw" in v)) next
			g = v["pacing_gain"] + 0
			if (g != 1 && g != 1.25 && g != 0.75) next
			mss = v["mss"]
			bytes = int(v["pacing_rate"] / 8 / 2 ^ shift)
			if (bytes > 65536 - 1 - 256) bytes = 65536 - 1 - 256
			goal = int(bytes / mss)
			if (goal < 2) goal = 2
			if (cap && goal > gsosegs) goal = gsosegs
			raw = goal
			if (goal > 127) goal = 127
			bdpf = v["bw"] / 8 / mss * v["mrtt"] / 1000 * v["cwnd_gain"]
			bdp = int(bdpf)
			if (bdpf - bdp > 1e-6) bdp++
			want = bdp + margin * goal
			if (want % 2) want++
			if (g == 1.25) want += 2
			print $0, "goal=" goal, "raw=" raw, "bdp=" bdp, "exp=" want,
				"res=" v["cwnd"] - want, "resu=" v["cwnd"] - want - margin * (raw - goal)
		}'
	done
}

run_arm()
{
	local id=$1 cc=$2 cap=$3; shift 3

	FLOW_SS=0.1 flow_run "$id" "$cc" "$SECS" "$@" || FLOW_FAILS+=" $id"
	echo "$cap" >"$TMPD/$id.cap"
}

NREP=0

# measure [main]: REPS more runs of each gso_cap arm (accumulated over
# retries), then, the first time, with BBRX_GSO_REPORT=1 and unless "main",
# the allowance arms and in-tree bbr and cubic; then the table.
measure()
{
	local rep cap ids last

	set_gso_max_segs "$GSO_SEGS"
	GSO_NOW=$(get_gso_max_segs)
	bbrx_sysctl_set "$SND" extra_acked_gain 0
	EAG_SET=$?
	bbrx_sysctl_set "$SND" pacing_shift "$SHIFT"
	SHIFT_SET=$?
	last=$((NREP + REPS))
	for ((rep = NREP + 1; rep <= last; rep++)); do
		for cap in 0 1; do
			bbrx_sysctl_set "$SND" gso_cap "$cap"
			run_arm "cap$cap-$rep" bbrx "$cap"
		done
	done
	NREP=$last
	if [[ $1 != main && $REPORT == 1 ]]; then
		# ACK-aggregation allowance on (default gain): report only.
		bbrx_sysctl_set "$SND" extra_acked_gain 1000
		for cap in 0 1; do
			bbrx_sysctl_set "$SND" gso_cap "$cap"
			run_arm "agg$cap" bbrx "$cap"
			# A single report-only run: one more if its flow failed
			# (seen once on 6.12, 2026-12-01: no data, no samples).
			if ! fcmp "$(iperf3_goodput "$TMPD/agg$cap.json")" '>' 0; then
				log_info "agg$cap: flow failed ($(jq -r '.error // "no error text"' "$TMPD/agg$cap.json" 2>/dev/null)); once more"
				run_arm "agg$cap" bbrx "$cap"
			fi
		done
		bbrx_sysctl_set "$SND" extra_acked_gain 0
		bbrx_sysctl_set "$SND" gso_cap 0
		run_arm bbr bbr 0
		run_arm cubic cubic 0
	fi

	for cap in 0 1; do
		ids=()
		for ((rep = 1; rep <= NREP; rep++)); do
			ids+=("cap$cap-$rep")
		done
		arm_samples "${ids[@]}" >"$TMPD/arm$cap.s"
		N[$cap]=$(wc -l <"$TMPD/arm$cap.s")
		CWND[$cap]=$(ss_field cwnd <"$TMPD/arm$cap.s" | median)
		GOAL[$cap]=$(ss_field goal <"$TMPD/arm$cap.s" | median)
		BDP[$cap]=$(ss_field bdp <"$TMPD/arm$cap.s" | median)
		RES[$cap]=$(ss_field res <"$TMPD/arm$cap.s" | median)
		GP[$cap]=$(for id in "${ids[@]}"; do iperf3_goodput "$TMPD/$id.json"; done | median)
		[[ $REPORT == 1 ]] || continue
		arm_samples "agg$cap" >"$TMPD/agg$cap.s"
		CWND[agg$cap]=$(ss_field cwnd <"$TMPD/agg$cap.s" | median)
		GP[agg$cap]=$(iperf3_goodput "$TMPD/agg$cap.json")
	done
	for cc in bbr cubic; do
		[[ $REPORT == 1 ]] || break
		CWND[$cc]=$(ss_samples "$TMPD/$cc.ss" "$SKIP" | ss_field cwnd | median)
		GP[$cc]=$(iperf3_goodput "$TMPD/$cc.json")
	done

	echo "# gso_max_segs $GSO_NOW on $SND_IF, no bottleneck, pacing_shift $SHIFT, ${SECS}s flows," \
		"PROBE_BW ss samples after ${SKIP}s"
	printf '# %-28s %8s %8s %8s %8s %8s %7s %s\n' arm goodput cwnd goal bdp "cwnd-exp" samples runs
	for cap in 0 1; do
		printf '# %-28s %8s %8s %8s %8s %8s %7s %s\n' \
			"bbrx gso_cap=$cap extra_acked=0" "${GP[$cap]}" "${CWND[$cap]}" \
			"${GOAL[$cap]}" "${BDP[$cap]}" "${RES[$cap]}" "${N[$cap]}" \
			"$(for ((rep = 1; rep <= NREP; rep++)); do printf '%s ' "$(iperf3_goodput "$TMPD/cap$cap-$rep.json")"; done)"
	done
	if [[ $REPORT == 1 ]]; then
		for cap in 0 1; do
			printf '# %-28s %8s %8s\n' "bbrx gso_cap=$cap extra_acked=1000" \
				"${GP[agg$cap]}" "${CWND[agg$cap]}"
		done
		for cc in bbr cubic; do
			printf '# %-28s %8s %8s\n' "$cc (in-tree)" "${GP[$cc]}" "${CWND[$cc]}"
		done
	fi
	echo "# (goodput Mbit/s = median iperf3 sum_received; cwnd, goal, bdp in segments, medians)"
}

measure_retry()
{
	if ((TEST_ATTEMPT > 0)); then
		measure main
	fi
}

gso_setup()
{
	[[ $GSO_NOW == "$GSO_SEGS" ]]
	check_err $? "gso_max_segs of $SND_IF is '$GSO_NOW', wanted $GSO_SEGS"
	check_err "${EAG_SET:-1}" "could not set extra_acked_gain=0"
	check_err "${SHIFT_SET:-1}" "could not set pacing_shift=$SHIFT"
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	# How many samples the sampler took depends on the guest: any will do.
	((N[0] >= 1 && N[1] >= 1))
	check_err $? "no PROBE_BW samples: ${N[0]} (gso_cap 0), ${N[1]} (gso_cap 1)"
	log_test "gso_max_segs $GSO_SEGS sender, flows and ss samples for both arms"
}

gso_cwnd_ratio()
{
	local ratio

	measure_retry

	ratio=$(calc "${CWND[0]} / ${CWND[1]}")
	fcmp "${CWND[0]}" '>=' "$(calc "1.3 * ${CWND[1]}")"
	check_err $? "median cwnd ${CWND[0]} (gso_cap 0) < 1.3 x ${CWND[1]} (gso_cap 1)"
	log_test "cwnd >= 1.3x higher with gso_cap=0 than gso_cap=1" \
		"${CWND[0]} vs ${CWND[1]}, ratio $ratio"
}

# Each arm's cwnd follows the formula (median residual within TOL), and the
# goal really is capped at gso_max_segs only with gso_cap=1.
gso_cwnd_formula()
{
	local cap

	measure_retry

	for cap in 0 1; do
		in_range "${RES[$cap]}" "-$TOL" "$TOL"
		check_err $? "gso_cap=$cap: median cwnd - expected = ${RES[$cap]} (tolerance $TOL)"
		if [[ ${BBRX_VERBOSE:-0} -eq 1 || $RET -ne 0 ]]; then
			head -n 5 "$TMPD/arm$cap.s" | sed "s/^/# gso_cap=$cap sample: /"
		fi
	done
	fcmp "${GOAL[1]}" '<=' "$GSO_SEGS"
	check_err $? "gso_cap=1 goal ${GOAL[1]} > gso_max_segs $GSO_SEGS"
	fcmp "${GOAL[0]}" '>' "$GSO_SEGS"
	check_err $? "gso_cap=0 goal ${GOAL[0]} not above gso_max_segs (pacing rate below 2 segments per 2^-$SHIFT s)"
	log_test "PROBE_BW cwnd = even(cwnd_gain x BDP + tso_margin x goal) [+2]" \
		"median residual ${RES[0]} / ${RES[1]}"
}

# The difference of the medians is tso_margin x the goal difference, once
# the (small, but not equal) BDP terms are taken out.
gso_cwnd_difference()
{
	local margin dc dg db want

	measure_retry

	margin=$(bbrx_sysctl_get "$SND" tso_margin)
	dc=$(calc "${CWND[0]} - ${CWND[1]}")
	dg=$(calc "${GOAL[0]} - ${GOAL[1]}")
	db=$(calc "${BDP[0]} - ${BDP[1]}")
	want=$(calc "$margin * $dg + $db")
	log_info "cwnd difference $dc = tso_margin $margin x goal difference $dg" \
		"+ bdp difference $db ? (expected $want)"
	in_range "$dc" "$(calc "$want - 2 * $TOL")" "$(calc "$want + 2 * $TOL")"
	check_err $? "cwnd difference $dc, expected $want +- $((2 * TOL))"
	log_test "cwnd difference = tso_margin x goal difference (+ bdp difference)" \
		"$dc vs $want"
}

gso_allowance_report()
{
	local ratio

	ratio=$(calc "${CWND[agg0]} / ${CWND[agg1]}")
	log_info "with extra_acked_gain=1000: cwnd ${CWND[agg0]} (gso_cap 0) vs" \
		"${CWND[agg1]} (gso_cap 1), ratio $ratio; goodput ${GP[agg0]} vs ${GP[agg1]} Mbit/s"
	log_info "goodput gso_cap 0 / 1: ${GP[0]} / ${GP[1]} Mbit/s; bbr ${GP[bbr]}, cubic ${GP[cubic]}"
	[[ ${CWND[agg0]} != nan && ${CWND[agg1]} != nan ]]
	check_err $? "no PROBE_BW samples with the allowance on"
	log_test "ACK-aggregation allowance on: ratio reported" "cwnd ratio $ratio"
}

gso_goal_cap_small_mss()
{
	local raw res resu n margin

	margin=$(bbrx_sysctl_get "$SND" tso_margin)
	bbrx_sysctl_set "$SND" extra_acked_gain 0 &&
		bbrx_sysctl_set "$SND" gso_cap 0 &&
		bbrx_sysctl_set "$SND" pacing_shift 4
	check_err $? "setting extra_acked_gain 0, gso_cap 0, pacing_shift 4 failed"
	run_arm small bbrx 0 -M 400 || true
	arm_samples small >"$TMPD/small.s"
	bbrx_sysctl_set "$SND" pacing_shift "$SHIFT"
	n=$(wc -l <"$TMPD/small.s")
	raw=$(ss_field raw <"$TMPD/small.s" | median)
	res=$(ss_field res <"$TMPD/small.s" | median)
	resu=$(ss_field resu <"$TMPD/small.s" | median)
	log_info "MSS $(ss_field mss <"$TMPD/small.s" | median), pacing_shift 4: $n PROBE_BW samples," \
		"uncapped goal $raw, cwnd $(ss_field cwnd <"$TMPD/small.s" | median)," \
		"cwnd - formula: $res with the goal at 127, $resu uncapped"
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	((n >= 1))
	check_err $? "no PROBE_BW samples"
	in_range "$res" "-$TOL" "$TOL"
	check_err $? "median cwnd - formula with the goal at 127 = $res (tolerance $TOL)"
	# Below 2032 packets/s the cap cannot bind: a guest too slow for that
	# rate says so here (make check); check-full asserts that it bound.
	if fcmp "$raw" '<=' 127 && [[ ${BBRX_GSO_CAP_STRICT:-0} != 1 ]]; then
		log_info "uncapped goal $raw <= 127: the guest paced below the rate where the cap binds;" \
			"the cap is asserted with BBRX_GSO_CAP_STRICT=1 (check-full)"
		log_test "burst goal formula at a small MSS (cap not reached at this guest's rate)" \
			"uncapped $raw, residual $res"
		return
	fi
	fcmp "$raw" '>' 127
	check_err $? "uncapped goal $raw not above 127: the cap does not bind"
	fcmp "$resu" '<' "$(calc "-$margin * 10")"
	check_err $? "cwnd not below the uncapped formula by tso_margin x 10 ($resu)"
	log_test "burst goal capped at 127 segments at a small MSS" \
		"uncapped $raw, residual $res (cap) vs $resu (uncapped)"
}

require_command iperf3 jq ss ip
require_bbrx
require_topo
iperf3_server_start || exit 1

measure
tests_run
bbrx_sysctl_set "$SND" extra_acked_gain 1000
bbrx_sysctl_set "$SND" gso_cap 0
bbrx_sysctl_set "$SND" pacing_shift 10
tests_done
exit $EXIT_STATUS
