#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Delayed-ACK policy (net.ipv4.bbrx.delack), upstream 4720852ed9af "tcp:
# fix delayed ACKs for MSS boundary condition" (6.6, October 2023; in 6.1
# through stable): a PSH segment of exactly one MSS sets ICSK_ACK_PUSHED, so
# the receiver ACKs it as soon as the application reads it instead of
# waiting for the delayed-ACK timer.
#	0 kernel       (6.1 has the change)
#	1 post-change  the same rule, run by bbrx
#	2 pre-change   a PSH segment of >= rcv_mss does not set PUSHED: it is
#	               ACKed by the delayed-ACK timer (~40 ms here)
#
# The sender is a scripted peer (tcp_peer) on a tun device in a private
# netns; the kernel under test is the receiver, an application thread of
# the same helper that only reads.  After a warm-up that ends the quick-ACK
# phase, every round of probes sends, one at a time, each waiting for its
# ACK and read (tcp_peer.c has the details):
#	nopsh  one full-MSS segment without PSH, read at once
#	psh    one full-MSS segment with PSH, read at once
#	short  one PSH segment of 300 + round bytes, read at once
#	qa     one full-MSS PSH segment; the application sets TCP_QUICKACK
#	       once it is readable, waits 15 ms, then reads
# and records the ACK time relative to the send and to the start and the end
# of the read.  A probe is "at read" when its ACK came after the read began
# (causality: an ACK on arrival or at the setsockopt of a qa probe comes
# 15 ms before it) and less than TIMER_MS (30) after the send, "by timer"
# when it came TIMER_MS or more after the read returned.  TIMER_MS sits
# below the delayed-ACK timer (40 ms or more after arrival, so never less
# than 40 ms after the send); the reads start at once or a configured 15 ms
# later.  No bound is a guest speed: only a read that starts more than
# TIMER_MS after the send (a stall, where the timer and the read cannot be
# told apart) leaves a probe neither.  Each check wants a strict majority
# of the valid probes (at least 3 of ROUNDS, default 5).
# Arms, all in this one run:
#	m0  scope 1, delack 0, cubic        m1  scope 1, delack 1, cubic
#	m2  scope 1, delack 2, cubic
#	m0d scope 1, delack 0, cubic, reads 15 ms after the data is readable
#	s0c scope 0, delack 2, cubic        s0b scope 0, delack 2, bbrx
# Asserts: the hook is installed; nopsh is ACKed TIMER_MS or more after its
# send in every arm (the receiver is out of quick-ACK and the peer tells the
# timer from the read); in m0d psh is ACKed at the read, not at arrival;
# psh at read in m0 and m1, by timer in m2; short and qa at read in m0, m1 and m2; DelackPushSuppressed
# moves in m2 and DelackPushMarked in m1 (at least once per round), neither
# in m0; scope 0 leaves the cubic socket alone (psh at read, counter still)
# and acts on the bbrx one (psh by timer, counter moves).
#
# TCG: the guest sometimes stalls for most of a second (seen with four to
# eight VMs on the 2-core host).  A receiver that sees a data gap longer
# than its RTO goes back to quick-ACK for 16 ACKs, which would make the
# following probes look "ACKed on arrival".  tcp_peer bounds the gap each
# segment could have had, marks a probe after a gap over 150 ms stale (left
# out, column St) and warms up again before the next one (column Rw); an
# arm whose no-PSH probes do not wait for the timer, or with fewer than 3
# valid probes of a kind (checks independent of the delack mode), is
# measured once more (BBRX_RETRIES).
#
# require_hooks reloads the module with $BBRX_HOOK_PARAMS when the delack
# hook is not installed (a load with disable= before), and fails the
# script when it still is not.

ALL_TESTS="
	delack_hook_installed
	delack_peer_sanity
	delack_psh_mss
	delack_short_psh
	delack_quickack
	delack_counter
	delack_scope
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

ROUNDS=${BBRX_DELACK_ROUNDS:-5}
MIN_VALID=$(((ROUNDS + 1) / 2))
TIMER_MS=30
NS=dack-$SFX
EXTRA_NETNS=$NS
ARMS="m0 m1 m2 m0d s0c s0b"
declare -A A_SCOPE=([m0]=1 [m1]=1 [m2]=1 [m0d]=1 [s0c]=0 [s0b]=0)
declare -A A_MODE=([m0]=0 [m1]=1 [m2]=2 [m0d]=0 [s0c]=2 [s0b]=2)
declare -A A_CC=([m0]=cubic [m1]=cubic [m2]=cubic [m0d]=cubic [s0c]=cubic [s0b]=bbrx)
declare -A A_ARGS=([m0d]="-d 15 -p nopsh,psh,short")
declare -A R SUPP MARK GOTCC REWARM
SET_FAILS=
PEER_FAILS=

