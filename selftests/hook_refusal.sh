#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Hook refusal: the test-only module parameter fault_verify=HOOK makes that
# hook's verifier expect a pattern that is not in the kernel text, as a
# kernel build with a different shape would.  For each hook: the module
# still loads, the hook is refused with its reason in /proc/net/bbrx_hooks and
# one dmesg line, every other hook is installed, a non-zero value of the
# policy that needs the refused hook fails with EOPNOTSUPP (value
# unchanged) while out-of-range values still fail with EINVAL, another
# policy still takes a non-zero value, and bbrx still works (a socket takes
# it).  Also: disable=autocork,tsq reports both "disabled" and refuses their
# policies; disable=all installs none and bbrx still works; an unknown hook
# name fails the load; a plain load (the module's default) installs every
# hook, and the delack verifier reports the PSH mark's single way in.
# First of all: the module's hooks (/proc/net/bbrx_hooks) are exactly
# BBRX_HOOKS of lib_hooks.sh, the tests' own list, each with a refusal
# case here and a policy of POLICY_HOOKS; the other hook tests read the
# module's list, so this is where a hook dropped or added shows.
# On a kernel known to refuse some hooks (BBRX_EXPECT_REFUSED, lib_hooks.sh)
# those must be refused by their own verifiers instead.
# verify_selftest=1: the tsq, delack, autocork and rcvbuf verifiers'
# decoding, fed code no booted kernel shows (a frame-setup prologue, the
# socket in a copied register, the PSH test in %r8, stores reached by a
# jump past an epilogue; a call before the load, the socket overwritten, a
# test of FIN instead of PSH, a tcp_push reading another field, calling or
# jumping elsewhere, a write of sk_rcvbuf), accepts and refuses as it
# must, each refusal naming the instruction or bit.
# fault_verify=autocork takes max_window out of the fields bbrx's tcp_push
# uses, so the kernel's tcp_push is refused for reading it; likewise
# rcvq_space.space for rcvbuf_grow; fault_verify=rcvbuf looks for
# sk_rcvbuf at an offset no build has. A plain load reports where each
# verifier found its facts.
# fault_calls=autocork: the load-time check that a redirect's replacement
# calls nothing that can block (a tail jump into the kernel's transmit path,
# on PREEMPT_RT too) refuses autocork the same way.
# The module is left loaded.

ALL_TESTS="
	hooks_as_expected
	refuse_tsq
	refuse_autocork
	refuse_rcvbuf
	refuse_rcvbuf_grow
	refuse_delack
	refuse_calls_autocork
	disable_both
	disable_all
	unknown_hook_name
	plain_load_installs_all
	delack_sole_entry
	bodies_verified
	verifier_known_code
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

# The policy sysctl a hook serves (POLICY_HOOKS turned round), and each
# policy's largest value (BBRX_POLICY_TABLE, lib_module.sh).
declare -A POLICY_OF POLICY_MAX
for pol in "${!POLICY_HOOKS[@]}"; do
	for h in ${POLICY_HOOKS[$pol]}; do
		POLICY_OF[$h]+="${POLICY_OF[$h]:+ }$pol"
	done
done
while read -r pol _ _ max; do
	POLICY_MAX[$pol]=$max
done <<<"$BBRX_POLICY_TABLE"
POLICIES=$(bbrx_policy_names)
NS=hk-$SFX
EXTRA_NETNS=$NS
PORT=5401
SINK_PID=

# netns_up: a fresh netns (created after the load, so it has this load's
# per-netns state) with a discard sink on its loopback.
netns_up()
{
	ip netns add "$NS" || return 1
	ip -n "$NS" link set lo up
	ip netns exec "$NS" "$BIN_DIR/cc_setsockopt" -l "$PORT" >"$TMPD/sink.log" 2>&1 &
	SINK_PID=$!
	bg_track $SINK_PID
	listen_wait "$NS" "$PORT"
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
	cc=$(ip netns exec "$NS" "$BIN_DIR/cc_setsockopt" bbrx 127.0.0.1 "$PORT" 262144 2>&1)
	check_err $? "bbrx connection failed: $cc"
	[[ $cc == bbrx ]]
	check_err $? "socket reports congestion control '$cc', not bbrx"
	after=$(bbrx_stat SocketsInit "$NS")
	fcmp "${after:-0}" '>' "${before:-0}"
	check_err $? "SocketsInit did not move ($before -> $after)"
}

