#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Delayed-ACK policy (net.ipv4.bbrx.delack), upstream 4720852ed9af "tcp:
# fix delayed ACKs for MSS boundary condition": a PSH segment of exactly one
# MSS sets ICSK_ACK_PUSHED, so the receiver ACKs it as soon as the
# application reads it instead of waiting for the delayed-ACK timer.
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
#	       once it is readable, waits 5 ms, then reads
# and records the ACK time relative to the send and to the read.  A probe is
# "at read" when its ACK came within AT_READ_MS of the read, "by timer" when
# it came TIMER_MS or more after it; each check wants a strict majority of
# the ROUNDS probes (default 5).  Arms, all in this one run:
#	m0  scope 1, delack 0, cubic        m1  scope 1, delack 1, cubic
#	m2  scope 1, delack 2, cubic
#	m0d scope 1, delack 0, cubic, reads 15 ms after the data is readable
#	s0c scope 0, delack 2, cubic        s0b scope 0, delack 2, bbrx
# Asserts: the hook is installed; nopsh is ACKed TIMER_MS or more after its
# send in every arm (the receiver is out of quick-ACK and the peer tells the
# timer from the read); in m0d
# psh is ACKed at the read, not at arrival; psh at read in m0 and m1, by
# timer in m2; short and qa at read in m0, m1 and m2; DelackPushSuppressed
# moves in m2 (at least once per round) and not in m0; scope 0 leaves the
# cubic socket alone (psh at read, counter still) and acts on the bbrx one
# (psh by timer, counter moves).
#
# The hooks are off by default in this release: if the delack hook is not
# installed the module is reloaded with disable= (every hook installed) and
# left loaded that way.

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
AT_READ_MS=10
TIMER_MS=30
NS=dack-$SFX
EXTRA_NETNS=$NS
ARMS="m0 m1 m2 m0d s0c s0b"
declare -A A_SCOPE=([m0]=1 [m1]=1 [m2]=1 [m0d]=1 [s0c]=0 [s0b]=0)
declare -A A_MODE=([m0]=0 [m1]=1 [m2]=2 [m0d]=0 [s0c]=2 [s0b]=2)
declare -A A_CC=([m0]=cubic [m1]=cubic [m2]=cubic [m0d]=cubic [s0c]=cubic [s0b]=bbrx)
declare -A A_ARGS=([m0d]="-d 15 -p nopsh,psh,short")
declare -A R SUPP GOTCC
SET_FAILS=
PEER_FAILS=
RELOAD_MSG=

