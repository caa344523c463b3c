#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Other tools on the functions bbrx hooks.
#
# tracefs kprobe events: one event on the entry of the function of each
# hook, as the loaded module names it in /proc/net/bbrx_hooks (on 6.1:
# tcp_push, tcp_small_queue_check.isra.0, tcp_init_transfer,
# tcp_rcv_space_adjust, tcp_event_data_recv; hooked_funcs_read).
# These are ftrace-based kprobes
# without IPMODIFY, so they share a function with bbrx's redirects.  Both
# orders, each with a cubic background flow running across bbrx's load and
# unload (back-to-back 2 s flows) and scope=1 with every policy non-zero (sender autocork 1, tsq 1;
# receiver rcvbuf 1, delack 1), plus a foreground flow while bbrx acts:
#   events first: events, then bbrx loads, acts, unloads;
#   bbrx first:   bbrx, then the events, bbrx acts, the events are removed
#                 and added again under bbrx, then bbrx unloads.
# Asserts: every hook installed next to the events; the events count hits
# (kprobe_profile) on every function while bbrx acts and again after it is
# gone, with lines in `trace`; bbrx's hook counters move; after rmmod,
# enabled_functions holds only the events' kprobe ops on the hooked
# functions (count 1, kprobe_ftrace_handler, no IPMODIFY flag, nothing of
# tcp_bbrx by name or address) and the kprobe list has no probe inside one
# of them (bbrx's delack probe sits at tcp_event_data_recv+0x1f8 on 6.1); the
# flows complete.
#
# Livepatch: klp_tcp_push.ko (klp_tcp_push/, built on the host by the
# Makefile against the VM kernel's headers) replaces tcp_push() with a
# function of the same behaviour and counts its calls (parameter "calls").
#   livepatch first: bbrx loads, autocork is refused with "IPMODIFY
#                    conflict", its policy fails with EOPNOTSUPP, the other
#                    four hooks install and count with a flow, the flow runs
#                    through the livepatch's tcp_push();
#   livepatch second: with bbrx loaded (autocork installed) insmod fails
#                    with EBUSY and livepatch's "failed to register ftrace
#                    handler" line, nothing of it stays (no
#                    /sys/kernel/livepatch entry, not in lsmod), bbrx's
#                    redirect still owns tcp_push and a flow works; after
#                    rmmod tcp_bbrx the same livepatch enables (nothing of
#                    bbrx's left on tcp_push).
# Unloading (livepatch: enabled=0, wait for the transition, rmmod) leaves
# the kernel's own tcp_push(): no tcp_push line in enabled_functions, a
# flow works.  The livepatch taints the kernel (unsigned, livepatch): fine
# in the VM, not on a host you care about.
#
# Needs tracefs (mounted here if it is not), kprobe events, debugfs for the
# kprobe list (that check is left out without it), CONFIG_LIVEPATCH.
# The module is left loaded.

ALL_TESTS="
	events_first
	bbrx_first
	livepatch_first
	livepatch_second
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

# The hooked functions, read from the loaded module (hooked_funcs_read):
# HOOK_FN[hook] the function each installed hook sits in, FUNCS all of
# them, FTRACE_FUNCS those whose ftrace site bbrx takes; EV_FN[event] the
# function of each kprobe event (c_HOOK_SFX).
declare -A HOOK_FN=() EV_FN=()
FUNCS=
FTRACE_FUNCS=
EV_GROUP=bbrx_coexist
TRACE_BUF_KB=
KLP=klp_tcp_push
KLP_KO=$BIN_DIR/klp_tcp_push/klp_tcp_push.ko
KLP_SYS=/sys/kernel/livepatch/$KLP
BG_PORT=5202
BG_SECS=2
BG_PID=
FLOW_SECS=1

##############################################################################
# tracefs

