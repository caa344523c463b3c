#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# TSQ policy (net.ipv4.bbrx.tsq), the report behind upstream "tcp: tsq:
# relax tcp_small_queue_check() when rtx queue contains a single skb"
# (Oct 2023): one TCP flow on a 100 Mbit link whose TX completions come
# late reached 81.5 Mbit/s without the single-skb shortcut and 94.4 with it.
# Modes, alternating within each repetition (BBRX_REPS, default 3):
#	1 post-change  send when the rtx queue is empty or holds one skb
#	2 pre-change   send only when it is empty (the regression)
#	0 kernel       (6.1 has the shortcut)
# One cubic flow (scope=1), 4 s, goodput limit 95.6 Mbit/s (1448/1514 of
# 100 Mbit/s).
#
# The path, and what could not be reproduced.  The shortcut only matters
# when TSQ waits for a TX completion while the rtx queue holds a single
# skb, i.e. a small window and completions that come after the ACK.  We
# tried (QEMU TCG, 6.1 cloud kernel), one flow, medians:
#   - router tbf 100mbit, default virtio NICs: ~95 Mbit/s in every mode; the
#     bottleneck queue keeps the rtx queue long, the shortcut never fires
#     (TsqSingleSkb ~0).
#   - the same with QEMU's TX timer (vm-run --nic-opts tx=timer,x-txtimer=
#     250000 or 1000000): 68-82 Mbit/s, but the same in every mode (the timer
#     delays transmission and completion together).
#   - virtio NICs, no shaping (the emulated CPU is the bottleneck): 150-215
#     Mbit/s, TsqSingleSkb / TsqWithheld move a little, no difference.
#   - tbf 100mbit on the sender's own NIC (this test, the closest model of a
#     100 Mbit NIC: skbs stay charged to the socket while they wait for the
#     "wire", and the virtio NIC completes them late): the mechanism is
#     fully visible (hundreds of single-skb sends in mode 1, thousands of
#     withheld ones in mode 2) but goodput is ~94 Mbit/s in every mode: the
#     tbf backlog keeps the link busy while TSQ waits (measured with one
#     other VM on the 2-core host: 93.9 / 93.5 / 94.0 Mbit/s post / pre /
#     kernel).  With three other VMs the guest CPU caps the flow at ~55
#     Mbit/s and the 93% assertion fails: run it on a quiet host.
#   - late TX completions proper (lib_shape.sh late_completion_setup, 2026-11-30:
#     the packet leaves at the 100 Mbit/s line rate over veth, the skb stays
#     charged 0.5-12 ms longer, idle host): TsqWithheld counts nearly every
#     throttle in mode 2 from 3 ms on, yet goodput is 87-94 Mbit/s in every
#     mode at every delay (e.g. 12 ms: 94.0 / 93.6 / 93.8); with
#     tcp_limit_output_bytes 131072 too.  TSQ's budget (two 64 KB skbs, or
#     pacing_rate >> 10 up to tcp_limit_output_bytes) covers such a delay at
#     100 Mbit/s.  The report's NIC probably completed in batches tied to
#     later transmissions, which a fixed delay does not model.
# So the report's 5% gain is not reproduced here.  The test asserts what
# it can: post-change at >= kernel mode's goodput less 3% (its share of
# the goodput limit is printed), post-change not below pre-change beyond
# 3% noise (direction; where the modes behave alike their medians of 3
# still differed by up to 0.9%, e.g. 91.33 vs 92.15 in a clean-clone make
# check); the 3% widen to the runs' own spread, up to 10%, where a busy
# host spreads them more (noise_margin, lib.sh),
# the counters of the mechanism
# (TsqSingleSkb only in mode 1, TsqWithheld only in mode 2, TsqThrottled in
# both, bbrx silent in mode 0), and prints the post/pre ratio.  The
# counters come from one more flow per mode (BBRX_TSQ_LC_SECS, 2 s) over
# the late-completion path (BBRX_TSQ_LC_DELAY_US, 3000 us, at the same
# 100 Mbit/s): on the tbf path 6.12 cloud almost never throttles with a
# single skb in the rtx queue (2026-12-01: TsqSingleSkb 1 in mode 1,
# TsqWithheld 0 in mode 2, medians of 3, against hundreds and thousands on
# 6.1), while late completions make the shortcut's case arise on both.  With
# BBRX_TSQ_STRICT=1 (a path with real late completions) the report's margin
# (post >= 1.05 x pre) is asserted as well.

ALL_TESTS="
	tsq_hook_installed
	tsq_post_goodput
	tsq_post_vs_pre
	tsq_counters
"
RETRY_TESTS="tsq_post_goodput tsq_post_vs_pre"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

SECS=${BBRX_TSQ_SECS:-4}
LC_SECS=${BBRX_TSQ_LC_SECS:-2}
LC_DELAY=${BBRX_TSQ_LC_DELAY_US:-3000}
RATE=100
MODES="1 2 0"
LIMIT=$(calc "$RATE * $GOODPUT_FRAC")
CTRS="Bbrx:TsqThrottled Bbrx:TsqSingleSkb Bbrx:TsqWithheld TcpRetransSegs"
declare -A GP THR SINGLE WITHHELD ALL
NREP=0		# runs per mode on the tbf path so far

