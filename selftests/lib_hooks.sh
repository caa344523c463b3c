#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Helpers shared by the hook tests (hook_*.sh), sourced after lib.sh.

# hook_state NAME: the state word of hook NAME in /proc/net/bbrx_hooks
# (installed, refused, disabled, not-installed).
hook_state()
{
	awk -v h="$1" '$1 == h { s = $3; sub(/:$/, "", s); print s }' /proc/net/bbrx_hooks 2>/dev/null
}

# hooks_map FN NAME...: FN NAME for each NAME, joined by "/".
hooks_map()
{
	local fn=$1 h out=

	shift
	for h in "$@"; do
		out+="${out:+/}$("$fn" "$h")"
	done
	echo "$out"
}

# hook_states NAME...: the states of the named hooks joined by "/"
# (installed/installed/...).
hook_states()
{
	hooks_map hook_state "$@"
}

# BBRX_EXPECT_REFUSED: hooks the kernel under test is known to refuse,
# space separated, or "all" (set by an "env" line of scripts/ci/lanes.conf
# for a kernel whose docs/kernels.md entry says why; empty: every hook
# installs). BBRX_EXPECT_REASON: an ERE their reasons must match (default:
# any reason), e.g. "arm64: verifier not implemented".
# hook_expected NAME: the state hook NAME must have on this kernel.
hook_expected()
{
	if hook_expected_refused "$1"; then
		echo refused
	else
		echo installed
	fi
}

# hook_expected_refused NAME: BBRX_EXPECT_REFUSED names NAME (or is all).
hook_expected_refused()
{
	[[ ${BBRX_EXPECT_REFUSED:-} == all || " ${BBRX_EXPECT_REFUSED:-} " == *" $1 "* ]]
}

# hook_expected_reason: the ERE an expected refusal's reason matches.
hook_expected_reason()
{
	echo "${BBRX_EXPECT_REASON:-.}"
}

# hooks_expected NAME...: hook_expected of each, joined by "/".
hooks_expected()
{
	hooks_map hook_expected "$@"
}

# hooks_usable NAME...: the named hooks this kernel must install.
hooks_usable()
{
	local h out=

	for h in "$@"; do
		[[ $(hook_expected "$h") == installed ]] && out+="${out:+ }$h"
	done
	echo "$out"
}

# BBRX_HOOKS: the hooks tcp_bbrx must have (module/bbrx_hooks.h),
# written out here on purpose as the tests' oracle: hook_refusal.sh checks
# the loaded module's list against it in both directions, so a hook
# dropped from or added to the module fails there with the difference.
# No other test uses it: they read the loaded module's list at run time
# (all_hooks_read, bbrx_hook_names).
# shellcheck disable=SC2034  # read by hook_refusal.sh
BBRX_HOOKS="autocork tsq rcvbuf rcvbuf_grow delack"

# The hooks each policy sysctl needs: a non-zero value is refused
# (EOPNOTSUPP) unless all of them are installed. Also an oracle (the
# module's BBRX_POLICY() lines): hook_refusal.sh checks that it names
# every hook of BBRX_HOOKS exactly once.
declare -A POLICY_HOOKS=([autocork]=autocork [tsq]=tsq [rcvbuf]="rcvbuf rcvbuf_grow"
			 [delack]=delack)

# POLICY_SIDE: which end's netns each policy acts in, as the name of the
# topology's variable (SND or RCV): the send-path hooks act on the
# sender's sockets, the receive-path ones on the receiver's.
declare -A POLICY_SIDE=([autocork]=SND [tsq]=SND [rcvbuf]=RCV [delack]=RCV)

# POLICY_COUNTERS: the /proc/net/bbrx_stat counters of each policy's
# hooks (module/bbrx_hooks.h's BBRX_HOOK_STAT lines), each of which
# counts an act once: RcvbufGrownOfo, a part of RcvbufGrown, is not one.
# The bench records them per flow (scripts/bench/bench-matrix.sh).
declare -A POLICY_COUNTERS=([autocork]="AutocorkCorked AutocorkDeclined"
			    [tsq]="TsqThrottled TsqSingleSkb TsqWithheld"
			    [rcvbuf]="RcvbufSized RcvbufGrown"
			    [delack]="DelackPushMarked DelackPushSuppressed")

