#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unload under load: 8 cubic flows (iperf3 -P 8, 8 KiB writes with
# TCP_NODELAY so both tcp_push and the small-queue check run all the time,
# in back-to-back batches of 20 s so the duration follows the cycles; the
# batch running after the last cycle is stopped then) keep running while
# tcp_bbrx is loaded and unloaded CYCLES times (BBRX_UNLOAD_CYCLES: 6 by
# default, which covers every policy value below; make check-full 20; 1 or 2
# make a smoke test: every hook installs, acts and is removed under
# traffic).  After each load the sender netns gets scope=1 and non-zero
# policies (autocork 1/2/3 and tsq 1/2 in rotation) and the receiver netns
# scope=1, rcvbuf=1 and delack 1/2 in rotation, so the ftrace redirects,
# the entry callback and the kprobe are live and taken when rmmod removes
# them (one short extra connection per cycle makes the rcvbuf hooks act).
# Each cycle holds the policies for BBRX_UNLOAD_SEGS (2000) segments sent
# by the flows, a count of traffic rather than a time, so that a slower
# guest holds them longer instead of failing.  Asserts: every load installs
# every hook (but those the kernel is known to refuse,
# BBRX_EXPECT_REFUSED, lib_hooks.sh), the send and receive hook counters
# moved in every cycle, every rmmod succeeds, every flow batch completed
# with data on all 8 streams or was cut by the test after each stream moved
# data, and the kernel log stays clean.
#
# The sender-router hop is the NIC pair when NETIFS is set (the VM's virtio
# NICs complete TX late, so TSQ and autocorking act), veth otherwise.

ALL_TESTS="
	unload_cycles
	unload_hooks_acted
	unload_flows_complete
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

CYCLES=${BBRX_UNLOAD_CYCLES:-6}
SEGS=${BBRX_UNLOAD_SEGS:-2000}	# segments sent with the policies set, per cycle
BATCH=${BBRX_UNLOAD_BATCH:-20}	# seconds per batch of flows
FLOWS=8
declare -a CYC_SUM CYC_RSUM CYC_HOOKS CYC_POL
LOAD_FAILS=
UNLOAD_FAILS=
SET_FAILS=
IDLE_FAILS=

measure()
{
	local i t0 lpid cpid

	bbrx_unload || UNLOAD_FAILS+=" initial"
	: >"$TMPD/flows.rc"
	flow_batches_loop &
	lpid=$!
	bg_track $lpid
	sleep 2
	t0=$SECONDS
	for ((i = 0; i < CYCLES; i++)); do
		# every policy live, each value in turn (one this kernel
		# refuses, BBRX_EXPECT_REFUSED, stays 0)
		policy_cycle "$i" nonzero >"$TMPD/policies"
		CYC_POL[i]=$(policy_label <"$TMPD/policies")
		if ! bbrx_load 2>>"$TMPD/load.err"; then
			LOAD_FAILS+=" $i"
			continue
		fi
		CYC_HOOKS[i]=$(hook_states $ALL_HOOKS)
		policies_apply <"$TMPD/policies" || SET_FAILS+=" $i"
		# A new connection: the rcvbuf entry hook and the growth redirect act.
		ip netns exec "$SND" timeout 10 "$BIN_DIR/cc_setsockopt" cubic \
			"$RCV_IP4" "$SINK_PORT" 2000000 >/dev/null 2>&1 &
		cpid=$!
		hooks_after_segs "$SEGS" || IDLE_FAILS+=" $i"
		wait $cpid
		CYC_SUM[i]=$HW_SND
		CYC_RSUM[i]=$HW_RCV
		# Policies stay non-zero: rmmod removes redirects that are live.
		bbrx_unload || UNLOAD_FAILS+=" $i"
	done
	CYC_TIME=$((SECONDS - t0))
	flow_batches_stop $lpid
	bbrx_module_loaded || bbrx_load

	echo "# $CYCLES cycles in ${CYC_TIME}s, $FLOWS cubic flows (iperf3 -P $FLOWS -l 8K -N, ${BATCH}s batches) over ${SND_IF}"
	printf '# %-5s %-14s %-52s %s\n' cycle policies "hooks (${ALL_HOOKS// //})" "send/receive hook counters after $SEGS segments"
	for ((i = 0; i < CYCLES; i++)); do
		printf '# %-5s %-14s %-52s %s\n' "$i" "${CYC_POL[i]}" "${CYC_HOOKS[i]:-not loaded}" "${CYC_SUM[i]:-}/${CYC_RSUM[i]:-}"
	done
}

unload_cycles()
{
	[[ -z $LOAD_FAILS ]]
	check_err $? "load failed in cycles:$LOAD_FAILS ($(head -c 200 "$TMPD/load.err"))"
	[[ -z $UNLOAD_FAILS ]]
	check_err $? "rmmod failed in cycles:$UNLOAD_FAILS"
	[[ -z $SET_FAILS ]]
	check_err $? "policy writes failed in cycles:$SET_FAILS"
	[[ -z $IDLE_FAILS ]]
	check_err $? "the flows did not send $SEGS segments in cycles:$IDLE_FAILS"
	log_test "$CYCLES load/unload cycles with live redirects under $FLOWS flows" "${CYC_TIME}s"
}

unload_hooks_acted()
{
	local i bad='' all

	all=$(hooks_expected $ALL_HOOKS)

	for ((i = 0; i < CYCLES; i++)); do
		[[ ${CYC_HOOKS[i]} == "$all" ]] || bad+=" $i:hooks=${CYC_HOOKS[i]:-none}"
		[[ ${CYC_SUM[i]:-0} -gt 0 ]] || bad+=" $i:send-counters=${CYC_SUM[i]:-none}"
		[[ ${CYC_RSUM[i]:-0} -gt 0 ]] || bad+=" $i:receive-counters=${CYC_RSUM[i]:-none}"
	done
	[[ -z $bad ]]
	check_err $? "cycles where a hook was not installed or did not act:$bad"
	log_test "hooks $all, send and receive hooks counting in every cycle"
}

unload_flows_complete()
{
	local k

	flow_batches_check
	log_test "every flow completed or was cut by the test ($NB batches of $FLOWS, $NCUT cut)" \
		"$(for ((k = 0; k < NB; k++)); do jq -r '(.end.sum_received.bits_per_second // 0) / 1e6 | floor' "$TMPD/flows-$k.json" 2>/dev/null; done | tr '\n' ' ')Mbit/s"
}

require_command iperf3 jq ip
require_bbrx
all_hooks_read
# shellcheck disable=SC2046  # word-split hook list
require_hooks $(hooks_usable $ALL_HOOKS)
require_helper
require_topo
iperf3_server_start || exit 1
sink_start || exit 1

measure
tests_run
tests_done
exit $EXIT_STATUS