# probe_stats FILE PROBE: "n at_read by_timer median_ack_after_read
# median_ack_after_send late_after_send" over the probes named PROBE in a
# tcp_peer output (late_after_send: ACKs TIMER_MS or more after the send).
probe_stats()
{
	local file=$1 p=$2 ar as

	ar=$(awk -v p="$p" -v k=ack_after_read_ms '$1 == "probe=" p {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$file" | median)
	as=$(awk -v p="$p" -v k=ack_after_send_ms '$1 == "probe=" p {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$file" | median)
	awk -v p="$p" -v lo="$AT_READ_MS" -v hi="$TIMER_MS" -v ar="$ar" -v as="$as" '
		$1 == "probe=" p {
			n++
			for (i = 2; i <= NF; i++) {
				split($i, kv, "=")
				if (kv[2] == "nan")
					continue
				v = kv[2] + 0
				if (kv[1] == "ack_after_read_ms") {
					if (v >= -lo && v <= lo) rd++
					if (v >= hi) tm++
				}
				if (kv[1] == "ack_after_send_ms" && v >= hi)
					ts++
			}
		}
		END { printf "%d %d %d %s %s %d\n", n, rd, tm, ar, as, ts }' "$file"
}

run_arm()
{
	local a=$1 f=$TMPD/$1.out before after p

	bbrx_sysctl_set "$NS" scope "${A_SCOPE[$a]}" || SET_FAILS+=" $a:scope"
	bbrx_sysctl_set "$NS" delack "${A_MODE[$a]}" 2>/dev/null || SET_FAILS+=" $a:delack"
	before=$(bbrx_stat DelackPushSuppressed "$NS")
	# shellcheck disable=SC2086
	ip netns exec "$NS" timeout 120 "$LIB_DIR/tcp_peer" -C "${A_CC[$a]}" -r "$ROUNDS" \
		${A_ARGS[$a]:-} >"$f" 2>"$TMPD/$a.err" ||
		PEER_FAILS+=" $a($(head -c 200 "$TMPD/$a.err"))"
	after=$(bbrx_stat DelackPushSuppressed "$NS")
	SUPP[$a]=$(awk -v a="$after" -v b="$before" 'BEGIN { if (a == "" || b == "") print "nan"; else print a - b }')
	GOTCC[$a]=$(awk '$1 == "handshake" { sub(/^cc=/, "", $2); print $2 }' "$f")
	for p in nopsh psh short qa; do
		read -r "R[$a,$p,n]" "R[$a,$p,rd]" "R[$a,$p,tm]" "R[$a,$p,ar]" "R[$a,$p,as]" "R[$a,$p,ts]" \
			< <(probe_stats "$f" "$p")
	done
	[[ ${BBRX_VERBOSE:-0} -eq 1 ]] && sed "s/^/# $a: /" "$f"
}

measure()
{
	local a p

	HOOK=$(hook_line delack)
	for a in $ARMS; do
		run_arm "$a"
	done
	bbrx_sysctl_set "$NS" delack 0 2>/dev/null
	bbrx_sysctl_set "$NS" scope 0

	echo "# $ROUNDS probes per cell: at-read (|ACK - read| <= $AT_READ_MS ms) / by-timer (ACK - read >= $TIMER_MS ms)"
	echo "# / late (ACK - send >= $TIMER_MS ms), median ACK after read / after send (ms); Supp = DelackPushSuppressed delta"
	printf '# %-4s %-5s %-4s %-5s %-24s %-24s %-24s %-24s %5s\n' arm scope mode cc nopsh psh short qa Supp
	for a in $ARMS; do
		printf '# %-4s %-5s %-4s %-5s' "$a" "${A_SCOPE[$a]}" "${A_MODE[$a]}" "${GOTCC[$a]:-?}"
		for p in nopsh psh short qa; do
			if [[ ${R[$a,$p,n]:-0} -eq 0 ]]; then
				printf ' %-24s' -
			else
				printf ' %-24s' "${R[$a,$p,rd]}/${R[$a,$p,tm]}/${R[$a,$p,ts]} ${R[$a,$p,ar]}/${R[$a,$p,as]}"
			fi
		done
		printf ' %5s\n' "${SUPP[$a]}"
	done
}

# majority A PROBE KIND (rd|tm|ts): a strict majority of the arm's probes.
majority()
{
	local n=${R[$1,$2,n]:-0} c=${R[$1,$2,$3]:-0}

	((n > 0 && 2 * c > n))
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

	[[ -n $RELOAD_MSG ]] && log_info "$RELOAD_MSG"
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
	[[ ${SUPP[m0]} == 0 ]]
	check_err $? "mode 0: DelackPushSuppressed moved by '${SUPP[m0]}'"
	[[ ${SUPP[m1]} == 0 ]] || log_info "mode 1: DelackPushSuppressed moved by ${SUPP[m1]}"
	log_test "DelackPushSuppressed moves in mode 2, not in mode 0" \
		"mode 0/1/2: ${SUPP[m0]} / ${SUPP[m1]} / ${SUPP[m2]}"
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

# The delack hook must be installed; the hooks are off by default.
hooks_load()
{
	local err

	if [[ $(hook_state delack) != installed ]]; then
		err=$(bbrx_reload disable= 2>&1)
		RELOAD_MSG="tcp_bbrx reloaded with disable= (hooks on): ${err:-ok}"
	fi
}

require_root
require_command ip timeout
[[ -x $LIB_DIR/tcp_peer ]] ||
	ksft_exit_skip "tcp_peer not built (run make -C selftests on the host)"
modprobe -q tun 2>/dev/null
if [[ ! -c /dev/net/tun ]]; then
	mkdir -p /dev/net && mknod /dev/net/tun c 10 200 2>/dev/null
fi
[[ -c /dev/net/tun ]] || ksft_exit_skip "no /dev/net/tun"
require_bbrx
hooks_load
ip netns add "$NS" && ip -n "$NS" link set lo up || { echo "# netns $NS failed"; exit 1; }

measure
tests_run
tests_done
exit $EXIT_STATUS