# hooks_as_expected: the loaded module's hooks are BBRX_HOOKS, no more, no
# fewer, each once; every one has a refuse_HOOK case in ALL_TESTS and
# serves exactly one policy of POLICY_HOOKS, and POLICY_HOOKS names no
# other hook. MODULE_HOOKS was read after a plain load (below).
hooks_as_expected()
{
	local h n missing='' extra='' dup='' norefuse='' pol=''

	for h in $BBRX_HOOKS; do
		[[ " $MODULE_HOOKS " == *" $h "* ]] || missing+=" $h"
		[[ $ALL_TESTS =~ [[:space:]]refuse_${h}[[:space:]] ]] || norefuse+=" $h"
		n=$(wc -w <<<"${POLICY_OF[$h]:-}")
		((n == 1)) || pol+=" $h (${POLICY_OF[$h]:-no policy})"
	done
	for h in $MODULE_HOOKS; do
		[[ " $BBRX_HOOKS $extra " == *" $h "* ]] || extra+=" $h"
		n=$(tr ' ' '\n' <<<"$MODULE_HOOKS" | grep -cxF -- "$h")
		((n == 1)) || [[ " $dup " == *" $h "* ]] || dup+=" $h"
	done
	for h in "${!POLICY_OF[@]}"; do
		[[ " $BBRX_HOOKS " == *" $h "* ]] || pol+=" $h (not in BBRX_HOOKS)"
	done
	[[ -z $missing$extra$dup$norefuse$pol ]]
	check_err $? "$(printf '%s' \
		"${missing:+in BBRX_HOOKS (lib_hooks.sh), not in tcp_bbrx:$missing; }" \
		"${extra:+in tcp_bbrx, not in BBRX_HOOKS (lib_hooks.sh):$extra; }" \
		"${dup:+listed twice in /proc/net/bbrx_hooks:$dup; }" \
		"${norefuse:+no refuse_HOOK case in hook_refusal.sh:$norefuse; }" \
		"${pol:+not one policy each in POLICY_HOOKS (lib_hooks.sh):$pol; }" \
		)module: $MODULE_HOOKS; expected: $BBRX_HOOKS"
	log_test "the module's hooks are BBRX_HOOKS of lib_hooks.sh, each with a refusal case and a policy" \
		"$MODULE_HOOKS"
}

# policy_checks REFUSED OK_POLICY: sysctl behaviour with hook REFUSED not
# installed; policy OK_POLICY (may be empty) has its hooks installed.
policy_checks()
{
	local bad=$1 good=$2 pol=${POLICY_OF[$1]} max e v names h

	max=${POLICY_MAX[$pol]}
	for ((v = 1; v <= max; v++)); do
		e=$(sysctl_write_err "$NS" "$pol" "$v")
		[[ $e == EOPNOTSUPP ]]
		check_err $? "$pol=$v with hook $bad refused: $e, expected EOPNOTSUPP"
	done
	v=$(bbrx_sysctl_get "$NS" "$pol")
	[[ $v == 0 ]]
	check_err $? "$pol is '$v' after refused writes, expected 0"
	e=$(sysctl_write_err "$NS" "$pol" 0)
	[[ $e == OK ]]
	check_err $? "$pol=0 with hook $bad refused: $e"
	for v in $((max + 1)) -1 x; do
		e=$(sysctl_write_err "$NS" "$pol" "$v")
		[[ $e == EINVAL ]]
		check_err $? "$pol=$v: $e, expected EINVAL"
	done
	# the line names the first of the policy's hooks not installed: $bad,
	# or one this kernel refuses anyway (BBRX_EXPECT_REFUSED)
	names=$bad
	for h in ${POLICY_HOOKS[$pol]}; do
		! hook_expected_refused "$h" || names+="|$h"
	done
	dmesg_since_start | grep -qE "net.ipv4.bbrx.$pol=.* needs hook ($names),"
	check_err $? "no dmesg line for the refused $pol policy write naming $names"
	if [[ -n $good ]]; then
		e=$(sysctl_write_err "$NS" "$good" 1)
		[[ $e == OK ]]
		check_err $? "$good=1 with its hooks installed: $e"
		sysctl_write_err "$NS" "$good" 0 >/dev/null
	fi
}

