#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Autocork policy: everything tcp_push() does besides the corking decision
# stays the kernel's, in every mode (0 kernel, 1 post, 2 pre, 3 never).
# A helper (tcp_write_pattern) writes scripted patterns with TCP_NODELAY and
# prints where each write ends in the byte stream; tcpdump on the sender's
# NIC records the segments; each write is then checked against them:
#
#   psh    rounds of 40 back-to-back 300-byte writes: a segment carries
#          PSH if and only if it ends where a write ended, and the segments
#          cover every byte written.  (tcp_push marks the tail skb; a later
#          write that appends to that skb clears the mark first, in
#          tcp_sendmsg_locked, so a segment holding several write ends carries
#          PSH only if it ends at the last of them: with TCP_NODELAY the last
#          segment of each push carries PSH, as the kernel always did.
#          The writer's send buffer is large enough that send() never
#          blocks: where it blocks for memory the kernel pushes, with PSH,
#          in the middle of a write; seen once in mode 3 on 2026-12-01.)
#   more   3 x 200 bytes with MSG_MORE (5 ms apart), then 100 bytes without:
#          no segment ends inside a round (MSG_MORE holds the data until the
#          write without it), the round's last segment carries PSH
#   oob    200 bytes, 100 bytes with MSG_OOB, 200 bytes: the segment holding
#          the urgent write's last byte has URG and seq + urgent pointer =
#          the end of that write
#
# How many segments a round takes differs by design (that is what corking
# changes); the per-write properties must not.  The path is the one
# hook_autocork.sh used before its late-completion model (fq with maxrate
# on the sender's veth, so corking happens) with gso_max_segs 1, so that every skb is one segment and the
# capture sees segments exactly as TCP built them, and maxrate 10mbit: a
# 300-byte segment then waits ~240 us in fq, longer than the next write
# takes, so short bursts cork too (at 100mbit only sustained flows do).

ALL_TESTS="
	sem_setup
	sem_psh
	sem_msg_more
	sem_urgent
	sem_corking_exercised
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

MODES="0 1 2 3"
PATTERNS="psh more oob"
ROUNDS=${BBRX_SEM_ROUNDS:-20}
SNDBUF=1048576	# bytes; a round of the psh pattern needs < 100 KB of truesize
CTRS="TcpExtTCPAutoCorking Bbrx:AutocorkCorked Bbrx:AutocorkDeclined"
declare -A R

# seg_list TEXT CPORT: "start end flags urg" per data segment of the
# connection from client port CPORT, stream offsets (first data byte = 0)
# from the SYN's ISN.  TEXT is `tcpdump -nn -S -r` output.
seg_list()
{
	awk -v cp="$2" '
	{
		split($3, a, "."); if (a[length(a)] != cp) next
		flags = ""; seq = ""; urg = 0; len = -1
		for (i = 1; i <= NF; i++) {
			if ($i == "Flags") { flags = $(i + 1); gsub(/[\[\],]/, "", flags) }
			else if ($i == "seq") { seq = $(i + 1); sub(/,$/, "", seq) }
			else if ($i == "urg") { urg = $(i + 1); sub(/,$/, "", urg) }
			else if ($i == "length") { len = $(i + 1) + 0 }
		}
		if (flags ~ /S/) { isn = seq + 0; have = 1; next }
		if (!have || len <= 0 || seq !~ /:/) next
		split(seq, p, ":")
		printf "%d %d %s %d\n", p[1] - isn - 1, p[2] - isn - 1, flags, urg
	}' "$1"
}

# check PATTERN WRITES SEGS: "writes ok segments" for the pattern.
check()
{
	awk -v pat="$1" '
	FNR == NR { kind[++nw] = $1; end[nw] = $2; next }
	{ s[++ns] = $1; e[ns] = $2; f[ns] = $3; u[ns] = $4 }
	END {
		ok = 0; n = 0
		for (w = 1; w <= nw; w++) {
			W = end[w]
			if (pat == "psh") {
				isend[W] = 1
			} else if (pat == "more") {
				if (kind[w] != "e") continue
				n++
				good = 0; bad = 0
				start = w > 4 ? end[w - 4] : 0
				for (i = 1; i <= ns; i++) {
					if (e[i] <= start || s[i] >= W) continue
					if (e[i] != W) bad++
					else if (f[i] ~ /P/) good++
				}
				if (good && !bad) ok++
			} else {
				if (kind[w] != "o") continue
				n++
				for (i = 1; i <= ns; i++)
					if (s[i] < W && W <= e[i] && f[i] ~ /U/ && s[i] + u[i] == W) { ok++; break }
			}
		}
		if (pat == "psh") {
			# per segment: PSH <=> ends at a write end; all bytes seen
			# (retransmissions, which may be trimmed or collapsed, skipped)
			for (i = 1; i <= ns; i++) {
				if (s[i] < maxe) continue
				n++
				if ((f[i] ~ /P/) == ((e[i] in isend) ? 1 : 0)) ok++
				maxe = e[i]
			}
			if (maxe != end[nw]) ok = -1
		}
		printf "%d %d %d\n", n, ok, ns
	}' "$2" "$3"
}

