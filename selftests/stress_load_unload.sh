#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stress: tcp_bbrx loaded and unloaded CYCLES times (4; BBRX_STRESS_FULL=1:
# 100) under 8 cubic flows (iperf3 -P 8, 8 KiB writes, TCP_NODELAY, in
# back-to-back batches of 10 s; the batch running after the last cycle is
# stopped then).
#
# Cycle i:
#   1. load, rotating three ways: modprobe; the kernel's on-demand load
#      when the router netns' default becomes bbrx (sysctl
#      net.ipv4.tcp_congestion_control=bbrx); the on-demand load of
#      setsockopt(TCP_CONGESTION, "bbrx") by a client that connects and
#      closes (with BBRX_KO, which the kernel cannot load by name, every
#      load is an insmod of it);
#   2. sender and receiver netns: scope 1 and the policies of level
#      P = i % 4: each policy min(P, its maximum): autocork P, tsq
#      min(P, 2), rcvbuf min(P, 1), delack min(P, 2) (policy_cycle,
#      lib_hooks.sh; P = 0: every policy at the kernel's behaviour);
#   3. a bbrx socket (cc_setsockopt -H) connects to a sink on the receiver
#      and stays open: rmmod must fail "in use" and leave the module and
#      bbrx registered; the socket is closed;
#   4. the router netns' default is (or becomes) bbrx: rmmod must fail "in
#      use"; the default goes back to cubic;
#   5. the hook counters of both netns are read once the flows have sent
#      BBRX_LU_SEGS (2000) segments with these policies (a count of
#      traffic, not a time: a slower guest waits longer): with P = 0 they
#      must all be 0 (no hook acts), with P > 0 the sender's and the
#      receiver's must have moved (the receiver's RcvbufSized counts the
#      socket of step 3);
#   6. unload, alternating rmmod and modprobe -r (rmmod only with
#      BBRX_KO), with the policies still
#      set (the redirects are live; retried while the closed sockets
#      finish, 120 s only guard a hang): must succeed, and bbrx must be
#      gone from tcp_available_congestion_control.
# Also asserts: every load installs all five hooks, every flow batch
# completes with data on all 8 streams (or was cut by the test after each
# stream moved data), dmesg clean.

ALL_TESTS="
	lu_cycles
	lu_rmmod_refused_while_used
	lu_hooks_follow_policies
	lu_flows_complete
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

if [[ ${BBRX_STRESS_FULL:-0} == 1 ]]; then
	CYCLES=${BBRX_LU_CYCLES:-100}
else
	CYCLES=${BBRX_LU_CYCLES:-4}
fi
BATCH=10
SEGS=${BBRX_LU_SEGS:-2000}
FLOWS=8
AVAIL=/proc/sys/net/ipv4/tcp_available_congestion_control
declare -a CYC_LOAD CYC_POL CYC_HOOKS CYC_SUM CYC_RSUM CYC_SOCK CYC_NSDEF
LOAD_FAILS=
UNLOAD_FAILS=
SET_FAILS=
IDLE_FAILS=
REFUSED=0

# rmmod_refused WHAT: rmmod must fail with "in use" and leave bbrx there.
# Prints what went wrong, if anything.
rmmod_refused()
{
	local out

	out=$(rmmod tcp_bbrx 2>&1)
	if ! bbrx_module_loaded; then
		echo "rmmod succeeded with $1"
		bbrx_load >/dev/null 2>&1
		return 1
	fi
	[[ $out == *"in use"* ]] || { echo "rmmod with $1 said '$out', not 'in use'"; return 1; }
	grep -qw bbrx "$AVAIL" || { echo "bbrx unregistered by a refused rmmod ($1)"; return 1; }
	# Called in $(...): counted in a file.
	echo "$1" >>"$TMPD/refused"
	return 0
}

unload_with()
{
	local how=$1 i

	# 120 s only guard a hang: it returns once the module is gone.
	for ((i = 0; i < 600; i++)); do
		bbrx_module_loaded || return 0
		if [[ $how == rmmod ]] || ! bbrx_on_demand; then
			rmmod tcp_bbrx 2>/dev/null && return 0
		else
			modprobe -r tcp_bbrx 2>/dev/null && ! bbrx_module_loaded && return 0
		fi
		sleep 0.2
	done
	! bbrx_module_loaded
}