# fault_case HOOK OK_POLICY REASON_RE [PARAM]: load with PARAM=HOOK
# (default fault_verify) and check; every other hook must be installed and
# OK_POLICY settable.
fault_case()
{
	local hook=$1 good=$2 re=$3 param=${4:-fault_verify} line err other

	# A kernel that refuses HOOK itself (BBRX_EXPECT_REFUSED): its own
	# verifier's refusal, with the reason expected there
	# (BBRX_EXPECT_REASON); OK_POLICY one whose hooks install and that
	# does not need HOOK.
	[[ $(hook_expected "$hook") == refused ]] && re=$(hook_expected_reason)
	if [[ -z $(policies_usable "$good") ]]; then
		good=
		# shellcheck disable=SC2086  # a list of policies
		for other in $(policies_usable $POLICIES); do
			[[ " ${POLICY_HOOKS[$other]} " == *" $hook "* ]] || { good=$other; break; }
		done
	fi
	FAULT_GOOD=${good:-no other policy}
	err=$(bbrx_reload "$param=$hook" 2>&1)
	check_err $? "load with $param=$hook failed: $err"
	bbrx_module_loaded
	check_err $? "module not loaded with $param=$hook"
	line=$(hook_line "$hook")
	[[ $line =~ ^$hook\ [^\ ]+\ refused:\ .+ ]]
	check_err $? "bbrx_hooks: '$line', expected '$hook <symbol> refused: <reason>'"
	[[ $line =~ $re ]]
	check_err $? "refusal reason '$line' does not match /$re/"
	for other in $MODULE_HOOKS; do
		[[ $other == "$hook" ]] && continue
		[[ $(hook_state "$other") == $(hook_expected "$other") ]]
		check_err $? "another hook: '$(hook_line "$other")', expected $(hook_expected "$other")"
	done
	dmesg_since_start | grep -qE "bbrx: hook $hook \([^)]+\) refused: "
	check_err $? "no dmesg line 'bbrx: hook $hook (...) refused: ...'"
	netns_up
	check_err $? "netns with a sink could not be set up"
	policy_checks "$hook" "$good"
	bbrx_works
	netns_down
	log_info "$param=$hook: $line"
}