# tsq_run ID MODE [RES SECS]: one flow; goodput and counter deltas appended
# to $TMPD/RES.res (default MODE), SECS long (default SECS).
tsq_run()
{
	local id=$1 m=$2 res=${3:-$2} secs=${4:-$SECS}

	bbrx_sysctl_set "$SND" tsq "$m" || SET_FAILS+=" $m"
	counters_snap "$SND" "$TMPD/c.before" $CTRS
	flow_run "$id" cubic "$secs" || FLOW_FAILS+=" $id"
	counters_snap "$SND" "$TMPD/c.after" $CTRS
	echo "$(iperf3_goodput "$TMPD/$id.json")" \
		"$(counters_delta "$TMPD/c.before" "$TMPD/c.after" Bbrx:TsqThrottled)" \
		"$(counters_delta "$TMPD/c.before" "$TMPD/c.after" Bbrx:TsqSingleSkb)" \
		"$(counters_delta "$TMPD/c.before" "$TMPD/c.after" Bbrx:TsqWithheld)" \
		"$(counters_delta "$TMPD/c.before" "$TMPD/c.after" TcpRetransSegs)" \
		>>"$TMPD/$res.res"
}

# tsq_reps: REPS more alternating runs of every mode on the tbf path, then
# the medians over all runs so far and the table.
tsq_reps()
{
	local rep m

	for ((rep = NREP + 1; rep <= NREP + REPS; rep++)); do
		for m in $MODES; do
			tsq_run "tsq$m-$rep" "$m"
		done
	done
	NREP=$((NREP + REPS))
	bbrx_sysctl_set "$SND" tsq 0
	for m in $MODES; do
		GP[$m]=$(awk '{ print $1 }' "$TMPD/$m.res" | median)
		THR[$m]=$(awk '{ print $2 }' "$TMPD/$m.res" | median)
		SINGLE[$m]=$(awk '{ print $3 }' "$TMPD/$m.res" | median)
		WITHHELD[$m]=$(awk '{ print $4 }' "$TMPD/$m.res" | median)
		ALL[$m]=$(awk '{ printf "%s ", $1 }' "$TMPD/$m.res")
	done
	echo "# one cubic flow, ${SECS}s, $QDISC on $SND_IF (sender), scope=1, $NREP reps; goodput limit $LIMIT Mbit/s"
	printf '# %-14s %8s %12s %12s %12s  %s\n' mode goodput TsqThrottled TsqSingleSkb TsqWithheld "runs (Mbit/s)"
	for m in $MODES; do
		printf '# %-14s %8s %12s %12s %12s  %s\n' "$m $(case $m in 1) echo post;; 2) echo pre;; 0) echo kernel;; esac)" \
			"${GP[$m]}" "${THR[$m]}" "${SINGLE[$m]}" "${WITHHELD[$m]}" "${ALL[$m]}"
	done
	echo "# post/pre goodput ratio $(calc "${GP[1]} / ${GP[2]}") (report: 94.4/81.5 = 1.16)"
}

measure()
{
	# The "NIC" line rate: tbf on the sender's own egress.
	shape_sender_tbf "$RATE"
	QDISC=$(tc -n "$SND" qdisc show dev "$SND_IF" | head -n 1)
	bbrx_sysctl_set "$SND" scope 1 || SET_FAILS+=" scope"
	HOOK=$(hook_line tsq)
	tsq_reps
}

# On a retry of a goodput ratio, REPS more runs of every mode (the modes
# that share a rule spread by about 3% over 3 runs of 4 s on a slow guest:
# CI, 6.1 rt, 2026-12-01, post 87.8 against pre 90.84 Mbit/s).
measure_retry()
{
	if ((TEST_ATTEMPT > 0)); then
		tsq_reps
	fi
}

# The counters, per mode, from one flow each over late TX completions.
measure_counters()
{
	local m

	tc -n "$SND" qdisc del dev "$SND_IF" root 2>/dev/null
	late_completion_setup "$RATE" "$LC_DELAY" || { SET_FAILS+=" late-completion"; return; }
	for m in $MODES; do
		tsq_run "tsqlc$m" "$m" "lc$m" "$LC_SECS"
		read -r _ THR[$m] SINGLE[$m] WITHHELD[$m] _ <"$TMPD/lc$m.res"
	done
	echo "# counters over late completions (${LC_DELAY} us, ${LC_SECS}s flow per mode):" \
		"throttled ${THR[1]} / ${THR[2]} / ${THR[0]}, single ${SINGLE[1]} / ${SINGLE[2]} / ${SINGLE[0]}," \
		"withheld ${WITHHELD[1]} / ${WITHHELD[2]} / ${WITHHELD[0]} (post / pre / kernel)"
}