# probe_stats FILE PROBE: "n at_read by_timer median_ack_after_read
# median_ack_after_send late_after_send stale" over the probes named PROBE
# in a tcp_peer output.  Probes marked stale (a guest stall; see the
# header) are left out of everything but the stale count.  at_read: the
# ACK after the read began (it leaves inside recvmsg()) and less than
# TIMER_MS after the send (before any delayed-ACK timer); by_timer:
# TIMER_MS or more after the read returned; late_after_send: TIMER_MS or
# more after the send.
probe_stats()
{
	local file=$1 p=$2 ar as

	ar=$(probe_values "$file" "$p" ack_after_read_ms | median)
	as=$(probe_values "$file" "$p" ack_after_send_ms | median)
	awk -v p="$p" -v tmr="$TIMER_MS" -v ar="$ar" -v as="$as" '
		$1 == "probe=" p {
			delete f
			for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			if (f["stale"] == 1) { st++; next }
			n++
			if (f["ack_after_read_ms"] != "nan") {
				if (f["ack_after_rstart_ms"] + 0 >= 0 && f["ack_after_send_ms"] + 0 < tmr)
					rd++
				if (f["ack_after_read_ms"] + 0 >= tmr) tm++
			}
			if (f["ack_after_send_ms"] != "nan" && f["ack_after_send_ms"] + 0 >= tmr)
				ts++
		}
		END { printf "%d %d %d %s %s %d %d\n", n, rd, tm, ar, as, ts, st }' "$file"
}

# probe_values FILE PROBE KEY: KEY of the non-stale PROBE lines.
probe_values()
{
	awk -v p="$2" -v k="$3" '$1 == "probe=" p && !/ stale=1 / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$1"
}

stale_total()
{
	local p t=0

	for p in nopsh psh short qa; do
		t=$((t + ${R[$1,$p,st]:-0}))
	done
	echo $t
}

# counter_delta BEFORE AFTER: after - before, nan if either is missing.
counter_delta()
{
	awk -v b="$1" -v a="$2" 'BEGIN { if (a == "" || b == "") print "nan"; else print a - b }'
}

# run_arm ARM: set the arm's sysctls, run tcp_peer, fill R[ARM,...],
# SUPP[ARM], MARK[ARM], GOTCC[ARM] and REWARM[ARM].
run_arm()
{
	local a=$1 f=$TMPD/$1.out s0 s1 m0 m1 p

	bbrx_sysctl_set "$NS" scope "${A_SCOPE[$a]}" || SET_FAILS+=" $a:scope"
	bbrx_sysctl_set "$NS" delack "${A_MODE[$a]}" 2>/dev/null || SET_FAILS+=" $a:delack"
	s0=$(bbrx_stat DelackPushSuppressed "$NS")
	m0=$(bbrx_stat DelackPushMarked "$NS")
	# shellcheck disable=SC2086
	ip netns exec "$NS" timeout 120 "$BIN_DIR/tcp_peer" -C "${A_CC[$a]}" -r "$ROUNDS" \
		${A_ARGS[$a]:-} >"$f" 2>"$TMPD/$a.err" ||
		PEER_FAILS+=" $a($(head -c 200 "$TMPD/$a.err"))"
	s1=$(bbrx_stat DelackPushSuppressed "$NS")
	m1=$(bbrx_stat DelackPushMarked "$NS")
	SUPP[$a]=$(counter_delta "$s0" "$s1")
	MARK[$a]=$(counter_delta "$m0" "$m1")
	GOTCC[$a]=$(awk '$1 == "handshake" { sub(/^cc=/, "", $2); print $2 }' "$f")
	REWARM[$a]=$(grep -c '^rewarm ' "$f")
	for p in nopsh psh short qa; do
		read -r "R[$a,$p,n]" "R[$a,$p,rd]" "R[$a,$p,tm]" "R[$a,$p,ar]" "R[$a,$p,as]" \
			"R[$a,$p,ts]" "R[$a,$p,st]" \
			< <(probe_stats "$f" "$p")
	done
	[[ ${BBRX_VERBOSE:-0} -eq 1 ]] && sed "s/^/# $a: /" "$f"
}

