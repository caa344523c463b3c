#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench-matrix.sh - the scenario matrix of `make bench`, sourced by the host
# driver (scripts/bench/bench, to count the steps and order the boots) and by the
# guest (scripts/guest/bench-guest.sh, to run them), so both agree on what a step
# is.  Definitions only: no side effects (it sources the selftests' hook
# tables, selftests/lib_hooks.sh, definitions too).
#
# Usage: BENCH_QUICK=0|1|2 BENCH_REPS=N [BENCH_ARMS="ARM..."]
#        [BENCH_GROUPS="GROUP..."] [BENCH_BASE_ARMS=1] source bench-matrix.sh
#
# BENCH_QUICK selects the form: 0 the full matrix, 1 the short one (QUICK=1,
# every scenario with fewer paths and arms), 2 the smoke form of `make check`
# (QUICK=2: bench_scenarios' subset in one boot, one flow per arm, the fewest
# arms that still fill every table, goal, plot and metric bench-check looks
# at; it checks that the scripts work, its figures mean nothing).
#
# A scenario runs every group x every arm x BENCH_REPS repetitions; one
# step is one flow (one pair of flows in "fair").  An arm is a congestion
# control, "CC:SYSCTL=VALUE[,SYSCTL=VALUE...]" (net.ipv4.bbrx sysctls set for
# that arm in the scenario's policy netns, see bench_policy_ns; the other
# arms run with the netns defaults), or "CC+CC" (two flows at once).  Groups
# are the scenario's own parameter (buffer in BDPs, path, write mode, RTT in
# ms) or "-" for none.

# shellcheck disable=SC2034  # used by the scripts that source this file

BENCH_QUICK=${BENCH_QUICK:-0}
BENCH_REPS=${BENCH_REPS:-3}
BENCH_ARMS=${BENCH_ARMS:-}	# non-empty: only these arms
BENCH_GROUPS=${BENCH_GROUPS:-}	# non-empty: only these groups
BENCH_BASE_ARMS=${BENCH_BASE_ARMS:-0}	# 1: bbrx3base's arms too

# In the order they run; the hook-free scenarios first.
BENCH_SCENARIOS="bottleneck shallow policer loss ecn gso2 fair fidelity autocork tsq rcvbuf delack"
# The smoke form's: every plot's scenario (gso2, fair, tsq, rcvbuf, delack),
# a goal table (fair), ping under load (bottleneck), each hook but autocork
# (its setup, late_completion_setup, is hook_autocork.sh's).
BENCH_SMOKE_SCENARIOS="bottleneck gso2 fair tsq rcvbuf delack"

# bench_scenarios: the scenarios a run without a list runs.
bench_scenarios()
{
	if ((BENCH_QUICK == 2)); then
		echo "$BENCH_SMOKE_SCENARIOS"
	else
		echo "$BENCH_SCENARIOS"
	fi
}

# bench_boots: the VM boots, one line each, the scenarios of a boot
# separated by commas.  One scenario per boot in the full run, so that a
# guest hang (docs/testing.md, "Known problems of the VM") costs one scenario; QUICK saves
# boots: the hook-free scenarios together, autocork alone, the other hook
# scenarios together.  The smoke form boots once for whatever it runs (the
# hook-free scenarios then run with the others' hooks installed).
bench_boots()
{
	case $BENCH_QUICK in
	2) echo "${BENCH_SCENARIOS// /,}" ;;
	1) printf '%s\n' bottleneck,shallow,policer,loss,ecn,gso2,fair,fidelity autocork tsq,rcvbuf,delack ;;
	*) echo "$BENCH_SCENARIOS" | tr ' ' '\n' ;;
	esac
}

# bench_title SCEN: one line for progress and the report.
bench_title()
{
	case $1 in
	bottleneck) echo "router bottleneck 100 Mbit/s, 20 ms RTT" ;;
	shallow) echo "shallow buffers: 0.25 BDP at 100 Mbit/s 20 ms, 64 KB at 200 Mbit/s 20 ms" ;;
	policer) echo "20 Mbit/s token-bucket policer, 40 ms RTT, sender GSO off: 64 KB or 16 KB burst, 20 ms RTT, sender GSO on" ;;
	loss) echo "random loss per packet (0.5% and 2%) at 20 Mbit/s, 20 ms RTT, 2 BDP buffer" ;;
	ecn) echo "100 Mbit/s into one fq_codel queue marking CE above 1 ms, 2 ms RTT, ECN negotiated" ;;
	gso2) echo "sender gso_max_segs 2, TSO off, no bottleneck" ;;
	fair) echo "two flows sharing the router's 100 Mbit/s bottleneck, buffer 0.5, 1 or 2 BDP, 20 or 40 ms RTT" ;;
	fidelity) echo "bbrx against in-tree bbr, alternating: 100 Mbit/s 20 ms at 1 and 0.25 BDP, 64 KB at 200 Mbit/s 20 ms, 20 Mbit/s policer 40 ms" ;;
	autocork) echo "500-byte writes, TX completions 400 us late (late_completion_setup), no bottleneck" ;;
	tsq) echo "one flow, tbf 100 Mbit/s on the sender's NIC (late TX completions)" ;;
	rcvbuf) echo "RTT sweep, sender gso_max_segs 1, TSO off, no bottleneck" ;;
	delack) echo "one-MSS PSH writes, sender cwnd locked at 4, fq maxrate 20 Mbit/s" ;;
	esac
}