tsq_hook_installed()
{
	[[ $(hook_state tsq) == installed ]]
	check_err $? "tsq hook not installed: '$HOOK'"
	[[ -z $SET_FAILS ]]
	check_err $? "sysctl writes failed for:$SET_FAILS"
	[[ -z $FLOW_FAILS ]]
	check_err $? "flows failed:$FLOW_FAILS"
	[[ $QDISC == *tbf* ]]
	check_err $? "no tbf on the sender: $QDISC"
	log_test "tsq hook installed, policies settable, all flows ran" "$HOOK"
}

# tsq_floor MODE MODE: the lowest ratio of goodput medians that is not a
# loss: 1 - noise_margin of the two modes' runs.
tsq_floor()
{
	local m sp=()

	for m in "$@"; do
		sp+=("$(awk '{ print $1 }' "$TMPD/$m.res" | half_range)")
	done
	calc "1 - $(noise_margin "${sp[@]}")"
}

tsq_post_goodput()
{
	local r floor

	measure_retry
	# Side by side with mode 0 (the kernel's own rule, which has the
	# shortcut on 6.1 and 6.12): the line-rate share is reported, not
	# asserted, since a slow or busy host caps every mode alike (CI,
	# 6.1 rt, 2026-12-01: 86.75 / 87.42 / 87.53 Mbit/s post / pre / kernel).
	r=$(calc "${GP[1]} / ${GP[0]}")
	floor=$(tsq_floor 1 0)
	fcmp "${GP[1]}" '>=' "$(calc "$floor * ${GP[0]}")"
	check_ratio $? "post-change goodput ${GP[1]} < $floor x kernel mode ${GP[0]} Mbit/s"
	fcmp "${GP[1]}" '>=' "$(calc "0.93 * $LIMIT")" ||
		log_info "post-change ${GP[1]} Mbit/s is below 93% of the $LIMIT Mbit/s limit (kernel mode ${GP[0]}): the VM, not the policy, caps this path"
	log_test "post-change goodput >= kernel mode's less the runs' noise (3-10%)" \
		"${GP[1]} vs ${GP[0]} Mbit/s, ratio $r >= $floor, limit $LIMIT"
}

tsq_post_vs_pre()
{
	local r floor

	measure_retry
	r=$(calc "${GP[1]} / ${GP[2]}")
	floor=$(tsq_floor 1 2)
	fcmp "${GP[1]}" '>=' "$(calc "$floor * ${GP[2]}")"
	check_ratio $? "post-change ${GP[1]} below $floor x pre-change ${GP[2]} Mbit/s"
	if [[ ${BBRX_TSQ_STRICT:-0} -eq 1 ]]; then
		fcmp "${GP[1]}" '>=' "$(calc "1.05 * ${GP[2]}")"
		check_ratio $? "post-change ${GP[1]} < 1.05 x pre-change ${GP[2]} Mbit/s (report's margin)"
	else
		fcmp "$r" '>=' 1.05 ||
			log_info "NOT REPRODUCED: the report's >= 5% gain of post over pre (ratio $r); see the header"
	fi
	log_test "post-change goodput not below pre-change${BBRX_TSQ_STRICT:+ (strict: >= 1.05x)}" \
		"${GP[1]} vs ${GP[2]} Mbit/s, ratio $r >= $floor"
}

tsq_counters()
{
	# last: it takes the tbf path down for the late-completion one
	measure_counters
	[[ $SET_FAILS != *late-completion* && $FLOW_FAILS != *tsqlc* ]]
	check_err $? "late-completion path setup or flows failed:$FLOW_FAILS"
	fcmp "${SINGLE[1]}" '>' 0
	check_err $? "mode 1: TsqSingleSkb did not move (the shortcut never fired)"
	[[ ${WITHHELD[1]} == 0 ]]
	check_err $? "mode 1: TsqWithheld moved (${WITHHELD[1]})"
	fcmp "${WITHHELD[2]}" '>' 0
	check_err $? "mode 2: TsqWithheld did not move (the shortcut was never withheld)"
	[[ ${SINGLE[2]} == 0 ]]
	check_err $? "mode 2: TsqSingleSkb moved (${SINGLE[2]})"
	fcmp "${THR[1]}" '>' 0 && fcmp "${THR[2]}" '>' 0
	check_err $? "TsqThrottled did not move (mode 1: ${THR[1]}, mode 2: ${THR[2]})"
	[[ ${THR[0]} == 0 && ${SINGLE[0]} == 0 && ${WITHHELD[0]} == 0 ]]
	check_err $? "bbrx counted with the policy at 0"
	log_test "counters: single-skb sends in post, withheld in pre, none in kernel mode" \
		"single ${SINGLE[1]}, withheld ${WITHHELD[2]}, throttled ${THR[1]} / ${THR[2]}"
}

require_command iperf3 jq ip tc
require_bbrx
require_hooks tsq
require_qdisc tbf
require_topo
iperf3_server_start || exit 1

measure
tests_run
bbrx_sysctl_set "$SND" scope 0
tests_done
exit $EXIT_STATUS
