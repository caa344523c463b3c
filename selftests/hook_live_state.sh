#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Hooks that other tools could switch off under bbrx: the state shown and
# the policies accepted follow the live state of ftrace and kprobes.
#
# - kernel.ftrace_enabled=0 would stop every ftrace hook (redirects and the
#   entry callback) while /proc/net/bbrx_hooks still said "installed": bbrx
#   registers them FTRACE_OPS_FL_PERMANENT (as livepatch does), so that
#   write fails with EBUSY while bbrx is loaded, and the hooks keep acting.
# - With ftrace already disabled when bbrx loads, the ftrace hooks are
#   refused with that reason (the kprobe hook installs), and their policies
#   cannot be set (EOPNOTSUPP). 7.x no longer lets ftrace_enabled disable
#   ftrace: there the write fails without bbrx too and the hooks install.
# - Writing 0 to /sys/kernel/debug/kprobes/enabled disarms every kprobe and
#   cannot be refused: the delack hook then reads "inactive: kprobes
#   disarmed ..." with armed=0, a delack policy write fails (value
#   unchanged), and after kprobes are enabled again the policy arms.
#
# Each case fails on the module before 2026-12 (plain ftrace_ops, state from
# install time, enable_kprobe()'s result ignored).

ALL_TESTS="
	ftrace_enabled_busy
	ftrace_off_at_load
	kprobes_disarmed
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

FTRACE_HOOKS=
NS1=bbrx-live1-$$
NS2=bbrx-live2-$$
EXTRA_NETNS="$NS1 $NS2"
KPROBES_ENABLED=/sys/kernel/debug/kprobes/enabled

live_cleanup()
{
	sysctl -qw kernel.ftrace_enabled=1 2>/dev/null
	[[ -w $KPROBES_ENABLED ]] && echo 1 >"$KPROBES_ENABLED"
}

# ftrace_enabled_busy: the write fails, ftrace stays on, the hooks stay
# installed.
ftrace_enabled_busy()
{
	local out

	out=$(sysctl -w kernel.ftrace_enabled=0 2>&1)
	check_fail $? "kernel.ftrace_enabled=0 succeeded with bbrx loaded"
	[[ $(sysctl -n kernel.ftrace_enabled) == 1 ]]
	check_err $? "kernel.ftrace_enabled is $(sysctl -n kernel.ftrace_enabled) after the refused write"
	[[ $(hook_states $FTRACE_HOOKS) == "$(hooks_expected $FTRACE_HOOKS)" ]]
	check_err $? "hook states after the write: $(hook_states $FTRACE_HOOKS)"
	log_test "kernel.ftrace_enabled=0 fails while bbrx's ftrace hooks are installed" \
		"${out##*: }"
}

# ftrace_off_at_load: refused with the reason, delack installed, policies
# of refused hooks rejected.
ftrace_off_at_load()
{
	local h bad= err

	bbrx_unload || { check_err 1 "rmmod tcp_bbrx failed"; log_test "ftrace off at load"; return; }
	if ! sysctl -qw kernel.ftrace_enabled=0 2>/dev/null &&
	   [[ $(sysctl -n kernel.ftrace_enabled) == 1 ]]; then
		# 7.x: "The ftrace_enabled file is deprecated and no longer
		# disables ftrace"; nothing can switch the hooks off this way
		bbrx_load
		check_err $? "modprobe tcp_bbrx failed"
		[[ $(hook_states $FTRACE_HOOKS) == "$(hooks_expected $FTRACE_HOOKS)" ]]
		check_err $? "hook states: $(hook_states $FTRACE_HOOKS)"
		log_test "ftrace_enabled=0 cannot disable ftrace on this kernel: the ftrace hooks stay installed"
		return
	fi
	[[ $(sysctl -n kernel.ftrace_enabled) == 0 ]]
	check_err $? "could not set kernel.ftrace_enabled=0 without bbrx"
	bbrx_load
	check_err $? "modprobe tcp_bbrx with ftrace disabled failed"
	for h in $FTRACE_HOOKS; do
		[[ $(hook_line "$h") == *"refused: ftrace disabled (kernel.ftrace_enabled = 0)"* ]] ||
			bad+=" [$(hook_line "$h")]"
	done
	check_err "${bad:+1}" "not refused with the ftrace reason:$bad"
	[[ $(hook_state delack) == installed ]]
	check_err $? "delack: $(hook_line delack)"
	err=$(sysctl_write_err "$NS1" autocork 1)
	[[ $err == EOPNOTSUPP && $(bbrx_sysctl_get "$NS1" autocork) == 0 ]]
	check_err $? "autocork=1 with the hook refused: $err, value $(bbrx_sysctl_get "$NS1" autocork)"
	sysctl -qw kernel.ftrace_enabled=1
	bbrx_reload
	[[ $(hook_states $FTRACE_HOOKS) == "$(hooks_expected $FTRACE_HOOKS)" ]]
	check_err $? "after ftrace_enabled=1 and a reload: $(hook_states $FTRACE_HOOKS)"
	log_test "ftrace disabled at load: ftrace hooks refused with the reason, delack installed"
}