measure()
{
	local i m how lpid hpid cc err t0

	bbrx_unload || UNLOAD_FAILS+=" initial"
	: >"$TMPD/flows.rc"
	: >"$TMPD/refusals"
	: >"$TMPD/refused"
	flow_batches_loop &
	lpid=$!
	bg_track $lpid
	sleep 2
	t0=$SECONDS
	for ((i = 0; i < CYCLES; i++)); do
		policy_cycle "$i" >"$TMPD/policies"
		CYC_POL[i]=$(policy_label <"$TMPD/policies")
		m=$((i % 3))
		# the kernel loads by name an installed module only (not BBRX_KO)
		bbrx_on_demand || m=0
		case $m in
		0) CYC_LOAD[i]=$(bbrx_loader)
		   bbrx_load 2>>"$TMPD/load.err" ;;
		1) CYC_LOAD[i]=ns-default
		   ns_sysctl "$RTR" net.ipv4.tcp_congestion_control=bbrx 2>>"$TMPD/load.err" ;;
		2) CYC_LOAD[i]=setsockopt
		   cc=$(ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" bbrx "$RCV_IP4" \
			"$SINK_PORT" 100000 2>>"$TMPD/load.err")
		   [[ $cc == bbrx ]] || echo "setsockopt load: cc '$cc'" >>"$TMPD/load.err" ;;
		esac
		if ! bbrx_module_loaded; then
			LOAD_FAILS+=" $i(${CYC_LOAD[i]})"
			continue
		fi
		# Only the socket of step 3 may hold the module there.
		((m == 1)) && ns_sysctl "$RTR" net.ipv4.tcp_congestion_control=cubic
		CYC_HOOKS[i]=$(hook_states $ALL_HOOKS)
		policies_apply <"$TMPD/policies" 2>>"$TMPD/set.err" || SET_FAILS+=" $i"

		# A bbrx socket holds the module.
		ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -H 60 bbrx "$RCV_IP4" \
			"$SINK_PORT" 1000000 >/dev/null 2>>"$TMPD/sock.err" &
		hpid=$!
		bg_track $hpid
		cc=$(ss_sink_flow 60 | sed -n 's/.* cc=\([a-z0-9_]*\).*/\1/p')
		CYC_SOCK[i]=${cc:-none}
		if [[ $cc == bbrx ]]; then
			err=$(rmmod_refused "a bbrx socket open") || echo "$i: $err" >>"$TMPD/refusals"
		else
			echo "$i: no established bbrx socket to the sink (cc '$cc')" >>"$TMPD/refusals"
		fi
		bg_kill $hpid

		# A netns default holds the module.
		ns_sysctl "$RTR" net.ipv4.tcp_congestion_control=bbrx
		CYC_NSDEF[i]=$(ip netns exec "$RTR" sysctl -n net.ipv4.tcp_congestion_control)
		err=$(rmmod_refused "a netns default bbrx") || echo "$i: $err" >>"$TMPD/refusals"
		ns_sysctl "$RTR" net.ipv4.tcp_congestion_control=cubic

		# The hooks act exactly when a policy asks.
		hooks_after_segs "$SEGS" || IDLE_FAILS+=" $i"
		CYC_SUM[i]=$HW_SND
		CYC_RSUM[i]=$HW_RCV

		how=rmmod
		((i % 2)) && how=modprobe-r
		if unload_with "$how"; then
			grep -qw bbrx "$AVAIL" && UNLOAD_FAILS+=" $i(bbrx still available)"
		else
			UNLOAD_FAILS+=" $i($how: $(rmmod tcp_bbrx 2>&1))"
		fi
	done
	CYC_TIME=$((SECONDS - t0))
	REFUSED=$(wc -l <"$TMPD/refused")
	flow_batches_stop $lpid
	bbrx_module_loaded || bbrx_load

	echo "# cycles: $CYCLES load/unload cycles in ${CYC_TIME}s under $FLOWS cubic flows (iperf3 -P $FLOWS -l 8K -N, ${BATCH}s batches) over ${SND_IF}; rmmod refused while in use: $REFUSED times"
	printf '# %-5s %-10s %-12s %-9s %-52s %s\n' cycle load policies "socket" "hooks (${ALL_HOOKS// //})" "send/receive hook counters after $SEGS segments"
	for ((i = 0; i < CYCLES; i++)); do
		printf '# %-5s %-10s %-12s %-9s %-52s %s\n' "$i" "${CYC_LOAD[i]:-}" "${CYC_POL[i]}" \
			"${CYC_SOCK[i]:-}" "${CYC_HOOKS[i]:-not loaded}" "${CYC_SUM[i]:-}/${CYC_RSUM[i]:-}"
	done
}