# run_mode MODE: one capture on the sender's NIC while each pattern runs
# on its own connection (client port 42000 + index), then the checks.
run_mode()
{
	local m=$1 pre=$TMPD/$1 tpid i k=0 pat cport

	bbrx_sysctl_set "$SND" autocork "$m" || SET_FAILS+=" $m"
	ip netns exec "$SND" tcpdump -Z root -i "$SND_IF" -nn -s 200 -U --immediate-mode \
		-w "$pre.pcap" "tcp and dst port $SINK_PORT" 2>"$pre.tcpdump" &
	tpid=$!
	bg_track $tpid
	for ((i = 0; i < 100; i++)); do
		grep -q listening "$pre.tcpdump" 2>/dev/null && break
		sleep 0.1
	done
	for pat in $PATTERNS; do
		cport=$((42000 + 10 * m + k))
		k=$((k + 1))
		echo "$cport" >"$pre-$pat.port"
		# -s: a send buffer the writer never waits for (where send()
		# blocks the kernel sets PSH mid-write; tcp_write_pattern.c)
		ip netns exec "$SND" "$BIN_DIR/tcp_write_pattern" -C cubic -n -b "$cport" \
			-r "$ROUNDS" -s "$SNDBUF" "$RCV_IP4" "$SINK_PORT" "$pat" \
			>"$pre-$pat.writes" 2>"$pre-$pat.err" ||
			WRITER_FAILS+=" $m/$pat($(head -c 200 "$pre-$pat.err"))"
	done
	sleep 0.5
	kill -INT $tpid 2>/dev/null
	wait $tpid 2>/dev/null
	tcpdump -Z root -r "$pre.pcap" -nn -S 2>/dev/null >"$pre.txt"
	for pat in $PATTERNS; do
		seg_list "$pre.txt" "$(cat "$pre-$pat.port")" >"$pre-$pat.segs"
		read -r R[$m,$pat,n] R[$m,$pat,ok] R[$m,$pat,segs] \
			< <(check "$pat" "$pre-$pat.writes" "$pre-$pat.segs")
	done
}

measure()
{
	local m pat

	# flow_limit: room for a whole round, so fq drops nothing
	shape_sender_fq 10 flow_limit 1000
	set_gso_max_segs 1
	GSO_NOW=$(get_gso_max_segs)
	bbrx_sysctl_set "$SND" scope 1 || SET_FAILS+=" scope"
	HOOK=$(hook_line autocork)
	for m in $MODES; do
		counters_snap "$SND" "$TMPD/c.before" $CTRS
		run_mode "$m"
		counters_snap "$SND" "$TMPD/c.after" $CTRS
		R[$m,corked]=$(counters_delta "$TMPD/c.before" "$TMPD/c.after" Bbrx:AutocorkCorked)
		R[$m,declined]=$(counters_delta "$TMPD/c.before" "$TMPD/c.after" Bbrx:AutocorkDeclined)
		R[$m,tcpac]=$(counters_delta "$TMPD/c.before" "$TMPD/c.after" TcpExtTCPAutoCorking)
	done
	bbrx_sysctl_set "$SND" autocork 0

	echo "# cubic, TCP_NODELAY, $ROUNDS rounds per pattern, fq maxrate 10mbit, gso_max_segs $GSO_NOW"
	printf '# %-6s %-16s %-16s %-16s %8s %8s %8s\n' mode "psh ok/segs" "more ok/rounds" "urg ok/oob" \
		TCPAutoCork Corked Declined
	for m in $MODES; do
		printf '# %-6s %-16s %-16s %-16s %8s %8s %8s\n' "$m" \
			"${R[$m,psh,ok]}/${R[$m,psh,n]}" \
			"${R[$m,more,ok]}/${R[$m,more,n]} (${R[$m,more,segs]})" \
			"${R[$m,oob,ok]}/${R[$m,oob,n]} (${R[$m,oob,segs]})" \
			"${R[$m,tcpac]}" "${R[$m,corked]}" "${R[$m,declined]}"
	done
}

sem_setup()
{
	[[ $(hook_state autocork) == installed ]]
	check_err $? "autocork hook not installed: '$HOOK'"
	[[ -z $SET_FAILS ]]
	check_err $? "sysctl writes failed for:$SET_FAILS"
	[[ -z $WRITER_FAILS ]]
	check_err $? "writer failed:$WRITER_FAILS"
	[[ $GSO_NOW == 1 ]]
	check_err $? "gso_max_segs of $SND_IF is '$GSO_NOW', wanted 1"
	log_test "autocork hook installed, captures taken in modes $MODES" "$HOOK"
}

