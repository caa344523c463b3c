#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Hook refusal: the test-only module parameter fault_verify=HOOK makes that
# hook's verifier expect a pattern that is not in the kernel text, as a
# kernel build with a different shape would.  For each hook: the module
# still loads, the hook is refused with its reason in /proc/net/bbrx_hooks and
# one dmesg line, the other hook is installed, a non-zero policy on the
# refused hook fails with EOPNOTSUPP (value unchanged) while out-of-range
# values still fail with EINVAL, and bbrx still works (a socket takes it).
# Also: disable=autocork,tsq reports both "disabled" and refuses their
# policies; an unknown hook name fails the load; a plain load installs both.
# The module is left loaded without parameters.

ALL_TESTS="
	refuse_tsq
	refuse_autocork
	disable_both
	unknown_hook_name
	plain_load_installs_both
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

NS=hk-$SFX
EXTRA_NETNS=$NS
PORT=5401
SINK_PID=

# netns_up: a fresh netns (created after the load, so it has this load's
# per-netns state) with a discard sink on its loopback.
netns_up()
{
	local i

	ip netns add "$NS" || return 1
	ip -n "$NS" link set lo up
	ip netns exec "$NS" "$LIB_DIR/cc_setsockopt" -l "$PORT" >"$TMPD/sink.log" 2>&1 &
	SINK_PID=$!
	bg_track $SINK_PID
	for ((i = 0; i < 50; i++)); do
		[[ -n $(ip netns exec "$NS" ss -ltnH "sport = :$PORT") ]] && return 0
		sleep 0.1
	done
	return 1
}

netns_down()
{
	[[ -n $SINK_PID ]] && bg_kill "$SINK_PID"
	SINK_PID=
	ns_kill_all "$NS"
	ip netns del "$NS" 2>/dev/null
}

# bbrx_works: a socket in the netns takes bbrx and SocketsInit moves.
bbrx_works()
{
	local before after cc

	before=$(bbrx_stat SocketsInit "$NS")
	cc=$(ip netns exec "$NS" "$LIB_DIR/cc_setsockopt" bbrx 127.0.0.1 "$PORT" 262144 2>&1)
	check_err $? "bbrx connection failed: $cc"
	[[ $cc == bbrx ]]
	check_err $? "socket reports congestion control '$cc', not bbrx"
	after=$(bbrx_stat SocketsInit "$NS")
	fcmp "${after:-0}" '>' "${before:-0}"
	check_err $? "SocketsInit did not move ($before -> $after)"
}

# policy_checks REFUSED OK_HOOK: sysctl behaviour with hook REFUSED not
# installed and hook OK_HOOK (may be empty) installed.
policy_checks()
{
	local bad=$1 good=$2 max e v

	for v in 1 2; do
		e=$(sysctl_write_err "$NS" "$bad" "$v")
		[[ $e == EOPNOTSUPP ]]
		check_err $? "$bad=$v with the hook refused: $e, expected EOPNOTSUPP"
	done
	v=$(bbrx_sysctl_get "$NS" "$bad")
	[[ $v == 0 ]]
	check_err $? "$bad is '$v' after refused writes, expected 0"
	e=$(sysctl_write_err "$NS" "$bad" 0)
	[[ $e == OK ]]
	check_err $? "$bad=0 with the hook refused: $e"
	[[ $bad == tsq ]] && max=3 || max=4
	for v in $max -1 x; do
		e=$(sysctl_write_err "$NS" "$bad" "$v")
		[[ $e == EINVAL ]]
		check_err $? "$bad=$v: $e, expected EINVAL"
	done
	dmesg_since_start | grep -q "net.ipv4.bbrx.$bad=.* needs hook $bad"
	check_err $? "no dmesg line for the refused $bad policy write"
	if [[ -n $good ]]; then
		e=$(sysctl_write_err "$NS" "$good" 1)
		[[ $e == OK ]]
		check_err $? "$good=1 with its hook installed: $e"
		sysctl_write_err "$NS" "$good" 0 >/dev/null
	fi
}