lu_cycles()
{
	local how

	[[ -z $LOAD_FAILS ]]
	check_err $? "load failed in cycles:$LOAD_FAILS ($(head -c 200 "$TMPD/load.err"))"
	[[ -z $UNLOAD_FAILS ]]
	check_err $? "unload failed in cycles:$UNLOAD_FAILS"
	[[ -z $SET_FAILS ]]
	check_err $? "policy writes failed in cycles:$SET_FAILS ($(head -c 200 "$TMPD/set.err"))"
	[[ -z $IDLE_FAILS ]]
	check_err $? "the flows did not send $SEGS segments in cycles:$IDLE_FAILS"
	if bbrx_on_demand; then
		how="load (modprobe, netns default, setsockopt) / unload (rmmod, modprobe -r)"
	else
		how="load ($(bbrx_loader)) / unload (rmmod)"
	fi
	log_test "$CYCLES $how cycles under $FLOWS flows" "${CYC_TIME}s"
}

lu_rmmod_refused_while_used()
{
	[[ ! -s $TMPD/refusals ]]
	check_err $? "$(wc -l <"$TMPD/refusals") problem(s): $(head -n 3 "$TMPD/refusals" | tr '\n' ';')"
	((REFUSED == 2 * CYCLES))
	check_err $? "rmmod refused $REFUSED times, expected $((2 * CYCLES))"
	log_test "rmmod fails 'in use' while a bbrx socket is open or a netns defaults to bbrx" "$REFUSED refusals"
}

lu_hooks_follow_policies()
{
	local i bad=

	for ((i = 0; i < CYCLES; i++)); do
		[[ -z ${CYC_HOOKS[i]:-} ]] && continue
		[[ ${CYC_HOOKS[i]} == "$ALL_INSTALLED" ]] || bad+=" $i:hooks=${CYC_HOOKS[i]}"
		if [[ ${CYC_POL[i]} =~ ^([a-z]0/?)+$ ]]; then
			[[ ${CYC_SUM[i]} == 0 && ${CYC_RSUM[i]} == 0 ]] ||
				bad+=" $i:counters ${CYC_SUM[i]}/${CYC_RSUM[i]} with every policy 0"
		else
			[[ ${CYC_SUM[i]:-0} -gt 0 && ${CYC_RSUM[i]:-0} -gt 0 ]] ||
				bad+=" $i:counters ${CYC_SUM[i]}/${CYC_RSUM[i]} with policies ${CYC_POL[i]}"
		fi
	done
	[[ -z $bad ]]
	check_err $? "cycles where hooks were not installed or did not follow the policies:$bad"
	log_test "all $(wc -w <<<"$ALL_HOOKS") hooks installed at every load; hook counters 0 at policy 0, moving otherwise"
}

lu_flows_complete()
{
	flow_batches_check
	log_test "every flow completed or was cut by the test ($NB batches of $FLOWS, $NCUT cut)"
}

require_command iperf3 jq ip ss modprobe rmmod
require_bbrx
all_hooks_read
ALL_INSTALLED=$(hooks_all_state installed $ALL_HOOKS)
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_helper
require_topo
iperf3_server_start || exit 1
sink_start || exit 1

measure
tests_run
tests_done
exit $EXIT_STATUS