# hooked_funcs_read: with tcp_bbrx loaded, HOOK_FN, FUNCS, FTRACE_FUNCS and
# EV_FN. A hook's function is the second field of /proc/net/bbrx_hooks,
# resolved at load (delack's probe sits inside tcp_event_data_recv on
# 6.1, tcp_measure_rcv_mss on 6.12; rcvbuf_grow replaces
# tcp_rcv_space_adjust or, on 7.x, tcp_rcvbuf_grow). bbrx takes a
# function's ftrace site when enabled_functions names tcp_bbrx's ops on
# it; a kprobe inside a function leaves the entry to the events. Read
# once, before the cases: events_first puts the events on before bbrx
# loads.
hooked_funcs_read()
{
	local h f

	for h in $(hooks_usable $ALL_HOOKS); do
		f=$(awk -v h="$h" '$1 == h { print $2 }' /proc/net/bbrx_hooks)
		[[ -n $f ]] || continue
		HOOK_FN[$h]=$f
		EV_FN[c_${h}_$SFX]=$f
		FUNCS+="${FUNCS:+ }$f"
		awk -v f="$f" '$1 == f && /tcp_bbrx/ { ok = 1 } END { exit !ok }' \
			"$TRACEFS/enabled_functions" && FTRACE_FUNCS+="${FTRACE_FUNCS:+ }$f"
	done
	log_info "hooked functions: $(for h in "${!HOOK_FN[@]}"; do echo -n "$h=${HOOK_FN[$h]} "; done)(ftrace site: $FTRACE_FUNCS)"
	[[ -n $FUNCS && -n $FTRACE_FUNCS ]]
}

# unload_then_events W: rmmod bbrx, the background flow completes, only the
# events are left on the functions and they still fire; then remove them.
unload_then_events()
{
	local w=$1

	unload_ok "$w"
	bg_flow_wait "$w"
	ef_check_events_only "$w"
	events_after_unload "$w"
	events_del
	check_err $? "$w: kprobe events could not be removed"
}

# events_add: one entry kprobe event per hooked function, enabled.
events_add()
{
	local ev
	local -a evs=()

	for ev in "${!EV_FN[@]}"; do
		evs+=("$ev=${EV_FN[$ev]}")
	done
	kprobe_events_add "$EV_GROUP" "${evs[@]}"
}

events_del()
{
	kprobe_events_del "$EV_GROUP"
}

# events_hits FILE: "event nhit" lines of our events from kprobe_profile.
events_hits()
{
	awk -v s="_$SFX" 'substr($1, length($1) - length(s) + 1) == s { print $1, $2 }' \
		"$TRACEFS/kprobe_profile" >"$1"
}

# events_fired BEFORE AFTER WHAT: every event's hit count grew.
events_fired()
{
	local ev b a bad=

	for ev in "${!EV_FN[@]}"; do
		b=$(awk -v e="$ev" '$1 == e { print $2 }' "$1")
		a=$(awk -v e="$ev" '$1 == e { print $2 }' "$2")
		[[ -n $a && ${a:-0} -gt ${b:-0} ]] || bad+=" ${EV_FN[$ev]}:${b:-none}->${a:-none}"
	done
	[[ -z $bad ]]
	check_err $? "$3: kprobe events that did not fire:$bad"
	EV_SUMMARY=$(for ev in "${!EV_FN[@]}"; do
		echo -n "${EV_FN[$ev]%%.*}=$(( $(awk -v e="$ev" '$1 == e { print $2 }' "$2") -
					$(awk -v e="$ev" '$1 == e { print $2 }' "$1") )) "
		done)
}

# trace_lines_check WHAT: the trace buffer has a line of every event.
trace_lines_check()
{
	local ev n bad=

	cat "$TRACEFS/trace" >"$TMPD/trace.txt"
	for ev in "${!EV_FN[@]}"; do
		n=$(grep -c " $ev: " "$TMPD/trace.txt")
		[[ $n -gt 0 ]] || bad+=" $ev"
	done
	[[ -z $bad ]]
	check_err $? "$1: no line in trace for:$bad"
}