# fault_case HOOK OTHER REASON_RE: load with fault_verify=HOOK and check.
fault_case()
{
	local hook=$1 other=$2 re=$3 line err

	err=$(bbrx_reload "fault_verify=$hook" 2>&1)
	check_err $? "load with fault_verify=$hook failed: $err"
	bbrx_module_loaded
	check_err $? "module not loaded with fault_verify=$hook"
	line=$(hook_line "$hook")
	[[ $line =~ ^$hook\ [^\ ]+\ refused:\ .+ ]]
	check_err $? "bbrx_hooks: '$line', expected '$hook <symbol> refused: <reason>'"
	[[ $line =~ $re ]]
	check_err $? "refusal reason '$line' does not match /$re/"
	[[ $(hook_state "$other") == installed ]]
	check_err $? "the other hook: '$(hook_line "$other")', expected installed"
	dmesg_since_start | grep -qE "bbrx: hook $hook \([^)]+\) refused: "
	check_err $? "no dmesg line 'bbrx: hook $hook (...) refused: ...'"
	netns_up
	check_err $? "netns with a sink could not be set up"
	policy_checks "$hook" "$other"
	bbrx_works
	netns_down
	log_info "fault_verify=$hook: $line"
}

refuse_tsq()
{
	fault_case tsq autocork "unexpected instruction bytes"
	log_test "fault_verify=tsq: tsq refused with reason, EOPNOTSUPP, autocork and bbrx work"
}

refuse_autocork()
{
	fault_case autocork tsq "no tail call"
	log_test "fault_verify=autocork: autocork refused with reason, EOPNOTSUPP, tsq and bbrx work"
}

disable_both()
{
	local err h

	err=$(bbrx_reload disable=autocork,tsq 2>&1)
	check_err $? "load with disable=autocork,tsq failed: $err"
	for h in autocork tsq; do
		[[ $(hook_state "$h") == disabled ]]
		check_err $? "bbrx_hooks: '$(hook_line "$h")', expected disabled"
	done
	netns_up
	check_err $? "netns with a sink could not be set up"
	policy_checks autocork ""
	policy_checks tsq ""
	bbrx_works
	netns_down
	log_test "disable=autocork,tsq: both disabled, policies EOPNOTSUPP, bbrx works"
}

unknown_hook_name()
{
	local err

	bbrx_unload
	check_err $? "rmmod failed"
	err=$(bbrx_load fault_verify=nosuchhook 2>&1)
	check_fail $? "load with fault_verify=nosuchhook succeeded"
	bbrx_module_loaded
	check_fail $? "module loaded with an unknown hook name"
	bbrx_unload
	log_test "unknown hook name in a module parameter fails the load" "${err:0:80}"
}

plain_load_installs_both()
{
	local err h

	err=$(bbrx_unload && bbrx_load 2>&1)
	check_err $? "plain load failed: $err"
	for h in autocork tsq; do
		[[ $(hook_state "$h") == installed ]]
		check_err $? "bbrx_hooks: '$(hook_line "$h")', expected installed"
	done
	netns_up
	check_err $? "netns with a sink could not be set up"
	for h in autocork tsq; do
		[[ $(sysctl_write_err "$NS" "$h" 1) == OK ]]
		check_err $? "$h=1 refused after a plain load"
	done
	bbrx_works
	netns_down
	log_test "plain load: both hooks installed, policies settable" \
		"$(tr '\n' ';' </proc/net/bbrx_hooks)"
}

require_root
require_command ip ss modinfo
require_helper
require_bbrx
bbrx_unload || {
	RET=1 retmsg="tcp_bbrx cannot be unloaded (in use), the refusal test needs to reload it"
	log_test "unload tcp_bbrx"
	tests_done
	exit 1
}

tests_run
bbrx_module_loaded || bbrx_load
tests_done
exit $EXIT_STATUS
