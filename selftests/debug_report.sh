#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run last by `make check-debug` in the VM booted with the debug kernel
# (scripts/vm/debug-kernel): the whole kernel log since boot must hold no
# KASAN, KFENCE, lockdep, atomic-sleep, debugobjects or other BUG/WARNING/
# Oops report, and after two kmemleak scans no suspected leak may have a
# backtrace naming tcp_bbrx or a function bbrx hooks. Leaks elsewhere are
# listed, not failed (the kernel's own boot-time false positives).
#
# A frame in module text that is gone (printed as a bare address: the module
# was unloaded before the scan) counts as tcp_bbrx's: it is the module the
# tests load and unload.  Skips (exit 4) on a kernel without kmemleak: the
# other checks could never fire there.  BBRX_DEBUG_LEAK_RE overrides the
# regular expression of the frames that fail the leak check.

ALL_TESTS="
	debug_kernel_armed
	debug_no_kasan
	debug_no_kfence
	debug_no_lockdep
	debug_no_atomic_sleep
	debug_no_other_report
	debug_kmemleak
"
source "$(dirname "$0")/lib.sh"

KMEMLEAK=/sys/kernel/debug/kmemleak
HOOKED='tcp_push|tcp_small_queue_check|tcp_init_transfer|tcp_rcv_space_adjust|tcp_event_data_recv'
LEAK_RE=${BBRX_DEBUG_LEAK_RE:-"bbrx|[^A-Za-z0-9_]($HOOKED)[+.]|[]] 0x[0-9a-f]+\$"}

[[ $(id -u) -eq 0 ]] || ksft_exit_skip "needs root"
[[ -e $KMEMLEAK ]] || ksft_exit_skip "no $KMEMLEAK: not a debug kernel (make check-debug boots one)"
dmesg >"$TMPD/dmesg" 2>/dev/null || ksft_exit_skip "dmesg not readable"

# report_blocks ERE: print every kernel-log line matching ERE with the 40
# lines after it (a report's trace), at most 300 lines; fail if any.
report_blocks()
{
	local hits

	hits=$(grep -c -E "$1" "$TMPD/dmesg")
	if ((hits > 0)); then
		check_err 1 "$hits line(s) matching /$1/ in the kernel log: $(grep -m1 -E "$1" "$TMPD/dmesg")"
		grep -E -A 40 "$1" "$TMPD/dmesg" | head -n 300 | sed 's/^/# dmesg: /'
	fi
}

# The checkers are compiled in and live: otherwise every check below passes
# for nothing.
debug_kernel_armed()
{
	local cfg=/boot/config-$(uname -r) o missing=''

	RET=0
	if [[ -r $cfg ]]; then
		for o in KASAN KFENCE PROVE_LOCKING DEBUG_ATOMIC_SLEEP DEBUG_OBJECTS DEBUG_KMEMLEAK; do
			grep -q "^CONFIG_$o=y" "$cfg" || missing+=" $o"
		done
		[[ -z $missing ]]
		check_err $? "not enabled in $cfg:$missing"
	else
		log_info "no $cfg: checking the running kernel only"
	fi
	grep -q 'KernelAddressSanitizer initialized' "$TMPD/dmesg"
	check_err $? "no 'KernelAddressSanitizer initialized' in the kernel log"
	grep -q 'enabled: 1' /sys/kernel/debug/kfence/stats 2>/dev/null
	check_err $? "KFENCE not enabled (/sys/kernel/debug/kfence/stats)"
	# lockdep turns itself off after its first report: still on = none yet.
	grep -q 'debug_locks: *1' /proc/lockdep_stats 2>/dev/null
	check_err $? "lockdep is off (debug_locks 0 in /proc/lockdep_stats)"
	log_test "debug kernel: KASAN, KFENCE, lockdep, atomic-sleep, debugobjects, kmemleak on" \
		"$(uname -r)"
}

debug_no_kasan()
{
	RET=0
	report_blocks 'BUG: KASAN|KASAN: '
	log_test "no KASAN report"
}

debug_no_kfence()
{
	RET=0
	report_blocks 'BUG: KFENCE|KFENCE: (out-of-bounds|use-after-free|invalid|memory corruption)'
	log_test "no KFENCE report"
}

debug_no_lockdep()
{
	RET=0
	report_blocks 'possible (circular|recursive) locking|inconsistent lock state|irq lock inversion|bad unlock balance|held lock freed|lock held when returning|suspicious RCU usage|WARNING: .*lock|DEBUG_LOCKS_WARN_ON|non-static key|BUG: MAX_LOCK|lockdep is turned off'
	log_test "no lockdep report"
}

debug_no_atomic_sleep()
{
	RET=0
	report_blocks 'sleeping function called from invalid context|scheduling while atomic|Preemption disabled at|Invalid wait context'
	log_test "no atomic-sleep report"
}

# Everything else a debug kernel may say: BUG/WARNING/Oops, debugobjects
# (ODEBUG), RCU stalls, hung tasks.
debug_no_other_report()
{
	RET=0
	report_blocks 'Oops|BUG:|WARNING:|kernel BUG|general protection|ODEBUG:|detected stall|blocked for more than|Call Trace:'
	log_test "no other BUG, WARNING, Oops, ODEBUG, stall or hung-task report"
}

# Two scans (an object is reported once it is unreferenced for 5 s and seen
# so by a scan; the second scan settles objects in flight during the first),
# then every report whose backtrace matches LEAK_RE fails.
debug_kmemleak()
{
	local n bad

	RET=0
	if ! { echo scan >"$KMEMLEAK"; } 2>"$TMPD/kml.err"; then
		check_err 1 "kmemleak scan failed: $(cat "$TMPD/kml.err") (disabled at boot? see dmesg)"
		grep -i kmemleak "$TMPD/dmesg" | head -n 5 | sed 's/^/# dmesg: /'
		log_test "kmemleak: no leak from tcp_bbrx or a hooked function"
		return
	fi
	sleep 6
	echo scan >"$KMEMLEAK"
	cat "$KMEMLEAK" >"$TMPD/kmemleak"
	n=$(grep -c '^unreferenced object' "$TMPD/kmemleak")
	# One record per report; keep those with a matching backtrace line.
	awk -v re="$LEAK_RE" '
		/^unreferenced object/ { if (rec != "" && hit) printf "%s", rec; rec = ""; hit = 0; bt = 0 }
		{ rec = rec $0 "\n" }
		/^  backtrace:/ { bt = 1; next }
		bt && $0 ~ re { hit = 1 }
		END { if (rec != "" && hit) printf "%s", rec }' "$TMPD/kmemleak" >"$TMPD/kml.bad"
	bad=$(grep -c '^unreferenced object' "$TMPD/kml.bad")
	log_info "kmemleak: $n suspected leak(s) after two scans, $bad naming tcp_bbrx or a hooked function"
	if ((bad > 0)); then
		check_err 1 "$bad kmemleak report(s) with tcp_bbrx or a hooked function in the backtrace"
		head -n 200 "$TMPD/kml.bad" | sed 's/^/# kmemleak: /'
	elif ((n > 0)); then
		# Not ours; listed for the record (function names only).
		grep -A 12 '^  backtrace:' "$TMPD/kmemleak" | grep -o '\] [^ ]*' | cut -c3- |
			sed 's/+0x.*//' | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/# kmemleak frames: /'
	fi
	log_test "kmemleak: no leak from tcp_bbrx or a hooked function" "$n suspected, $bad ours"
}

tests_run
tests_done
exit $EXIT_STATUS