# ef_lines: enabled_functions lines of the hooked functions.
ef_lines()
{
	local re

	re="^($(echo "$FUNCS" | sed 's/\./\\./g; s/ /|/g')) "
	grep -E "$re" "$TRACEFS/enabled_functions"
}

# bbrx_range: "start end" of tcp_bbrx's core image (/proc/modules).
bbrx_range()
{
	awk '$1 == "tcp_bbrx" { print $6, $2 }' /proc/modules | {
		read -r base size
		[[ -n $base && $base != 0x0000000000000000 ]] || exit 1
		# 64-bit addresses wrap to negative numbers in bash arithmetic,
		# consistently, so comparisons among them still hold.
		echo "$((base)) $((base + size))"
	}
}

# ef_check_events_only WHAT: after bbrx left, enabled_functions shows on
# the hooked functions only the events' kprobe ops, nothing of bbrx's.
ef_check_events_only()
{
	local what=$1 f line a bad=

	ef_lines >"$TMPD/ef.txt"
	for f in $FUNCS; do
		line=$(awk -v f="$f" '$1 == f' "$TMPD/ef.txt")
		[[ $line =~ ^[^\ ]+\ \(1\)\ R\ [^I]*tramp:.*kprobe_ftrace_handler ]] ||
			bad+=" [$f: '${line:-no line}']"
	done
	grep -qiE 'bbrx' "$TRACEFS/enabled_functions" &&
		bad+=" [a line names bbrx: $(grep -iE 'bbrx' "$TRACEFS/enabled_functions" | head -n1)]"
	# Handlers and ops left at addresses in tcp_bbrx's old image. Not the
	# "tramp:" addresses: the events' trampolines are ftrace's own
	# allocations, and on 7.3 (execmem's cache of executable pages) one sat
	# inside the span /proc/modules gave tcp_bbrx (base + size).
	if [[ -n $BBRX_RANGE ]]; then
		read -r lo hi <<<"$BBRX_RANGE"
		for a in $(sed -E 's/tramp: 0x[0-9a-f]{16}//g' "$TRACEFS/enabled_functions" |
			   grep -oE '0x[0-9a-f]{16}'); do
			(( a >= lo && a < hi )) && bad+=" [address $a in tcp_bbrx's old image]"
		done
	fi
	[[ -z $bad ]]
	check_err $? "$what: enabled_functions after rmmod:$bad"
	kprobes_check "$what"
}

# kprobes_check WHAT: no kprobe inside one of the hooked functions (the
# events sit at +0x0, or at +0x4 past the ENDBR64 on IBT kernels (6.12);
# bbrx's delack probe at tcp_event_data_recv+0x1f8).
kprobes_check()
{
	local list=/sys/kernel/debug/kprobes/list bad entry='^$'

	[[ -r $list ]] || { log_info "no $list: kprobe list not checked"; return 0; }
	grep -qs '^CONFIG_X86_KERNEL_IBT=y' "/boot/config-$(uname -r)" && entry='\+0x4 '
	bad=$(grep -E "($(echo "$FUNCS" | sed 's/\./\\./g; s/ /|/g'))\+0x[1-9a-f]" "$list" |
		grep -vE "$entry")
	[[ -z $bad ]]
	check_err $? "$1: kprobe left inside a hooked function: $(echo "$bad" | head -n1)"
}

##############################################################################
# Flows and bbrx

# bg_flow_start: back-to-back cubic flows (8 KiB writes, TCP_NODELAY) of
# BG_SECS each on BG_PORT until bg_flow_wait, so ftrace's ops on the hooked
# functions change under traffic.  "K rc" per flow in bg.rc.
bg_flow_start()
{
	rm -f "$TMPD"/bg.*
	: >"$TMPD/bg.rc"
	(
		k=0
		while [[ ! -e $TMPD/bg.stop ]]; do
			ip netns exec "$SND" timeout $((BG_SECS + 60)) iperf3 -c "$RCV_IP4" \
				-p "$BG_PORT" -t "$BG_SECS" -C cubic -l 8K -N -J \
				>"$TMPD/bg.$k.json" 2>"$TMPD/bg.$k.err"
			echo "$k $?" >>"$TMPD/bg.rc"
			k=$((k + 1))
		done
	) &
	BG_PID=$!
	bg_track "$BG_PID"
}