# BBRX_DECISION_TABLE: the decisions the hooks report, one line
# "POLICY VALUE DECISION COUNTER WORKLOAD": with net.ipv4.bbrx.POLICY =
# VALUE (scope 1 in policy_ns POLICY), a flow of WORKLOAD makes the
# policy's hooks emit bbrx:bbrx_POLICY events with decision=DECISION, each
# also counted by COUNTER in /proc/net/bbrx_stat (module/bbrx_trace.h,
# enum bbrx_trace_decision; module/bbrx_hooks.h). Workloads, from the
# sender: small_writes (500-byte TCP_NODELAY writes into a 100 Mbit/s tbf
# on its NIC, so skbs stay charged to the socket), bulk, psh (1448-byte
# TCP_NODELAY writes) and late_bulk (bulk over TX completions that come
# late, late_completion_setup). bbrx_trace.sh checks the module's
# decisions against it in both directions.
BBRX_DECISION_TABLE="\
autocork 1 corked AutocorkCorked small_writes
autocork 3 declined AutocorkDeclined small_writes
tsq 1 single_skb TsqSingleSkb late_bulk
tsq 2 withheld TsqWithheld late_bulk
rcvbuf 1 sized RcvbufSized bulk
rcvbuf 1 grown RcvbufGrown bulk
delack 1 push_marked DelackPushMarked psh
delack 2 suppressed DelackPushSuppressed psh"

# policy_ns POLICY: the netns POLICY acts in (POLICY_SIDE).
policy_ns()
{
	local side=${POLICY_SIDE[$1]:?"no POLICY_SIDE for policy $1"}

	echo "${!side}"
}

# policy_cycle N [nonzero]: the policies of step N of a load/unload loop,
# one "NETNS POLICY VALUE" line each (BBRX_POLICY_TABLE's order). Level
# P = N % (M + 1), M the largest policy maximum, and each policy
# min(P, its maximum): P = 0 is the kernel's behaviour everywhere. With
# nonzero, 1 + N % (its maximum): every policy live, each value in turn.
# A policy whose hooks this kernel refuses (policies_usable) stays 0.
policy_cycle()
{
	local n=$1 nonzero=${2:-} p max lvl v

	lvl=$((n % ($(awk '$4 > m { m = $4 } END { print m + 0 }' <<<"$BBRX_POLICY_TABLE") + 1)))
	while read -r p _ _ max; do
		if [[ $nonzero == nonzero ]]; then
			v=$((1 + n % max))
		else
			v=$((lvl < max ? lvl : max))
		fi
		[[ -n $(policies_usable "$p") ]] || v=0
		echo "$(policy_ns "$p") $p $v"
	done <<<"$BBRX_POLICY_TABLE"
}

# policy_label: policy_cycle's lines on stdin as "a1/t2/r1/d0" (each
# policy's initial and value), for a test's table.
policy_label()
{
	awk '{ printf "%s%s%s", sep, substr($2, 1, 1), $3; sep = "/" } END { print "" }'
}

# policies_apply: policy_cycle's lines on stdin; scope 1 in each netns
# named, then each policy. Returns 1 at the first write that fails.
policies_apply()
{
	local ns p v seen=' '

	while read -r ns p v; do
		if [[ $seen != *" $ns "* ]]; then
			bbrx_sysctl_set "$ns" scope 1 || return 1
			seen+="$ns "
		fi
		bbrx_sysctl_set "$ns" "$p" "$v" || return 1
	done
}

# policies_usable POLICY...: the named policies whose hooks this kernel
# must all install.
policies_usable()
{
	local p out=

	for p in "$@"; do
		# shellcheck disable=SC2086 # a list of hook names
		[[ $(hooks_usable ${POLICY_HOOKS[$p]}) == "${POLICY_HOOKS[$p]}" ]] &&
			out+="${out:+ }$p"
	done
	echo "$out"
}