# kprobes_disarmed: the live state and the policy writes follow debugfs
# kprobes/enabled.
kprobes_disarmed()
{
	local err line

	bbrx_sysctl_set "$NS1" delack 2
	check_err $? "delack=2 in $NS1 failed with kprobes enabled"
	[[ $(hook_line delack) == *"installed armed=1"* ]]
	check_err $? "with delack=2: $(hook_line delack)"

	echo 0 >"$KPROBES_ENABLED"
	line=$(hook_line delack)
	log_info "kprobes disarmed: $line"
	[[ $line == *"inactive: kprobes disarmed system-wide"*"armed=0"* ]]
	check_err $? "with kprobes disarmed: $line"
	err=$(sysctl_write_err "$NS2" delack 1)
	[[ $err == EOPNOTSUPP && $(bbrx_sysctl_get "$NS2" delack) == 0 ]]
	check_err $? "delack=1 in $NS2 with kprobes disarmed: $err, value $(bbrx_sysctl_get "$NS2" delack)"

	echo 1 >"$KPROBES_ENABLED"
	[[ $(hook_line delack) == *"installed armed=1"* ]]
	check_err $? "kprobes enabled again: $(hook_line delack)"
	err=$(sysctl_write_err "$NS2" delack 1)
	[[ $err == OK ]]
	check_err $? "delack=1 in $NS2 with kprobes enabled again: $err"
	bbrx_sysctl_set "$NS1" delack 0
	bbrx_sysctl_set "$NS2" delack 0
	[[ $(hook_line delack) == *"installed armed=0"* ]]
	check_err $? "all delack policies 0: $(hook_line delack)"
	log_test "kprobes disarmed system-wide: delack shows inactive, policy writes fail"
}

require_root
require_command sysctl ip
[[ -e /sys/kernel/debug/kprobes ]] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
[[ -w $KPROBES_ENABLED ]] || ksft_exit_skip "$KPROBES_ENABLED not writable (debugfs, CONFIG_KPROBES)"
[[ $(sysctl -n kernel.ftrace_enabled 2>/dev/null) == 1 ]] ||
	ksft_exit_skip "kernel.ftrace_enabled is not 1 at start"
trap 'live_cleanup; cleanup' EXIT
require_bbrx
all_hooks_read
# The ftrace hooks this kernel installs (BBRX_EXPECT_REFUSED, lib_hooks.sh):
# every hook but delack, a kprobe.
# shellcheck disable=SC2046  # a list of hook names
FTRACE_HOOKS=$(hooks_usable $(hooks_but delack))
# shellcheck disable=SC2086  # a list of hook names
require_hooks $FTRACE_HOOKS delack
ip netns add "$NS1" && ip netns add "$NS2" || exit 1

tests_run
tests_done
exit $EXIT_STATUS