measure()
{
	local a p i

	HOOK=$(hook_line delack)
	for a in $ARMS; do
		run_arm "$a"
		# Guest stalls can leave too few valid probes or the receiver
		# in quick-ACK (arm_valid, which does not depend on the delack
		# mode): measure the arm again.
		for ((i = 0; i < ${BBRX_RETRIES:-1}; i++)); do
			arm_valid "$a" && break
			log_info "$a: no-PSH probes late after send ${R[$a,nopsh,ts]} of ${R[$a,nopsh,n]}, stale probes $(stale_total "$a"), rewarms ${REWARM[$a]}: measuring the arm again"
			cp "$TMPD/$a.out" "$TMPD/$a.out.$i"
			run_arm "$a"
		done
	done
	bbrx_sysctl_set "$NS" delack 0 2>/dev/null
	bbrx_sysctl_set "$NS" scope 0

	echo "# $ROUNDS probes per cell: at-read (ACK after the read began, < $TIMER_MS ms after the send) / by-timer (ACK - read >= $TIMER_MS ms)"
	echo "# / late (ACK - send >= $TIMER_MS ms) of the valid ones, median ACK after read / after send (ms);"
	echo "# Supp / Mark = DelackPushSuppressed / DelackPushMarked deltas; St = stale probes; Rw = warm-ups after a stall"
	printf '# %-4s %-5s %-4s %-5s %-24s %-24s %-24s %-24s %5s %5s %3s %3s\n' arm scope mode cc nopsh psh short qa \
		Supp Mark St Rw
	for a in $ARMS; do
		printf '# %-4s %-5s %-4s %-5s' "$a" "${A_SCOPE[$a]}" "${A_MODE[$a]}" "${GOTCC[$a]:-?}"
		for p in nopsh psh short qa; do
			if [[ ${R[$a,$p,n]:-0} -eq 0 ]]; then
				printf ' %-24s' -
			else
				printf ' %-24s' "${R[$a,$p,rd]}/${R[$a,$p,tm]}/${R[$a,$p,ts]} ${R[$a,$p,ar]}/${R[$a,$p,as]}"
			fi
		done
		printf ' %5s %5s %3s %3s\n' "${SUPP[$a]}" "${MARK[$a]}" "$(stale_total "$a")" "${REWARM[$a]}"
	done
}

# majority A PROBE KIND (rd|tm|ts): a strict majority of the arm's valid
# probes, of which there must be at least MIN_VALID.
majority()
{
	local n=${R[$1,$2,n]:-0} c=${R[$1,$2,$3]:-0}

	((n >= MIN_VALID && 2 * c > n))
}

# arm_valid A: the arm can be judged: the peer's own check holds (no-PSH
# full segments wait for the timer, so the receiver is out of quick-ACK)
# and every probe kind has MIN_VALID non-stale probes.  Independent of the
# delack mode.
arm_valid()
{
	local a=$1 p

	majority "$a" nopsh ts || return 1
	for p in nopsh psh short qa; do
		[[ ${R[$a,$p,n]:-0} -eq 0 && ${R[$a,$p,st]:-0} -eq 0 ]] && continue
		((${R[$a,$p,n]:-0} >= MIN_VALID)) || return 1
	done
}

# expect A PROBE KIND WHAT: check_err with the cell in the message.
expect()
{
	local a=$1 p=$2 k=$3 what=$4

	majority "$a" "$p" "$k"
	check_err $? "$a (scope ${A_SCOPE[$a]}, mode ${A_MODE[$a]}, ${A_CC[$a]}): $p not $what in a majority: at-read ${R[$a,$p,rd]:-?}, by-timer ${R[$a,$p,tm]:-?} of ${R[$a,$p,n]:-?}, median ACK ${R[$a,$p,ar]:-?} ms after the read"
}

delack_hook_installed()
{
	local a

	[[ $(hook_state delack) == installed ]]
	check_err $? "delack hook not installed: '${HOOK:-no delack line in /proc/net/bbrx_hooks}'"
	[[ -z $SET_FAILS ]]
	check_err $? "sysctl writes failed for:$SET_FAILS"
	[[ -z $PEER_FAILS ]]
	check_err $? "tcp_peer failed:$PEER_FAILS"
	for a in $ARMS; do
		[[ ${GOTCC[$a]} == "${A_CC[$a]}" ]]
		check_err $? "$a: the kernel socket uses '${GOTCC[$a]}', wanted ${A_CC[$a]}"
	done
	log_test "delack hook installed, policies settable, every arm ran" "$HOOK"
}