# hook_names: every hook of the loaded module (the first field of each
# line of /proc/net/bbrx_hooks), space separated; empty when tcp_bbrx is
# not loaded.
hook_names()
{
	awk '{ printf "%s%s", sep, $1; sep = " " } END { print "" }' /proc/net/bbrx_hooks 2>/dev/null
}

# bbrx_hook_names: hook_names, but returns 1 (and prints why on stderr)
# when the loaded module lists no hook.
bbrx_hook_names()
{
	local names

	names=$(hook_names)
	if [[ -z $names ]]; then
		if bbrx_module_loaded; then
			echo "tcp_bbrx is loaded but /proc/net/bbrx_hooks lists no hook" >&2
		else
			echo "tcp_bbrx is not loaded: no /proc/net/bbrx_hooks" >&2
		fi
		return 1
	fi
	echo "$names"
}

# all_hooks_read: ALL_HOOKS = every hook of tcp_bbrx (bbrx_hook_names),
# loading the module (bbrx_load) if it is not loaded. A test whose hooks
# cannot be read fails here (exit 1) rather than iterate over an empty
# list.
all_hooks_read()
{
	local err

	bbrx_module_loaded || err=$(bbrx_load 2>&1)
	if ! ALL_HOOKS=$(bbrx_hook_names 2>&1); then
		RET=1 retmsg="the hooks of tcp_bbrx: $ALL_HOOKS${err:+ (load: $err)}"
		ALL_HOOKS=
		log_test "read the hooks of tcp_bbrx"
		tests_done
		exit 1
	fi
}

# hooks_but NAME...: ALL_HOOKS (all_hooks_read) without the named hooks.
hooks_but()
{
	local h out=

	for h in $ALL_HOOKS; do
		[[ " $* " == *" $h "* ]] || out+="${out:+ }$h"
	done
	echo "$out"
}

# hooks_all_state STATE NAME...: STATE once per NAME, joined by "/" as
# hook_states prints them (installed/installed/...).
hooks_all_state()
{
	local st=$1 h out=

	shift
	for h in "$@"; do
		out+="${out:+/}$st"
	done
	echo "$out"
}

# hook_line NAME: the whole line of hook NAME.
hook_line()
{
	awk -v h="$1" '$1 == h' /proc/net/bbrx_hooks 2>/dev/null
}

# BBRX_REQUIRE_HOOKS: hooks the kernel under test must install, space
# separated, or "all" (every hook /proc/net/bbrx_hooks lists but those of
# BBRX_EXPECT_REFUSED). Unset or empty (a kernel CI, a host of one's own):
# a test that needs a hook this kernel refused, or that the module
# parameter disable= left out, skips (exit 4) with the reason. scripts/
# lanes.conf sets it for every booted kernel ("env" lines), so that in
# make check a refusal fails.
# hook_required NAME: NAME is in BBRX_REQUIRE_HOOKS.
hook_required()
{
	local r=${BBRX_REQUIRE_HOOKS:-}

	if [[ $r == all ]]; then
		! hook_expected_refused "$1"
	else
		[[ " $r " == *" $1 "* ]]
	fi
}

# hooks_require_check: every name in BBRX_REQUIRE_HOOKS is a hook of the
# loaded module, and none is also expected refused; exits 1 otherwise.
hooks_require_check()
{
	local h known

	[[ -z ${BBRX_REQUIRE_HOOKS:-} || $BBRX_REQUIRE_HOOKS == all ]] && return 0
	known=" $(hook_names) "
	[[ $known == " " ]] && return 0
	for h in $BBRX_REQUIRE_HOOKS; do
		if [[ $known != *" $h "* ]]; then
			echo "# BBRX_REQUIRE_HOOKS: '$h' is not a hook of tcp_bbrx (hooks:$known; or all)"
			exit 1
		fi
		if hook_expected_refused "$h"; then
			echo "# BBRX_REQUIRE_HOOKS and BBRX_EXPECT_REFUSED both name '$h'"
			exit 1
		fi
	done
}