# sem_prop PATTERN EXPECTED_N WHAT: every mode has ok == n == EXPECTED_N,
# the same as mode 0.
sem_prop()
{
	local pat=$1 want=$2 what=$3 m

	for m in $MODES; do
		[[ ${R[$m,$pat,n]} == "$want" ]]
		check_err $? "mode $m: $pat: ${R[$m,$pat,n]} writes seen, expected $want"
		[[ ${R[$m,$pat,ok]} == "${R[$m,$pat,n]}" ]]
		check_err $? "mode $m: $pat: only ${R[$m,$pat,ok]} of ${R[$m,$pat,n]} $what"
		[[ ${R[$m,$pat,ok]} == "${R[0,$pat,ok]}" ]]
		check_err $? "mode $m: $pat: ${R[$m,$pat,ok]} differs from kernel mode ${R[0,$pat,ok]}"
	done
	if [[ $RET -ne 0 ]]; then
		for m in $MODES; do
			head -n 12 "$TMPD/$m-$pat.segs" | sed "s/^/# mode $m $pat seg: /"
		done
	fi
}

sem_psh()
{
	local m

	for m in $MODES; do
		[[ ${R[$m,psh,n]} -gt 0 && ${R[$m,psh,ok]} == "${R[$m,psh,n]}" ]]
		check_err $? "mode $m: psh: ${R[$m,psh,ok]} of ${R[$m,psh,n]} segments have PSH exactly when they end a write (-1: bytes missing)"
	done
	if [[ $RET -ne 0 ]]; then
		for m in $MODES; do
			awk 'FNR == NR { w[$2] = 1; next }
			     $1 < maxe { next }
			     { maxe = $2 }
			     (($3 ~ /P/) != (($2 in w) ? 1 : 0))' \
				"$TMPD/$m-psh.writes" "$TMPD/$m-psh.segs" | head -n 5 |
				sed "s/^/# mode $m psh violation (start end flags urg): /"
		done
	fi
	log_test "TCP_NODELAY: PSH exactly on segments that end a write (all modes = kernel)" \
		"segments per mode: $(for m in $MODES; do printf '%s=%s ' "$m" "${R[$m,psh,segs]}"; done)"
}

sem_msg_more()
{
	sem_prop more "$ROUNDS" "MSG_MORE rounds were held and sent as one PSH segment"
	log_test "MSG_MORE holds data until a write without it (all modes = kernel)"
}

sem_urgent()
{
	sem_prop oob "$ROUNDS" "MSG_OOB writes had URG with the urgent pointer at their end"
	log_test "MSG_OOB sets URG and the urgent pointer (all modes = kernel)"
}

# The properties were checked while the policies acted: post-change and the
# kernel corked, never did not, bbrx counted only where it acts.  Whether
# a write finds an skb of the socket still in the qdisc or NIC (and so
# corks at all) depends on the sender's speed against the link's, a timing
# outcome like a rate: the debug kernel under TCG (BBRX_FUNCTIONAL=1) may
# never cork (nor decline to), so those three checks are logged only there.
sem_corking_exercised()
{
	fcmp "${R[1,corked]}" '>' 0
	check_ratio $? "mode 1: AutocorkCorked did not move (the patterns never corked)"
	fcmp "${R[0,tcpac]}" '>' 0
	check_ratio $? "mode 0: TcpExtTCPAutoCorking did not move"
	[[ ${R[3,corked]} == 0 && ${R[3,tcpac]} == 0 ]]
	check_err $? "mode 3 corked (Corked ${R[3,corked]}, TCPAutoCorking ${R[3,tcpac]})"
	fcmp "${R[3,declined]}" '>' 0
	check_ratio $? "mode 3: AutocorkDeclined did not move"
	[[ ${R[0,corked]} == 0 && ${R[0,declined]} == 0 ]]
	check_err $? "mode 0: bbrx counted (Corked ${R[0,corked]}, Declined ${R[0,declined]})"
	log_test "corking happened while the properties were checked" \
		"Corked mode 1: ${R[1,corked]}, Declined mode 3: ${R[3,declined]}"
}

require_command tcpdump ip tc
require_bbrx
require_hooks autocork
require_qdisc fq
require_helper cc_setsockopt tcp_write_pattern
# veth on purpose, whatever NETIFS says (see hook_autocork.sh).
use_veth "the capture checks the segments hook_autocork.sh measures, on veth"
require_topo
sink_start || { echo "# sink did not start"; exit 1; }

measure
tests_run
bbrx_sysctl_set "$SND" scope 0
tests_done
exit $EXIT_STATUS