# The peer can tell the delayed-ACK timer from an ACK at the read, and the
# receiver was out of quick-ACK in every arm; an ACK "at the read" is not an
# ACK on arrival (m0d: the read comes 15 ms after the data).
delack_peer_sanity()
{
	local a

	for a in $ARMS; do
		expect "$a" nopsh ts "ACKed by timer ($TIMER_MS ms or more after the send: no PSH, one MSS outstanding)"
	done
	expect m0d psh rd "at the delayed read"
	fcmp "${R[m0d,psh,as]}" '>=' 10
	check_err $? "m0d: psh ACKed ${R[m0d,psh,as]} ms after the send, before the delayed read"
	log_test "peer: nopsh by timer everywhere; psh ACK follows a delayed read" \
		"m0 nopsh ${R[m0,nopsh,ar]} ms after read; m0d psh ${R[m0d,psh,as]} ms after send, ${R[m0d,psh,ar]} after read"
}

delack_psh_mss()
{
	expect m0 psh rd "at read"
	expect m1 psh rd "at read"
	expect m2 psh tm "by timer"
	log_test "one-MSS PSH segment: ACK at read in modes 0, 1; by the delayed-ACK timer in mode 2" \
		"median ACK after read: ${R[m0,psh,ar]} / ${R[m1,psh,ar]} / ${R[m2,psh,ar]} ms"
}

delack_short_psh()
{
	local a

	for a in m0 m1 m2; do
		expect "$a" short rd "at read"
	done
	log_test "short PSH segment: ACK at read in every mode" \
		"median ACK after read: ${R[m0,short,ar]} / ${R[m1,short,ar]} / ${R[m2,short,ar]} ms"
}

delack_quickack()
{
	local a

	for a in m0 m1 m2; do
		expect "$a" qa rd "at read"
	done
	log_test "TCP_QUICKACK before the read: ACK at read in every mode" \
		"median ACK after read: ${R[m0,qa,ar]} / ${R[m1,qa,ar]} / ${R[m2,qa,ar]} ms"
}

delack_counter()
{
	fcmp "${SUPP[m2]}" '>=' "$ROUNDS"
	check_err $? "mode 2: DelackPushSuppressed moved by '${SUPP[m2]}', expected >= $ROUNDS (2 full PSH segments per round)"
	fcmp "${MARK[m1]}" '>=' "$ROUNDS"
	check_err $? "mode 1: DelackPushMarked moved by '${MARK[m1]}', expected >= $ROUNDS"
	[[ ${SUPP[m0]} == 0 && ${MARK[m0]} == 0 ]]
	check_err $? "mode 0: bbrx counted (DelackPushSuppressed '${SUPP[m0]}', DelackPushMarked '${MARK[m0]}')"
	[[ ${SUPP[m1]} == 0 && ${MARK[m2]} == 0 ]]
	check_err $? "DelackPushSuppressed '${SUPP[m1]}' in mode 1 or DelackPushMarked '${MARK[m2]}' in mode 2"
	log_test "counters: PushSuppressed in mode 2, PushMarked in mode 1, neither in mode 0" \
		"Suppressed 0/1/2: ${SUPP[m0]} / ${SUPP[m1]} / ${SUPP[m2]}; Marked: ${MARK[m0]} / ${MARK[m1]} / ${MARK[m2]}"
}

delack_scope()
{
	expect s0c psh rd "at read"
	[[ ${SUPP[s0c]} == 0 ]]
	check_err $? "scope 0, cubic socket: DelackPushSuppressed moved by '${SUPP[s0c]}'"
	expect s0b psh tm "by timer"
	fcmp "${SUPP[s0b]}" '>=' "$ROUNDS"
	check_err $? "scope 0, bbrx socket: DelackPushSuppressed moved by '${SUPP[s0b]}', expected >= $ROUNDS"
	log_test "scope 0, mode 2: acts on the bbrx socket only" \
		"psh ACK after read: cubic ${R[s0c,psh,ar]} ms, bbrx ${R[s0b,psh,ar]} ms"
}

require_root
require_command ip timeout
[[ -x $BIN_DIR/tcp_peer ]] ||
	ksft_exit_skip "tcp_peer not built (run make -C selftests on the host)"
modprobe -q tun 2>/dev/null
if [[ ! -c /dev/net/tun ]]; then
	mkdir -p /dev/net && mknod /dev/net/tun c 10 200 2>/dev/null
fi
[[ -c /dev/net/tun ]] || ksft_exit_skip "no /dev/net/tun (CONFIG_TUN)"
log_info "the sender is tcp_peer on a tun device in a netns of its own: no NIC is used"
require_bbrx
require_hooks delack
ip netns add "$NS" && ip -n "$NS" link set lo up || { echo "# netns $NS failed"; exit 1; }

measure
tests_run
tests_done
exit $EXIT_STATUS