# bench_groups SCEN: the scenario's groups, those of BENCH_GROUPS only if
# set.
bench_groups()
{
	local g

	if [[ -n $BENCH_GROUPS ]]; then
		for g in $(bench_own_groups "$1"); do
			[[ " $BENCH_GROUPS " == *" $g "* ]] && printf '%s ' "$g"
		done
		echo
		return
	fi
	bench_own_groups "$1"
}

# bench_own_groups SCEN: the groups of the scenario in this form.  fair's
# and policer's "-NNms" run at that RTT; policer's name is its token
# bucket, "-gso" with the sender's GSO on (the router still forwards
# packets); bbrx3's goals (docs/models.md) name these paths.
bench_own_groups()
{
	if ((BENCH_QUICK)); then
		case $1 in
		bottleneck|fair) echo "1" ;;
		shallow) echo "0.25" ;;
		policer) echo "64k" ;;
		loss) echo "0.5" ;;
		# "1" is bottleneck's path, which runs bbr and bbrx in the
		# same boot.
		fidelity) echo "police" ;;
		autocork) echo "nodelay" ;;
		# Two RTTs: the plot's line and the table's pivot.
		rcvbuf) echo "0 50" ;;
		*) echo "-" ;;
		esac
		return
	fi
	case $1 in
	bottleneck) echo "1 0.25" ;;
	shallow) echo "0.25 64k" ;;
	policer) echo "64k 16k 64k-20ms 64k-gso" ;;
	loss) echo "0.5 2" ;;
	fair) echo "0.5 1 2 0.5-40ms 1-40ms 2-40ms" ;;
	fidelity) echo "1 0.25 64k police" ;;
	autocork) echo "nodelay nagle" ;;
	rcvbuf) echo "0 10 25 50 100 250" ;;
	*) echo "-" ;;
	esac
}

# bench_arms SCEN: the scenario's arms, those of BENCH_ARMS only if set.
bench_arms()
{
	local a

	if [[ -n $BENCH_ARMS ]]; then
		for a in $(BENCH_ARMS='' bench_arms "$1"); do
			[[ " $BENCH_ARMS " == *" $a "* ]] && printf '%s ' "$a"
		done
		echo
		return
	fi
	echo "$(bench_own_arms "$1")$(bench_base_arms "$1")"
}

# bench_base_arms SCEN: with BENCH_BASE_ARMS=1 (scripts/bench/bench's BENCH_BASE),
# bbrx3base's arms where bbrx3's goals are measured: the reference build of
# scripts/bench/bench-base, beside today's bbrx3 in the same boot.
bench_base_arms()
{
	((BENCH_BASE_ARMS)) || return 0
	case $1 in
	bottleneck|shallow|policer|loss) echo " bbrx3base" ;;
	fair) echo " bbrx3base+cubic bbrx3base+bbrx3base" ;;
	esac
}

# bench_own_arms SCEN: the arms of the scenario in this form.
bench_own_arms()
{
	# Smoke: the arms the goals compare (a goal without them reads "no
	# data"), elsewhere one arm, bbrx with its policy or knobs set (the
	# sysctl path; gso2's two at once); bottleneck also bbrx3, whose
	# runs fill the per-state table (bbrx3_state traced).
	if ((BENCH_QUICK == 2)); then
		case $1 in
		bottleneck) echo "bbr bbrx bbrx3" ;;
		shallow|policer|loss) echo "cubic bbr bbrx3" ;;
		ecn) echo "bbrx3:bbrx3_ecn=1 bbrx3:bbrx3_ecn=0 cubic" ;;
		gso2) echo "bbrx:gso_cap=1,extra_acked_gain=0" ;;
		fair) echo "bbrx3+cubic bbrx3+bbrx3" ;;
		fidelity) echo "bbr bbrx" ;;
		autocork) echo "bbrx:autocork=1" ;;
		tsq) echo "bbrx:tsq=1" ;;
		rcvbuf) echo "bbrx:rcvbuf=1" ;;
		delack) echo "bbrx:delack=1" ;;
		esac
		return
	fi
	# QUICK: the arms with two sysctls stand for those with one; shallow
	# and policer run the arms their goals compare (bbrx runs on the
	# same boot's bottleneck and fidelity paths).
	if ((BENCH_QUICK)); then
		case $1 in
		gso2) echo "cubic bbr bbrx:gso_cap=0,extra_acked_gain=0 bbrx:gso_cap=1,extra_acked_gain=0"; return ;;
		shallow|policer|loss) echo "cubic bbr bbrx3"; return ;;
		esac
	fi
	case $1 in
	bottleneck|shallow|policer|loss) echo "cubic bbr bbrx bbrx3" ;;
	ecn) echo "bbrx3:bbrx3_ecn=1 bbrx3:bbrx3_ecn=0 cubic" ;;
	# extra_acked_gain=0: the cwnd without the ACK-aggregation allowance,
	# tso_margin x the burst goal plus the BDP, as bbrx_gso.sh checks.
	gso2) echo "cubic bbr bbrx:gso_cap=0 bbrx:gso_cap=1" \
		"bbrx:gso_cap=0,extra_acked_gain=0 bbrx:gso_cap=1,extra_acked_gain=0" ;;
	fair) echo "cubic+cubic bbr+cubic bbrx+cubic bbr+bbr bbrx+bbrx" \
		"bbrx3+cubic bbrx3+bbrx3 bbrx3+bbr" ;;
	fidelity) echo "bbr bbrx" ;;
	autocork) echo "cubic bbr bbrx:autocork=0 bbrx:autocork=1 bbrx:autocork=2" ;;
	tsq) echo "cubic bbr bbrx:tsq=0 bbrx:tsq=1 bbrx:tsq=2" ;;
	rcvbuf) echo "cubic bbr bbrx:rcvbuf=0 bbrx:rcvbuf=1" ;;
	delack) echo "cubic bbr bbrx:delack=0 bbrx:delack=1 bbrx:delack=2" ;;
	*) echo "cubic bbr bbrx" ;;
	esac
}