# bg_flow_wait WHAT: stop the loop; every flow exited 0 with data.
bg_flow_wait()
{
	local k rc bytes bad= n=0

	[[ -n $BG_PID ]] || return 0
	touch "$TMPD/bg.stop"
	wait "$BG_PID"
	BG_PID=
	while read -r k rc; do
		n=$((n + 1))
		bytes=$(jq -r '.end.sum_received.bytes // 0' "$TMPD/bg.$k.json" 2>/dev/null)
		[[ $rc -eq 0 && ${bytes:-0} -gt 0 ]] ||
			bad+=" [flow $k: exit $rc, $bytes bytes, $(head -c 150 "$TMPD/bg.$k.err")]"
	done <"$TMPD/bg.rc"
	[[ $n -gt 0 && -z $bad ]]
	check_err $? "$1: background flows ($n):${bad:- none ran}"
	BG_SUMMARY="$n background flows"
}

# fg_flow ID WHAT: a foreground cubic flow must complete with data.
fg_flow()
{
	local bytes

	flow_run "$1" cubic "$FLOW_SECS" -l 8K -N >/dev/null
	check_err $? "$2: flow $1 failed"
	bytes=$(jq -r '.end.sum_received.bytes // 0' "$TMPD/$1.json" 2>/dev/null)
	[[ ${bytes:-0} -gt 0 ]]
	check_err $? "$2: flow $1 moved no data"
}

# policies_on [no-POLICY]: scope 1 and every policy 1 in its netns
# (POLICY_SIDE), but POLICY.
policies_on()
{
	policy_cycle 0 nonzero | awk -v skip="${1#no-}" '$2 != skip' | policies_apply ||
		check_err 1 "scope 1 and every policy 1${1:+ ($1)} failed"
}

# hooks_act WHAT [tbf]: one foreground flow; bbrx's send and receive hook
# counters move.  With tbf the flow leaves through a 10 Mbit tbf on the
# sender's NIC, where skbs wait charged to the socket, so that TSQ
# throttles: without autocork, tsq is the only send-side hook, and a fast
# NIC can complete every skb before TSQ's limit is reached (send +0 once
# on 6.1 cloud, 2026-12-01).  10 Mbit/s is below what even the debug
# kernel's guest sends (11 Mbit/s there on 2026-12-05, where a 100 Mbit
# tbf never queued and send stayed +0).
hooks_act()
{
	local s0 r0 s1 r1

	if [[ ${2:-} == tbf ]]; then
		shape_sender_tbf 10
		check_err $? "$1: tbf on $SND_IF"
	fi
	s0=$(hooks_counters_sum "$SND")
	r0=$(hooks_counters_sum "$RCV")
	fg_flow "act-$RANDOM" "$1"
	[[ ${2:-} == tbf ]] && tc -n "$SND" qdisc del dev "$SND_IF" root
	s1=$(hooks_counters_sum "$SND")
	r1=$(hooks_counters_sum "$RCV")
	[[ $s1 -gt $s0 && $r1 -gt $r0 ]]
	check_err $? "$1: bbrx hook counters did not move (send $s0 -> $s1, receive $r0 -> $r1)"
	ACT_SUMMARY="send +$((s1 - s0)) receive +$((r1 - r0))"
}

# load_all WHAT: load tcp_bbrx with every hook installed.
load_all()
{
	local err

	err=$(bbrx_load 2>&1)
	check_err $? "$1: load failed: $err"
	[[ $(hook_states $ALL_HOOKS) == "$(hooks_all_state installed $ALL_HOOKS)" ]]
	check_err $? "$1: hooks not all installed: $(tr '\n' ';' </proc/net/bbrx_hooks)"
	BBRX_RANGE=$(bbrx_range)
}