# hook_why NAME: why hook NAME is not installed: its status line and the
# module's last kernel log line about it (the verifier's reason, or the
# module parameter that disabled it).
hook_why()
{
	local line msg

	line=$(hook_line "$1")
	msg=$(dmesg 2>/dev/null | grep -F "bbrx: hook $1 (" | tail -n 1 | sed 's/^\[[^]]*\] //')
	echo "${line:-$1: no status line}${msg:+ (dmesg: $msg)}"
}

# require_hooks NAME...: tcp_bbrx loaded with the named hooks installed
# (reloaded with $BBRX_HOOK_PARAMS if one is not). A hook still not
# installed because the kernel refused it (its verifier, ftrace) or
# disable= left it out skips the test with the reason, unless
# BBRX_REQUIRE_HOOKS names it: then, as for any other state (the module
# did not load), the test fails.
require_hooks()
{
	local h st bad= skip=

	hooks_require_check
	for h in "$@"; do
		[[ $(hook_state "$h") == installed ]] || bad=1
	done
	[[ -z $bad ]] && return 0
	bbrx_reload >/dev/null 2>&1
	hooks_require_check
	bad=
	for h in "$@"; do
		st=$(hook_state "$h")
		[[ $st == installed ]] && continue
		if ! hook_required "$h" && [[ $st =~ ^(refused|disabled|inactive)$ ]]; then
			skip+="${skip:+; }$(hook_why "$h")"
		elif hook_required "$h"; then
			bad+=" [$(hook_why "$h"); required by BBRX_REQUIRE_HOOKS=$BBRX_REQUIRE_HOOKS]"
		else
			bad+=" [$(hook_why "$h")]"
		fi
	done
	if [[ -n $bad ]]; then
		RET=1 retmsg="hooks not installed:$bad"
		log_test "hooks $* installed"
		tests_done
		exit 1
	fi
	[[ -z $skip ]] || ksft_exit_skip "a hook this test needs is not installed on this kernel: $skip"
}

# The /proc/net/bbrx_stat counters that move only when a hook acts,
# those of every policy (POLICY_COUNTERS).
HOOK_COUNTERS_RE="^($(for p in "${!POLICY_COUNTERS[@]}"; do echo "${POLICY_COUNTERS[$p]}"; done |
	tr ' ' '\n' | sort | paste -sd '|'))\$"

# hooks_counters_sum NS: sum of the hook counters of the netns (one read).
hooks_counters_sum()
{
	bbrx_stat_all "$1" | awk -v re="$HOOK_COUNTERS_RE" '{
		for (i = 1; i <= NF; i++) {
			split($i, p, "=")
			if (p[1] ~ re)
				s += p[2]
		}
	} END { print s + 0 }'
}

# hooks_counters_list NS: "Name=value ..." of the netns' non-zero hook
# counters, or "none".
hooks_counters_list()
{
	bbrx_stat_all "$1" | awk -v re="$HOOK_COUNTERS_RE" '{
		for (i = 1; i <= NF; i++) {
			split($i, p, "=")
			if (p[1] ~ re && p[2] != 0)
				s = s (s == "" ? "" : " ") $i
		}
	} END { print (s == "" ? "none" : s) }'
}

# hooks_after_segs SEGS: wait until the sender netns has sent SEGS more
# segments (TcpOutSegs) than at the call, then HW_SND / HW_RCV = the
# sender's and the receiver's hook counter sums.  Traffic, not time,
# bounds the wait, so a slower guest only waits longer; BBRX_HOOK_WAIT_MAX
# s (300) only guard a hang (no flow running at all, returns 1).
hooks_after_segs()
{
	local segs=$1 s0 s t0=$SECONDS

	s0=$(snmp_get "$SND" TcpOutSegs)
	while :; do
		s=$(snmp_get "$SND" TcpOutSegs)
		((s - s0 >= segs)) && break
		((SECONDS - t0 < ${BBRX_HOOK_WAIT_MAX:-300})) || break
		sleep 0.2
	done
	HW_SND=$(hooks_counters_sum "$SND")
	HW_RCV=$(hooks_counters_sum "$RCV")
	((s - s0 >= segs))
}