refuse_tsq()
{
	fault_case tsq autocork "(no load of|before a load of) sk_pacing_rate from rdi"
	log_test "fault_verify=tsq: tsq refused with reason, EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

refuse_autocork()
{
	fault_case autocork tsq "tcp_push\\+0x[0-9a-f]+ \\([0-9a-f ]+\\) (reads|takes the address of) sk\\+0x[0-9a-f]+, which bbrx's tcp_push does not"
	log_test "fault_verify=autocork: autocork refused with reason, EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

refuse_rcvbuf()
{
	fault_case rcvbuf delack "tcp_init_transfer has no read of sk_rcvbuf"
	log_test "fault_verify=rcvbuf: rcvbuf refused with reason, EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

refuse_rcvbuf_grow()
{
	fault_case rcvbuf_grow delack "(tcp_rcv_space_adjust|tcp_rcvbuf_grow)\\+0x[0-9a-f]+ \\([0-9a-f ]+\\) (reads|writes) sk\\+0x[0-9a-f]+, which bbrx's (tcp_rcv_space_adjust|tcp_rcvbuf_grow) does not"
	log_test "fault_verify=rcvbuf_grow: refused, rcvbuf policy EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

refuse_delack()
{
	fault_case delack rcvbuf "PSH mark .* not found"
	log_test "fault_verify=delack: delack refused with reason, EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

refuse_calls_autocork()
{
	fault_case autocork tsq "calls .* \\(may block on RT\\)" fault_calls
	log_test "fault_calls=autocork: replacement's call check refuses, EOPNOTSUPP, $FAULT_GOOD and bbrx work"
}

# expect_states STATE HOOK...: each HOOK has STATE in /proc/net/bbrx_hooks.
expect_states()
{
	local state=$1 h; shift

	for h in "$@"; do
		[[ $(hook_state "$h") == "$state" ]]
		check_err $? "bbrx_hooks: '$(hook_line "$h")', expected $state"
	done
}

disable_both()
{
	local err

	err=$(bbrx_reload disable=autocork,tsq 2>&1)
	check_err $? "load with disable=autocork,tsq failed: $err"
	expect_states disabled autocork tsq
	netns_up
	check_err $? "netns with a sink could not be set up"
	policy_checks autocork ""
	policy_checks tsq ""
	bbrx_works
	netns_down
	log_test "disable=autocork,tsq: both disabled, policies EOPNOTSUPP, bbrx works"
}

disable_all()
{
	local err h

	err=$(bbrx_reload disable=all 2>&1)
	check_err $? "load with disable=all failed: $err"
	# shellcheck disable=SC2086  # word-split hook list
	expect_states disabled $MODULE_HOOKS
	netns_up
	check_err $? "netns with a sink could not be set up"
	for h in $POLICIES; do
		policy_checks "$h" ""
	done
	bbrx_works
	netns_down
	log_test "disable=all: no hook installed, every policy EOPNOTSUPP, bbrx works"
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

plain_load_installs_all()
{
	local err h

	err=$(bbrx_unload && bbrx_load 2>&1)
	check_err $? "plain load failed: $err"
	for h in $MODULE_HOOKS; do
		expect_states "$(hook_expected "$h")" "$h"
	done
	netns_up
	check_err $? "netns with a sink could not be set up"
	# shellcheck disable=SC2086  # a list of policies
	for h in $(policies_usable $POLICIES); do
		[[ $(sysctl_write_err "$NS" "$h" 1) == OK ]]
		check_err $? "$h=1 refused with every hook installed"
	done
	bbrx_works
	netns_down
	log_test "plain load: every hook installed but the expected refusals (${BBRX_EXPECT_REFUSED:-none}), policies settable" \
		"$(tr '\n' ';' </proc/net/bbrx_hooks)"
}

# The delack verifier decodes tcp_event_data_recv() and accepts the PSH
# mark only when the PSH test's branch is its one way in (no fall-through,
# no other branch, no indirect jmp), and says so at load.
delack_sole_entry()
{
	local line

	if [[ $(hook_expected delack) == refused ]]; then
		line=$(dmesg_since_start | grep -E 'bbrx: hook delack \([^)]+\) refused: ' | tail -n 1)
		[[ -n $line && ${line#*refused: } =~ $(hook_expected_reason) ]]
		check_err $? "delack expected refused on this kernel for /$(hook_expected_reason)/: '${line:-no refusal line in dmesg}'"
		log_test "delack verifier: refused on this kernel as expected" "${line#*refused: }"
		return
	fi
	line=$(dmesg_since_start | grep 'bbrx: delack: ' | tail -n 1)
	[[ $line =~ "only after the PSH test of %"[a-z0-9]+" at +0x" ]]
	check_err $? "no single-entry report at load: ${line:-none}"
	log_test "delack verifier: the PSH mark is reached only from the PSH test" \
		"${line#*marks PUSHED for }"
}

# The autocork, rcvbuf_grow and rcvbuf verifiers decode the whole of their
# target and say at load where they found each fact bbrx relies on.
# body_report HOOK RE: the plain load's dmesg line of HOOK matches RE.
body_report()
{
	local hook=$1 re=$2 line

	if [[ $(hook_expected "$hook") == refused ]]; then
		line=$(dmesg_since_start | grep -E "bbrx: hook $hook \([^)]+\) refused: " | tail -n 1)
		[[ -n $line && ${line#*refused: } =~ $(hook_expected_reason) ]]
		check_err $? "$hook expected refused on this kernel for /$(hook_expected_reason)/: '${line:-no refusal line in dmesg}'"
		log_info "$hook: refused as expected: ${line#*refused: }"
		return
	fi
	line=$(dmesg_since_start | grep "bbrx: $hook: " | tail -n 1)
	[[ $line =~ $re ]]
	check_err $? "no $hook body report at load: ${line:-none}"
	log_info "${line#*bbrx: }"
}

bodies_verified()
{
	# 19 facts; 18 on 5.10, whose tcp_should_autocork() has no EOR rule
	if [[ $(uname -r) == 5.10.* ]]; then
		body_report autocork "tcp_push \([0-9]+ bytes\) does what bbrx's does \(no EOR rule: [^)]+\); facts at( 0x[0-9a-f]+){18}$"
	else
		body_report autocork "tcp_push \([0-9]+ bytes\) does what bbrx's does; facts at( 0x[0-9a-f]+){19}$"
	fi
	body_report rcvbuf_grow "(tcp_rcv_space_adjust|tcp_rcvbuf_grow) \([0-9]+ bytes\) does what bbrx's does; facts at( 0x[0-9a-f]+){13,}$"
	body_report rcvbuf "tcp_init_transfer \([0-9]+ bytes\) reads sk_rcvbuf at 0x[0-9a-f]+, then stores window_clamp at"
	log_test "autocork, rcvbuf_grow, rcvbuf verifiers: each target's whole body does what bbrx relies on"
}

# verifier_known_code: verify_selftest=1 runs the verifiers on known code;
# every case must pass and the refusals must say what they refused.
verifier_known_code()
{
	local out sum n

	bbrx_unload
	check_err $? "rmmod failed"
	bbrx_load verify_selftest=1
	check_err $? "load with verify_selftest=1 failed"
	out=$(dmesg_since_start | grep -o 'bbrx: verify_selftest: .*')
	# an architecture without verifiers (arm64) says so, for the reason
	# its hooks are expected refused, and tests no decoding
	if [[ $out == *"nothing to test"* ]]; then
		[[ ${BBRX_EXPECT_REFUSED:-} == all && $out =~ $(hook_expected_reason) ]]
		check_err $? "'$out' on a kernel expected to install hooks (BBRX_EXPECT_REFUSED=${BBRX_EXPECT_REFUSED:-})"
		log_test "verifiers on known code: none on this architecture" "${out#bbrx: verify_selftest: }"
		return
	fi
	sum=$(grep -E 'verify_selftest: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	n=$(grep -c ': ok' <<<"$out")
	[[ $sum == *" $n passed, 0 failed" ]] && ((n >= 21))
	check_err $? "summary '${sum:-none}', $n cases ok: $(grep FAILED <<<"$out" | head -n 3)"
	grep -q 'unaccounted instruction at +0x[0-9a-f]* (e8 00 00 00 00)' <<<"$out"
	check_err $? "the refused call is not named"
	grep -q 'tests bit 0x1 of tcp_flags, not PSH' <<<"$out"
	check_err $? "the FIN test is not named"
	grep -q "reads skb+0x8, which bbrx's tcp_push does not" <<<"$out"
	check_err $? "the autocork read of another skb field is not named"
	grep -q "tcp_init_transfer+0x[0-9a-f]* writes sk_rcvbuf" <<<"$out"
	check_err $? "the rcvbuf write of sk_rcvbuf is not named"
	log_test "verifiers on known code: frame setup, copied registers, %r8, a merged branch accepted; call, lost sk, FIN, extra field, sk_rcvbuf write refused" \
		"${sum#bbrx: verify_selftest: }"
}

require_root
require_command ip ss modinfo
require_helper
require_bbrx
refusal_unload()
{
	bbrx_unload && return
	RET=1 retmsg="tcp_bbrx cannot be unloaded (in use), the refusal test needs to reload it"
	log_test "unload tcp_bbrx"
	tests_done
	exit 1
}
# Every hook but the expected refusals installs on a plain load, as the
# tests below assume: a hook this kernel also refuses skips the test with
# the reason (fails where BBRX_REQUIRE_HOOKS names it). The module's own
# list (MODULE_HOOKS): hooks_as_expected compares it with BBRX_HOOKS.
refusal_unload
bbrx_load || { echo "# loading tcp_bbrx failed"; exit 1; }
all_hooks_read
MODULE_HOOKS=$ALL_HOOKS
# shellcheck disable=SC2046,SC2086  # a list of hook names
require_hooks $(hooks_usable $MODULE_HOOKS)
refusal_unload

tests_run
bbrx_module_loaded || bbrx_load
tests_done
exit $EXIT_STATUS