unload_ok()
{
	bbrx_unload
	check_err $? "$1: rmmod tcp_bbrx failed"
}

# The events fire without bbrx: a flow, hit counts and trace lines.
events_after_unload()
{
	local what=$1

	echo >"$TRACEFS/trace"
	events_hits "$TMPD/h0"
	fg_flow "after-$RANDOM" "$what"
	events_hits "$TMPD/h1"
	events_fired "$TMPD/h0" "$TMPD/h1" "$what, after rmmod"
	trace_lines_check "$what, after rmmod"
	AFTER_SUMMARY=$EV_SUMMARY
}

##############################################################################
# Tests

events_first()
{
	local w="events first"

	bbrx_unload || check_err 1 "$w: initial rmmod failed"
	events_add
	check_err $? "$w: kprobe events could not be added"
	bg_flow_start
	sleep 1
	load_all "$w"
	ef_lines >"$TMPD/ef-both.txt"
	[[ $(grep -c ' (2) ' "$TMPD/ef-both.txt") -eq $(wc -w <<<"$FTRACE_FUNCS") ]]
	check_err $? "$w: expected 2 ops (event + bbrx) on each function bbrx takes through ftrace ($FTRACE_FUNCS): $(tr '\n' ';' <"$TMPD/ef-both.txt")"
	policies_on
	events_hits "$TMPD/h0"
	hooks_act "$w"
	events_hits "$TMPD/h1"
	events_fired "$TMPD/h0" "$TMPD/h1" "$w, bbrx acting"
	log_info "$w: bbrx acting: counters $ACT_SUMMARY; event hits $EV_SUMMARY"
	unload_then_events "$w"
	log_info "$w: after rmmod: event hits $AFTER_SUMMARY; $BG_SUMMARY across load and unload"
	log_test "kprobe events first, then bbrx loads, acts, unloads: events keep firing, nothing of bbrx left"
}

bbrx_first()
{
	local w="bbrx first" line f bad=

	bbrx_unload || check_err 1 "$w: initial rmmod failed"
	load_all "$w"
	policies_on
	bg_flow_start
	sleep 1
	events_add
	check_err $? "$w: kprobe events could not be added next to bbrx"
	events_hits "$TMPD/h0"
	hooks_act "$w"
	events_hits "$TMPD/h1"
	events_fired "$TMPD/h0" "$TMPD/h1" "$w, bbrx acting"
	log_info "$w: bbrx acting: counters $ACT_SUMMARY; event hits $EV_SUMMARY"

	# Events removed and added again while bbrx stays: bbrx keeps its ops.
	events_del
	check_err $? "$w: kprobe events could not be removed under bbrx"
	ef_lines >"$TMPD/ef.txt"
	for f in $FTRACE_FUNCS; do
		line=$(awk -v f="$f" '$1 == f' "$TMPD/ef.txt")
		[[ $line =~ \(1\).*tcp_bbrx ]] || bad+=" [$f: '${line:-no line}']"
	done
	[[ -z $bad ]]
	check_err $? "$w: after removing the events, bbrx's ops not alone on its functions:$bad"
	hooks_act "$w, events removed"
	events_add
	check_err $? "$w: kprobe events could not be added again"

	unload_then_events "$w"
	ef_lines >"$TMPD/ef.txt"
	[[ ! -s $TMPD/ef.txt ]]
	check_err $? "$w: enabled_functions not empty of the hooked functions at the end: $(tr '\n' ';' <"$TMPD/ef.txt")"
	log_info "$w: after rmmod: event hits $AFTER_SUMMARY; $BG_SUMMARY across load and unload"
	log_test "bbrx first, then kprobe events (removed and re-added under bbrx), bbrx unloads: events keep firing, nothing of bbrx left"
}

klp_calls()
{
	cat "/sys/module/$KLP/parameters/calls" 2>/dev/null || echo 0
}