# bench_secs SCEN: length of one flow.  Flows with ping need >= 4 s (ping
# starts 2 s in, see flow_run); QUICK's shallow and policer flows are
# shorter and go without it (their goals are retransmits and goodput).
# Smoke flows are as short as still fills every field: ping's 1 s under
# load after 2 s, gso2's cwnd samples after its first second.
bench_secs()
{
	if ((BENCH_QUICK == 2)); then
		case $1 in
		bottleneck|ecn|fidelity) echo 3 ;;
		*) echo 2 ;;
		esac
	elif ((BENCH_QUICK)); then
		case $1 in
		bottleneck|ecn|fidelity) echo 4 ;;
		gso2|fair) echo 3 ;;
		*) echo 2 ;;
		esac
	else
		# shallow and policer: 30 s, ten or more of bbrx3's probe
		# cycles of 2-3 s, so that a run's losses and bounds are
		# those of its steady state, not of STARTUP
		case $1 in
		bottleneck|ecn) echo 10 ;;
		shallow|policer) echo 30 ;;
		loss) echo 20 ;;
		fidelity) echo 12 ;;
		fair) echo 30 ;;
		gso2|tsq) echo 6 ;;
		*) echo 4 ;;
		esac
	fi
}

# The hook scenarios are named by their policy: its hooks, the side it
# acts on and its counters are the selftests' tables (POLICY_HOOKS,
# POLICY_SIDE, POLICY_COUNTERS in selftests/lib_hooks.sh; beside this file
# in the guest's stage, which bench-guest.sh has sourced already).
if ! declare -p POLICY_HOOKS >/dev/null 2>&1; then
	# shellcheck source=../../selftests/lib_hooks.sh
	source "$(dirname "${BASH_SOURCE[0]}")/../../selftests/lib_hooks.sh"
fi

# bench_hooks SCEN: the hooks the scenario installs (module parameter
# disable= gets the others, so each boot carries only what it measures);
# none for a scenario that is not a policy.
bench_hooks()
{
	echo "${POLICY_HOOKS[$1]:-}"
}

# bench_policy_ns SCEN: where an arm's sysctl goes (snd or rcv); receive-side
# policies act on the receiver, with scope 1 so that they act whatever the
# receiver's socket's congestion control.
bench_policy_ns()
{
	local side=${POLICY_SIDE[$1]:-SND}

	echo "${side,,}"
}

# bench_hook_counters SCEN: the /proc/net/bbrx_stat counters the scenario
# records per flow in its policy's netns (bench_policy_ns); none for a
# scenario that is not a policy.
bench_hook_counters()
{
	echo "${POLICY_COUNTERS[$1]:-}"
}

# bench_reps SCEN: repetitions per arm.  "fidelity" tests whether bbrx's
# runs and in-tree bbr's could be one distribution (scripts/bench/bench-fidelity),
# which needs at least 7 of each in its full form; "fair" alternates which
# flow starts first, and takes at least 5 for its medians.
bench_reps()
{
	local min=1

	if ((!BENCH_QUICK)); then
		case $1 in
		fidelity) min=7 ;;
		fair) min=5 ;;
		esac
	fi
	echo $((BENCH_REPS > min ? BENCH_REPS : min))
}

# bench_steps SCEN: flows (or pairs) the scenario runs.
bench_steps()
{
	local g a

	g=$(bench_groups "$1" | wc -w)
	a=$(bench_arms "$1" | wc -w)
	echo $((g * a * $(bench_reps "$1")))
}