# klp_wait_transition: the patch is enabled and its transition done.
klp_wait_transition()
{
	local i

	for ((i = 0; i < 300; i++)); do
		[[ $(cat "$KLP_SYS/transition" 2>/dev/null) == 0 ]] && return 0
		sleep 0.2
	done
	return 1
}

# klp_unload: disable, wait for the unpatching transition (the sysfs entry
# goes away when it is done), rmmod.
klp_unload()
{
	local i

	if [[ -d $KLP_SYS ]]; then
		echo 0 >"$KLP_SYS/enabled" 2>/dev/null
		for ((i = 0; i < 300; i++)); do
			[[ -d $KLP_SYS ]] || break
			sleep 0.2
		done
		[[ -d $KLP_SYS ]] && return 1
	fi
	for ((i = 0; i < 50; i++)); do
		[[ -d /sys/module/$KLP ]] || return 0
		rmmod "$KLP" 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# kernel_tcp_push WHAT: nothing patches or redirects tcp_push, a flow works.
kernel_tcp_push()
{
	local line

	line=$(grep -E '^tcp_push ' "$TRACEFS/enabled_functions")
	[[ -z $line ]]
	check_err $? "$1: tcp_push still in enabled_functions: $line"
	fg_flow "kernel-$RANDOM" "$1, kernel tcp_push"
}

livepatch_first()
{
	local w="livepatch first" err c0 c1 line e

	bbrx_unload || check_err 1 "$w: initial rmmod failed"
	err=$(insmod "$KLP_KO" 2>&1)
	check_err $? "$w: insmod $KLP failed: $err"
	klp_wait_transition
	check_err $? "$w: patching transition did not finish"
	bbrx_load 2>"$TMPD/load.err"
	check_err $? "$w: bbrx load failed: $(cat "$TMPD/load.err")"
	line=$(hook_line autocork)
	[[ $line =~ ^autocork\ tcp_push\ refused:\ IPMODIFY\ conflict ]]
	check_err $? "$w: autocork: '$line', expected 'refused: IPMODIFY conflict ...'"
	dmesg_since_start | grep -q 'bbrx: hook autocork (tcp_push) refused: IPMODIFY conflict'
	check_err $? "$w: no dmesg line 'bbrx: hook autocork (tcp_push) refused: IPMODIFY conflict'"
	[[ $(hook_states $(hooks_but autocork)) == "$(hooks_all_state installed $(hooks_but autocork))" ]]
	check_err $? "$w: the other hooks: $(tr '\n' ';' </proc/net/bbrx_hooks)"
	e=$(sysctl_write_err "$SND" autocork 1)
	[[ $e == EOPNOTSUPP ]]
	check_err $? "$w: autocork=1 with the hook refused: $e, expected EOPNOTSUPP"
	policies_on no-autocork
	c0=$(klp_calls)
	hooks_act "$w" tbf
	c1=$(klp_calls)
	[[ $c1 -gt $c0 ]]
	check_err $? "$w: the livepatch's tcp_push did not run during the flow ($c0 -> $c1 calls)"
	log_info "$w: $line; counters $ACT_SUMMARY; livepatch tcp_push calls +$((c1 - c0))"

	unload_ok "$w"
	klp_unload
	check_err $? "$w: livepatch could not be disabled and removed"
	kernel_tcp_push "$w"
	log_test "livepatch on tcp_push first: bbrx refuses autocork (IPMODIFY conflict), the other hooks work; both unload"
}

livepatch_second()
{
	local w="livepatch second" err rc line

	bbrx_unload || check_err 1 "$w: initial rmmod failed"
	load_all "$w"
	policies_on
	err=$(insmod "$KLP_KO" 2>&1)
	rc=$?
	[[ $rc -ne 0 ]]
	check_err $? "$w: insmod $KLP succeeded with bbrx's redirect on tcp_push"
	[[ $err == *"Device or resource busy"* ]]
	check_err $? "$w: insmod error '$err', expected EBUSY"
	dmesg_since_start | grep -q "livepatch: failed to register ftrace handler for function 'tcp_push' (-16)"
	check_err $? "$w: no livepatch line 'failed to register ftrace handler for function 'tcp_push' (-16)'"
	[[ ! -e $KLP_SYS && ! -d /sys/module/$KLP ]]
	check_err $? "$w: the failed livepatch left $KLP_SYS or /sys/module/$KLP"
	[[ $(hook_state autocork) == installed ]]
	check_err $? "$w: autocork after the failed livepatch: $(hook_line autocork)"
	line=$(grep -E '^tcp_push ' "$TRACEFS/enabled_functions")
	[[ $line =~ \(1\).*bbrx_hook_thunk.*tcp_bbrx ]]
	check_err $? "$w: tcp_push in enabled_functions: '$line', expected bbrx's redirect alone"
	hooks_act "$w"
	log_info "$w: insmod: ${err##*: }; counters $ACT_SUMMARY"

	unload_ok "$w"
	line=$(grep -E '^tcp_push ' "$TRACEFS/enabled_functions")
	[[ -z $line ]]
	check_err $? "$w: tcp_push in enabled_functions after rmmod tcp_bbrx: $line"
	err=$(insmod "$KLP_KO" 2>&1)
	check_err $? "$w: the livepatch does not load after rmmod tcp_bbrx: $err"
	klp_wait_transition
	check_err $? "$w: patching transition did not finish"
	klp_unload
	check_err $? "$w: livepatch could not be disabled and removed"
	kernel_tcp_push "$w"
	log_test "bbrx first: the livepatch fails to enable (EBUSY, no oops), enables after rmmod tcp_bbrx; both unload"
}

coexist_cleanup()
{
	[[ -n $BG_PID ]] && bg_kill "$BG_PID"
	[[ -n ${TRACEFS:-} ]] && events_del
	[[ -n ${TRACEFS:-} && -n $TRACE_BUF_KB ]] &&
		echo "$TRACE_BUF_KB" >"$TRACEFS/buffer_size_kb" 2>/dev/null
	[[ -d /sys/module/$KLP ]] && klp_unload
	cleanup
}
trap coexist_cleanup EXIT

require_root
require_command iperf3 jq ip insmod rmmod
tracefs_find kprobe_events || ksft_exit_skip "no tracefs with kprobe_events"
[[ -r $TRACEFS/enabled_functions ]] || ksft_exit_skip "no $TRACEFS/enabled_functions (CONFIG_DYNAMIC_FTRACE)"
[[ -r $KLP_KO ]] || ksft_exit_skip "$KLP_KO not built (make -C selftests with kernel headers)"
vm=$(modinfo -F vermagic "$KLP_KO" 2>/dev/null)
[[ $vm == "$(uname -r) "* ]] ||
	ksft_exit_skip "$KLP_KO built for '${vm%% *}', running $(uname -r)"
[[ -d /sys/kernel/livepatch ]] || ksft_exit_skip "no /sys/kernel/livepatch (CONFIG_LIVEPATCH)"
[[ -d /sys/module/$KLP ]] && ksft_exit_skip "$KLP is already loaded"
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_topo
if ! hooked_funcs_read; then
	RET=1 retmsg="no hooked function read from /proc/net/bbrx_hooks and enabled_functions: $(cat /proc/net/bbrx_hooks)"
	log_test "read the functions tcp_bbrx hooks"
	tests_done
	exit 1
fi
# Room for a flow's events in the trace buffer (restored at exit).
TRACE_BUF_KB=$(cat "$TRACEFS/buffer_size_kb")
[[ $TRACE_BUF_KB =~ ^[0-9]+$ ]] || TRACE_BUF_KB=
echo 8192 >"$TRACEFS/buffer_size_kb"
iperf3_server_start || exit 1
ip netns exec "$RCV" iperf3 -s -p "$BG_PORT" >"$TMPD/iperf3-bg-server.log" 2>&1 &
bg_track $!

tests_run
bbrx_module_loaded || bbrx_load
tests_done
exit $EXIT_STATUS
