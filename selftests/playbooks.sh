#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# docs/playbooks.md, run.  The playbooks tell an SRE which commands show a
# regression or a model's failure mode on a live host, which knob fixes it
# and which counter or field then moves.  A playbook whose commands fail in
# a network namespace, or whose "this moves" does not move, misleads at the
# worst moment; this test runs the commands.
#
# Each playbook has four tested blocks (info string `sh playbook=NAME`), in
# order: Recognise, Apply, Confirm, Roll back.  The test extracts them from
# docs/playbooks.md (next to this script when staged for the VM, else one
# level up: <repo>/docs/playbooks.md; BBRX_PLAYBOOKS names another copy)
# and runs each verbatim with `bash -e` in the namespace the playbook names,
# with PEER (the remote address of the flows, as that namespace sees it)
# and WATCH (BBRX_PB_WATCH, 3 s; the policer's lt_bw 1 run
# BBRX_PB_POLICER_WATCH, 10 s: bbrx_policer's 10 s flows found the policer
# 1 to 3 times each in check-full on 7.3, 2026-12-02).
# Every block's output is printed: it is what a reviewer reads.
#
# Per playbook, on the same paths as the matching tests (short forms): the
# old rule or model first (the situation the playbook recognises), with
# Recognise and Confirm watching one flow side by side; then Apply; then
# Confirm again on a new flow; then Roll back.  Flows start 1 s after the
# blocks (a block's counters must see the connection being made) and last
# WATCH + 1 s.
#	autocork  sender, cubic 500-byte TCP_NODELAY writes, TX completions
#		  400 us late (hook_autocork): autocork 2 -> 1.  AutocorkCorked
#		  and TcpExtTCPAutoCorking > 0 with 1, AutocorkCorked with 2 at
#		  most a quarter of that, AutocorkDeclined > 0 with 2, events
#		  decision=corked with 1.
#	tsq       sender, one cubic flow, 100 Mbit/s line, completions 3 ms late
#		  (hook_tsq's counter path): tsq 2 -> 1.  TsqWithheld > 0 and
#		  TsqSingleSkb 0 with 2, the reverse with 1, events single_skb.
#	rcvbuf    receiver, sender gso_max_segs 1, 50 Mbit/s tbf (hook_rcvbuf):
#		  rcvbuf 0 -> 1.  RcvbufSized 0, then > 0 with sized events.
#	delack    receiver, sender one MSS with PSH per segment, cwnd locked at
#		  4, fq 20 Mbit/s (hook_delack_rate): delack 0 -> 2.
#		  DelackPushSuppressed 0, then > 0 with events; the receiver's
#		  ACKs per data segment (ss) at least 1.25x fewer.
#	gso       sender gso_max_segs 2, no bottleneck, bbrx with pacing_shift
#		  6 (bbrx_gso: the goal exceeds 2 segments from 2.2 Mbit/s on,
#		  whatever the guest's speed): gso_cap 1 -> 0.  The burst goal
#		  the block prints is 2, then above 2; cwnd >= 1.3x.  Recognise
#		  also runs with PEER=[IPv6] on an IPv6 flow: route line, goal 2.
#	shallow   sender, 100 Mbit/s, 20 ms, 0.25-BDP buffer (bbrx3_paths):
#		  default bbrx -> bbrx3.  The flow runs bbrx, then bbrx3;
#		  Bbrx3SocketsInit 0, then > 0; bbrx3_round events; a loss bound
#		  (Bbrx3InflightHiLoss, LoLoss or StartupExitCong) when the
#		  watch saw retransmits.  Retransmits are printed (bbrx3_paths
#		  asserts them over longer flows).
#	policer   sender, 20 Mbit/s policer, 40 ms, GSO off (bbrx_policer):
#		  bbrx lt_bw 0 -> 1.  LtBwUsed 0, then > 0.
#	sharing   sender, a cubic flow beside ours, 100 Mbit/s, 20 ms, 1 BDP:
#		  default bbrx -> bbrx3.  Our flow runs bbrx, then bbrx3
#		  (Bbrx3SocketsInit, bbrx3_round events); the shares are printed,
#		  not asserted (README: not reliable at this length, or at all).
# Every block exits 0; after Apply the knobs have the playbook's values,
# after Roll back the defaults.  pb_doc checks the document's shape: the
# eight playbooks, four blocks each, each parses (bash -n), the watching
# blocks use PEER and WATCH, no tested block needs trace-cmd or bpftrace
# (the guest has neither).
#
# The old rule stands in for a regressed kernel: 6.1 and later already have
# the autocork and TSQ fixes, and bbrx's policy 2 is what reproduces the
# regression.  veth for the sender-router hop whatever NETIFS says (the
# hook tests' paths).

ALL_TESTS="
	pb_doc
	pb_autocork
	pb_tsq
	pb_rcvbuf
	pb_delack
	pb_gso
	pb_shallow
	pb_policer
	pb_sharing
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

WATCH_DEFAULT=${BBRX_PB_WATCH:-3}
WATCH_POLICER=${BBRX_PB_POLICER_WATCH:-10}
for v in "$WATCH_DEFAULT" "$WATCH_POLICER"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] ||
		{ echo "# BBRX_PB_WATCH/BBRX_PB_POLICER_WATCH: '$v' is not seconds (1 or more)"; exit 1; }
done
PB_WATCH=$WATCH_DEFAULT
PB_NAMES="autocork tsq rcvbuf delack gso shallow policer sharing"
PB_STEPS=(recognise apply confirm "roll back")
PB_PORT2=5202		# a second iperf3 server (sharing's cubic flow)
PB_STATE=

# pb_find_doc: the playbooks' path, or nothing.
pb_find_doc()
{
	local f

	if [[ -n ${BBRX_PLAYBOOKS:-} ]]; then	# named: that one or none
		[[ -f $BBRX_PLAYBOOKS && -r $BBRX_PLAYBOOKS ]] && echo "$BBRX_PLAYBOOKS"
		return
	fi
	for f in "$LIB_DIR/playbooks.md" "$LIB_DIR/../docs/playbooks.md"; do
		[[ -r $f ]] && { echo "$f"; return 0; }
	done
	return 1
}

# pb_extract: every `sh playbook=NAME` block of the document into
# $TMPD/pb/NAME.N (N from 0, in document order); other fenced blocks are
# skipped whole.
pb_extract()
{
	mkdir -p "$TMPD/pb"
	awk -v pre="$TMPD/pb/" '
	/^```/ {
		if (!inf) {
			inf = 1; cur = ""
			info = substr($0, 4); sub(/[ \t]+$/, "", info)
			if (info ~ /^sh playbook=/) {
				name = substr(info, 13)
				if (name !~ /^[a-z0-9_-]+$/) name = "INVALID"
				cur = pre name "." (n[name]++)
				printf "" > cur
			}
			next
		}
		inf = 0
		if (cur != "") close(cur)
		cur = ""
		next
	}
	inf && cur != "" { print > cur }' "$PB_DOC"
}

# pb_peer NS: the remote address of the test flows as NS sees them (with
# FLOW_V6=1 the IPv6 one, in brackets as the docs tell the user to write it).
pb_peer()
{
	if [[ ${FLOW_V6:-0} -eq 1 ]]; then
		if [[ $1 == "$SND" ]]; then echo "[$RCV_IP6]"; else echo "[$SND_IP6]"; fi
	elif [[ $1 == "$SND" ]]; then
		echo "$RCV_IP4"
	else
		echo "$SND_IP4"
	fi
}

# pb_exec NS NAME IDX OUT: block IDX of playbook NAME, verbatim, with
# bash -e in netns NS, PEER and WATCH set; its output in OUT.
pb_exec()
{
	local ns=$1 name=$2 idx=$3 out=$4 f=$TMPD/pb/$2.$3

	if [[ ! -s $f ]]; then
		echo "playbook $name has no block $((idx + 1))" >"$out"
		return 1
	fi
	ip netns exec "$ns" env PEER="$(pb_peer "$ns")" WATCH="$PB_WATCH" \
		bash -e -c "$(<"$f")" >"$out" 2>&1
}

pb_out()	# pb_out NAME TAG IDX: the output file of a block run
{
	echo "$TMPD/pb-$1-$2-$3.out"
}

# pb_report NAME IDX TAG: print a block run's output, fail on its status.
pb_report()
{
	local name=$1 idx=$2 tag=$3 out rc

	out=$(pb_out "$name" "$tag" "$idx")
	rc=$(cat "${out%.out}.rc" 2>/dev/null || echo '?')
	echo "# --- playbook $name, block $((idx + 1)) (${PB_STEPS[$idx]}), $tag${PB_STATE:+, $PB_STATE}: exit $rc"
	sed 's/^/#   | /' "$out"
	[[ $rc == 0 ]]
	check_err $? "playbook $name block $((idx + 1)) (${PB_STEPS[$idx]}, $tag) exited $rc"
}

# pb_do NS NAME IDX TAG: run one block now (Apply, Roll back).
pb_do()
{
	local out

	out=$(pb_out "$2" "$4" "$3")
	pb_exec "$1" "$2" "$3" "$out"
	echo $? >"${out%.out}.rc"
	pb_report "$2" "$3" "$4"
}

# pb_during NS NAME "IDX..." TAG CMD...: run the blocks IDX side by side
# while CMD (a flow of WATCH + 1 s) runs; CMD starts 1 s after them.
pb_during()
{
	local ns=$1 name=$2 idxs=$3 tag=$4 i pid out
	local -a pids=()

	shift 4
	for i in $idxs; do
		out=$(pb_out "$name" "$tag" "$i")
		( pb_exec "$ns" "$name" "$i" "$out"; echo $? >"${out%.out}.rc" ) &
		pids+=($!)
	done
	bg_track "${pids[@]}"
	sleep 1
	"$@"
	check_err $? "playbook $name ($tag): the test's flow failed"
	for pid in "${pids[@]}"; do
		wait "$pid"
	done
	for i in $idxs; do
		pb_report "$name" "$i" "$tag"
	done
}

# pb_flow [iperf3 args]: the flow the blocks watch, netns default cc.
PB_FLOW_N=0
# shellcheck disable=SC2120 # pb_during passes the arguments
pb_flow()
{
	PB_FLOW_N=$((PB_FLOW_N + 1))
	flow_run "pb$PB_FLOW_N" - $((PB_WATCH + 1)) "$@"
}

# pb_flows_sharing: our flow (netns default) and a cubic one beside it.
pb_flows_sharing()
{
	local pid rc

	ip netns exec "$SND" timeout $((PB_WATCH + 60)) iperf3 -c "$RCV_IP4" -p "$PB_PORT2" \
		-t $((PB_WATCH + 1)) -C cubic -J >"$TMPD/pb-cubic.json" 2>&1 &
	pid=$!
	# shellcheck disable=SC2119 # no iperf3 arguments: a bulk flow
	pb_flow
	rc=$?
	wait "$pid" || rc=1
	return "$rc"
}

# pb_server PORT: another iperf3 server in the receiver.
pb_server()
{
	ip netns exec "$RCV" iperf3 -s -p "$1" >"$TMPD/iperf3-server-$1.log" 2>&1 &
	bg_track $!
	listen_wait "$RCV" "$1"
}

# pb_set NS KNOB=VALUE...: the test's own settings (cc = the netns default
# congestion control, else net.ipv4.bbrx.KNOB).
pb_set()
{
	local ns=$1 kv

	shift
	for kv in "$@"; do
		if [[ ${kv%%=*} == cc ]]; then
			ns_sysctl "$ns" "net.ipv4.tcp_congestion_control=${kv#*=}"
		else
			bbrx_sysctl_set "$ns" "${kv%%=*}" "${kv#*=}"
		fi
		check_err $? "setting $kv in $ns failed"
	done
}

# pb_knobs NS WHEN KNOB=VALUE...: the knobs have these values (after WHEN).
pb_knobs()
{
	local ns=$1 when=$2 kv k got

	shift 2
	for kv in "$@"; do
		k=${kv%%=*}
		if [[ $k == cc ]]; then
			got=$(ip netns exec "$ns" sysctl -n net.ipv4.tcp_congestion_control)
		else
			got=$(bbrx_sysctl_get "$ns" "$k")
		fi
		[[ $got == "${kv#*=}" ]]
		check_err $? "after $when: $k is '$got' in $ns, not ${kv#*=}"
	done
}

# pb_val FILE NAME: the number after NAME at the start of a line (nstat,
# counter deltas: "NAME VALUE ...").
pb_val()
{
	awk -v n="$2" '$1 == n { print $2; exit }' "$1"
}

# pb_val0 FILE NAME: pb_val, 0 if the block did not print NAME.
pb_val0()
{
	local v

	v=$(pb_val "$@")
	[[ $v =~ ^-?[0-9]+$ ]] && echo "$v" || echo 0
}

# pb_event FILE EVENT DECISION: how many events the block counted (0 if none).
pb_event()
{
	awk -v e="$2" -v d="decision=$3" '$1 == "event" && $2 == e && $3 == d { v = $4 }
		END { print v + 0 }' "$1"
}

# pb_rounds FILE EVENT: round events of EVENT over every flow (0 if none).
pb_rounds()
{
	awk -v e="$2" '$1 == "event" && $2 == e {
		for (i = 3; i <= NF; i++) if ($i ~ /^rounds=/) s += substr($i, 8)
	} END { print s + 0 }' "$1"
}

# pb_field FILE KEY SORT [CC]: KEY of the "flow" line with the largest SORT
# (the data connection, not iperf3's control connection), among the flows
# of congestion control CC if given.
pb_field()
{
	awk -v k="$2" -v s="$3" -v cc="$4" '$1 == "flow" {
		split("", v)
		for (i = 2; i <= NF; i++)
			if ((j = index($i, "=")) > 0) v[substr($i, 1, j - 1)] = substr($i, j + 1)
		if (cc != "" && v["cc"] != cc) next
		if (!seen || v[s] + 0 > best) { best = v[s] + 0; val = v[k]; seen = 1 }
	} END { if (seen) print val }' "$1"
}

# pb_pos V: V is a positive integer; pb_zero V: V is 0.
pb_pos()
{
	[[ $1 =~ ^[0-9]+$ ]] && (($1 > 0))
}

pb_zero()
{
	[[ $1 == 0 ]]
}

# pb_late_completion RATE DELAY_US: the late-completion NIC model
# (lib_shape.sh), built once and re-tuned after.
pb_late_completion()
{
	if ! ip -n "$SND" link show lc0 &>/dev/null; then
		late_completion_setup "$1" "$2"
		return
	fi
	tc -n "$SND" qdisc replace dev lc0 root tbf rate "${1}mbit" burst 15140 limit 1000000 &&
		late_completion_delay "$2" &&
		ip -n "$SND" route replace "$RCV_IP4/32" via "$RTR_IP4_S" dev lc0 onlink src "$SND_IP4"
}

# pb_reset: the plain path and every knob at its default, in both hosts.
pb_reset()
{
	local ns k

	PB_WATCH=$WATCH_DEFAULT
	PB_STATE=
	shape_clear
	tc -n "$SND" qdisc del dev "$SND_IF" root 2>/dev/null
	ip -n "$SND" route del "$RCV_IP4/32" 2>/dev/null
	ip -n "$SND" route replace default via "$RTR_IP4_S" dev "$SND_IF"
	ip -n "$SND" tcp_metrics flush all 2>/dev/null
	ns_sysctl "$SND" net.ipv4.tcp_no_metrics_save=1
	ip -n "$SND" link set dev "$SND_IF" gso_max_segs 65535
	ip netns exec "$SND" ethtool -K "$SND_IF" tso on gso on &>/dev/null
	for ns in "$SND" "$RCV"; do
		for k in $(bbrx_policy_names) scope gso_cap; do
			bbrx_sysctl_set "$ns" "$k" 0
		done
		bbrx_sysctl_set "$ns" lt_bw 1
		bbrx_sysctl_set "$ns" pacing_shift 10
		ns_sysctl "$ns" net.ipv4.tcp_congestion_control=cubic
	done
}

##############################################################################
# The document

pb_doc()
{
	local name f i n names='' bad=''

	for f in "$TMPD"/pb/*; do
		[[ -e $f ]] || continue
		name=${f##*/}
		name=${name%.*}
		[[ " $names " == *" $name "* ]] || names+=" $name"
	done
	[[ " $names " == *" INVALID "* ]] && bad+=" a playbook name outside [a-z0-9_-];"
	for name in $names; do
		[[ " $PB_NAMES " == *" $name "* ]] || bad+=" unknown playbook '$name';"
	done
	for name in $PB_NAMES; do
		n=0
		while [[ -e $TMPD/pb/$name.$n ]]; do
			n=$((n + 1))
		done
		[[ $n == 4 ]] || bad+=" $name has $n tested blocks, not 4;"
		for ((i = 0; i < n; i++)); do
			f=$TMPD/pb/$name.$i
			bash -n "$f" 2>/dev/null || bad+=" $name block $((i + 1)) does not parse;"
			grep -qE '\b(trace-cmd|bpftrace)\b' "$f" &&
				bad+=" $name block $((i + 1)) needs trace-cmd or bpftrace;"
			if ((i == 0 || i == 2)); then
				grep -q 'WATCH' "$f" && grep -q 'PEER' "$f" ||
					bad+=" $name block $((i + 1)) does not use PEER and WATCH;"
			fi
		done
	done
	# shellcheck disable=SC2016 # the document's backquotes, literally
	grep -q '^- `PEER`' "$PB_DOC" && grep -q '^- `WATCH`' "$PB_DOC" ||
		bad+=" the placeholders PEER and WATCH are not documented;"
	[[ -z $bad ]]
	check_err $? "docs/playbooks.md:$bad"
	log_test "playbooks: 8 playbooks of 4 tested blocks, each parses" "$PB_DOC"
}

##############################################################################
# The hooks

pb_autocork()
{
	local pre post c0 c1 d0 a1 e1

	pb_reset
	pb_late_completion 10000 400
	check_err $? "late-completion path setup failed"
	# The old rule (the 4.15 regression) on every socket: what the
	# playbook recognises.
	pb_set "$SND" scope=1 autocork=2
	PB_STATE="autocork=2 (old rule)"
	pb_during "$SND" autocork "0 2" pre pb_flow -l 500 -N
	PB_STATE=
	pb_do "$SND" autocork 1 apply
	pb_knobs "$SND" apply scope=1 autocork=1
	PB_STATE="autocork=1"
	pb_during "$SND" autocork 2 post pb_flow -l 500 -N
	PB_STATE=
	pb_do "$SND" autocork 3 rollback
	pb_knobs "$SND" "roll back" scope=0 autocork=0

	pre=$(pb_out autocork pre 2)
	post=$(pb_out autocork post 2)
	c0=$(pb_val "$pre" AutocorkCorked)
	d0=$(pb_val "$pre" AutocorkDeclined)
	c1=$(pb_val "$post" AutocorkCorked)
	a1=$(pb_val "$post" TcpExtTCPAutoCorking)
	e1=$(pb_event "$post" bbrx_autocork corked)
	pb_pos "$c1"
	check_err $? "AutocorkCorked did not move with autocork=1 ('$c1')"
	pb_pos "$a1"
	check_err $? "TcpExtTCPAutoCorking did not move with autocork=1 ('$a1')"
	[[ $c0 =~ ^[0-9]+$ ]] && fcmp "$c0" '<=' "$(calc "${c1:-0} / 4")"
	check_err $? "AutocorkCorked with autocork=2 ('$c0') not at most a quarter of autocork=1's ($c1)"
	pb_pos "$d0"
	check_err $? "AutocorkDeclined did not move with autocork=2 ('$d0')"
	pb_pos "$e1"
	check_err $? "no bbrx_autocork decision=corked events with autocork=1"
	log_test "playbook autocork: corking counted with autocork=1, declined with 2" \
		"Corked $c0 -> $c1, Declined $d0 with 2, TCPAutoCorking $a1, corked events $e1; bytes/segment $(pb_field "$pre" bytes_per_seg data_segs_out) -> $(pb_field "$post" bytes_per_seg data_segs_out)"
}

pb_tsq()
{
	local pre post s0 w0 t0 s1 w1 e1

	pb_reset
	pb_late_completion 100 3000
	check_err $? "late-completion path setup failed"
	pb_set "$SND" scope=1 tsq=2
	PB_STATE="tsq=2 (old rule)"
	pb_during "$SND" tsq "0 2" pre pb_flow
	PB_STATE=
	pb_do "$SND" tsq 1 apply
	pb_knobs "$SND" apply scope=1 tsq=1
	PB_STATE="tsq=1"
	pb_during "$SND" tsq 2 post pb_flow
	PB_STATE=
	pb_do "$SND" tsq 3 rollback
	pb_knobs "$SND" "roll back" scope=0 tsq=0

	pre=$(pb_out tsq pre 2)
	post=$(pb_out tsq post 2)
	s0=$(pb_val "$pre" TsqSingleSkb)
	w0=$(pb_val "$pre" TsqWithheld)
	t0=$(pb_val "$pre" TsqThrottled)
	s1=$(pb_val "$post" TsqSingleSkb)
	w1=$(pb_val "$post" TsqWithheld)
	e1=$(pb_event "$post" bbrx_tsq single_skb)
	pb_pos "$w0" && pb_zero "$s0"
	check_err $? "tsq=2: TsqWithheld '$w0' (want > 0), TsqSingleSkb '$s0' (want 0)"
	pb_pos "$t0"
	check_err $? "tsq=2: TsqThrottled did not move ('$t0')"
	pb_pos "$s1" && pb_zero "$w1"
	check_err $? "tsq=1: TsqSingleSkb '$s1' (want > 0), TsqWithheld '$w1' (want 0)"
	pb_pos "$e1"
	check_err $? "no bbrx_tsq decision=single_skb events with tsq=1"
	log_test "playbook tsq: withheld with tsq=2, single-skb sends with 1" \
		"withheld $w0 -> $w1, single_skb $s0 -> $s1, throttled $t0 with 2, single_skb events $e1"
}

pb_rcvbuf()
{
	local pre post z0 z1 g1 e1

	pb_reset
	set_gso_max_segs 1
	shape_bottleneck 50 100000
	check_err $? "50 Mbit/s bottleneck setup failed"
	# The receiver as found: the kernel's sizing.
	PB_STATE="rcvbuf=0 (kernel)"
	pb_during "$RCV" rcvbuf "0 2" pre pb_flow
	PB_STATE=
	pb_do "$RCV" rcvbuf 1 apply
	pb_knobs "$RCV" apply scope=1 rcvbuf=1
	PB_STATE="rcvbuf=1"
	pb_during "$RCV" rcvbuf 2 post pb_flow
	PB_STATE=
	pb_do "$RCV" rcvbuf 3 rollback
	pb_knobs "$RCV" "roll back" scope=0 rcvbuf=0

	pre=$(pb_out rcvbuf pre 2)
	post=$(pb_out rcvbuf post 2)
	z0=$(pb_val "$pre" RcvbufSized)
	z1=$(pb_val "$post" RcvbufSized)
	g1=$(pb_val "$post" RcvbufGrown)
	e1=$(pb_event "$post" bbrx_rcvbuf sized)
	pb_zero "$z0"
	check_err $? "rcvbuf=0: RcvbufSized moved ('$z0')"
	pb_pos "$z1"
	check_err $? "rcvbuf=1: RcvbufSized did not move ('$z1')"
	pb_pos "$e1"
	check_err $? "no bbrx_rcvbuf decision=sized events with rcvbuf=1"
	log_test "playbook rcvbuf: new connections sized with rcvbuf=1 only" \
		"RcvbufSized $z0 -> $z1, RcvbufGrown $g1, sized events $e1 ($(awk '$2 == "bbrx_rcvbuf" && $3 == "decision=sized" { print $6 }' "$post"))"
}

pb_delack()
{
	local pre post s0 m0 s1 e1 r0 r1

	pb_reset
	set_gso_max_segs 1
	shape_sender_fq 20
	check_err $? "fq maxrate 20 Mbit/s on the sender failed"
	sender_cwnd_lock 4
	check_err $? "cwnd lock 4 failed: $SENDER_METRICS"
	PB_STATE="delack=0 (kernel)"
	pb_during "$RCV" delack "0 2" pre pb_flow -l 1448 -N
	PB_STATE=
	pb_do "$RCV" delack 1 apply
	pb_knobs "$RCV" apply scope=1 delack=2
	PB_STATE="delack=2"
	pb_during "$RCV" delack 2 post pb_flow -l 1448 -N
	PB_STATE=
	pb_do "$RCV" delack 3 rollback
	pb_knobs "$RCV" "roll back" scope=0 delack=0

	pre=$(pb_out delack pre 2)
	post=$(pb_out delack post 2)
	s0=$(pb_val "$pre" DelackPushSuppressed)
	m0=$(pb_val "$pre" DelackPushMarked)
	s1=$(pb_val "$post" DelackPushSuppressed)
	e1=$(pb_event "$post" bbrx_delack suppressed)
	r0=$(pb_field "$pre" acks_per_seg segs_in)
	r1=$(pb_field "$post" acks_per_seg segs_in)
	pb_zero "$s0" && pb_zero "$m0"
	check_err $? "delack=0: bbrx counted (suppressed '$s0', marked '$m0')"
	pb_pos "$s1"
	check_err $? "delack=2: DelackPushSuppressed did not move ('$s1')"
	pb_pos "$e1"
	check_err $? "no bbrx_delack decision=suppressed events with delack=2"
	[[ -n $r0 && -n $r1 ]] && fcmp "$r0" '>=' "$(calc "1.25 * $r1")"
	check_err $? "ACKs per data segment '$r0' with delack=0 not >= 1.25x '$r1' with 2"
	log_test "playbook delack: pushed-segment ACKs suppressed with delack=2" \
		"suppressed $s0 -> $s1 (events $e1), ACKs per segment $r0 -> $r1"
}

##############################################################################
# The models

pb_gso()
{
	local pre post g0 g1 g6 w0 w1 cc0 cc1 cc6

	pb_reset
	set_gso_max_segs 2
	[[ $(get_gso_max_segs) == 2 ]]
	check_err $? "sender gso_max_segs is $(get_gso_max_segs), not 2"
	pb_set "$SND" pacing_shift=6 cc=bbrx gso_cap=1
	PB_STATE="bbrx gso_cap=1 (pre-fix)"
	pb_during "$SND" gso "0 2" pre pb_flow
	# Recognise again with an IPv6 PEER, in brackets, on an IPv6 flow:
	# ip route get takes it without them, ss with.
	PB_STATE="bbrx gso_cap=1, IPv6" FLOW_V6=1 pb_during "$SND" gso 0 pre6 pb_flow
	PB_STATE=
	pb_do "$SND" gso 1 apply
	pb_knobs "$SND" apply gso_cap=0 cc=bbrx
	PB_STATE="bbrx gso_cap=0"
	pb_during "$SND" gso 2 post pb_flow
	PB_STATE=
	pb_do "$SND" gso 3 rollback
	pb_knobs "$SND" "roll back" cc=cubic gso_cap=0

	pre=$(pb_out gso pre 2)
	post=$(pb_out gso post 2)
	cc0=$(pb_field "$pre" cc data_segs_out)
	cc1=$(pb_field "$post" cc data_segs_out)
	g0=$(pb_field "$pre" goal data_segs_out bbrx)
	g1=$(pb_field "$post" goal data_segs_out bbrx)
	w0=$(pb_field "$pre" cwnd data_segs_out bbrx)
	w1=$(pb_field "$post" cwnd data_segs_out bbrx)
	[[ $cc0 == bbrx && $cc1 == bbrx ]]
	check_err $? "the watched flow ran '$cc0' / '$cc1', not bbrx"
	cc6=$(pb_field "$(pb_out gso pre6 0)" cc data_segs_out)
	g6=$(pb_field "$(pb_out gso pre6 0)" goal data_segs_out bbrx)
	grep -q "^route to \[$RCV_IP6\]: dev [^ ]* gso_max_segs 2$" "$(pb_out gso pre6 0)" &&
		[[ $cc6 == bbrx && $g6 == 2 ]]
	check_err $? "Recognise with PEER=[$RCV_IP6]: no route line with gso_max_segs 2, or flow '$cc6' goal '$g6'"
	[[ $g0 == 2 ]] && pb_pos "$g1" && ((g1 > 2))
	check_err $? "burst goal '$g0' with gso_cap=1 (want 2), '$g1' with 0 (want > 2)"
	pb_pos "$w0" && pb_pos "$w1" && fcmp "$w1" '>=' "$(calc "1.3 * $w0")"
	check_err $? "cwnd '$w1' with gso_cap=0 not >= 1.3x '$w0' with 1"
	log_test "playbook gso: goal and cwnd grow with gso_cap=0, Recognise works on IPv6" \
		"goal $g0 -> $g1, cwnd $w0 -> $w1, bbrx_round events $(pb_rounds "$post" bbrx_round)"
}

pb_shallow()
{
	local pre post cc0 cc1 i0 i1 rt0 rt1 bound r1

	pb_reset
	path_bottleneck 0.25
	check_err $? "0.25-BDP bottleneck setup failed"
	pb_set "$SND" cc=bbrx
	PB_STATE="default bbrx"
	pb_during "$SND" shallow "0 2" pre pb_flow
	PB_STATE=
	pb_do "$SND" shallow 1 apply
	pb_knobs "$SND" apply cc=bbrx3
	PB_STATE="default bbrx3"
	pb_during "$SND" shallow 2 post pb_flow
	PB_STATE=
	pb_do "$SND" shallow 3 rollback
	pb_knobs "$SND" "roll back" cc=cubic

	pre=$(pb_out shallow pre 2)
	post=$(pb_out shallow post 2)
	cc0=$(pb_field "$pre" cc data_segs_out)
	cc1=$(pb_field "$post" cc data_segs_out)
	i0=$(pb_val "$pre" Bbrx3SocketsInit)
	i1=$(pb_val "$post" Bbrx3SocketsInit)
	rt0=$(pb_val "$pre" TcpRetransSegs)
	rt1=$(pb_val "$post" TcpRetransSegs)
	bound=$(($(pb_val0 "$post" Bbrx3InflightHiLoss) + $(pb_val0 "$post" Bbrx3InflightLoLoss) +
		 $(pb_val0 "$post" Bbrx3StartupExitCong)))
	r1=$(pb_rounds "$post" bbrx3_round)
	[[ $cc0 == bbrx && $cc1 == bbrx3 ]]
	check_err $? "the watched flow ran '$cc0' then '$cc1', not bbrx then bbrx3"
	pb_zero "$i0" && pb_pos "$i1"
	check_err $? "Bbrx3SocketsInit '$i0' before (want 0), '$i1' after (want > 0)"
	pb_pos "$r1"
	check_err $? "no bbrx3_round events after the switch"
	# bbrx3_paths' rule: a flow that lost packets sets a bound.
	! pb_pos "$rt1" || pb_pos "$bound"
	check_err $? "bbrx3 retransmitted $rt1 segments and set no loss bound"
	log_test "playbook shallow: new flows run bbrx3 and bound their inflight" \
		"retransmits $rt0 -> $rt1, loss bounds $bound, bbrx3 rounds $r1"
}

pb_policer()
{
	local pre post l0 l1 cc0 cc1

	pb_reset
	shape_policer 20 65536 && shape_delay 40 &&
		ip netns exec "$SND" ethtool -K "$SND_IF" tso off gso off
	check_err $? "policer path setup failed (act_police, cls_matchall)"
	pb_set "$SND" cc=bbrx lt_bw=0
	PB_STATE="bbrx lt_bw=0"
	pb_during "$SND" policer "0 2" pre pb_flow
	PB_STATE=
	pb_do "$SND" policer 1 apply
	pb_knobs "$SND" apply lt_bw=1
	# lt_bw 0 cannot count at all; finding the policer takes longer.
	PB_WATCH=$WATCH_POLICER
	PB_STATE="bbrx lt_bw=1"
	pb_during "$SND" policer 2 post pb_flow
	PB_STATE=
	PB_WATCH=$WATCH_DEFAULT
	pb_do "$SND" policer 3 rollback
	pb_knobs "$SND" "roll back" cc=cubic lt_bw=1

	pre=$(pb_out policer pre 2)
	post=$(pb_out policer post 2)
	cc0=$(pb_field "$pre" cc data_segs_out)
	cc1=$(pb_field "$post" cc data_segs_out)
	l0=$(pb_val "$pre" LtBwUsed)
	l1=$(pb_val "$post" LtBwUsed)
	[[ $cc0 == bbrx && $cc1 == bbrx ]]
	check_err $? "the watched flow ran '$cc0' / '$cc1', not bbrx"
	pb_zero "$l0"
	check_err $? "LtBwUsed moved with lt_bw=0 ('$l0')"
	pb_pos "$l1"
	check_err $? "LtBwUsed did not move with lt_bw=1 ('$l1')"
	log_test "playbook policer: the policer found with lt_bw=1 only" \
		"LtBwUsed $l0 -> $l1, retransmits $(pb_val "$pre" TcpRetransSegs) -> $(pb_val "$post" TcpRetransSegs)"
}

pb_sharing()
{
	local pre post cc0 cc1 i1 r1

	pb_reset
	path_bottleneck 1
	check_err $? "1-BDP bottleneck setup failed"
	pb_server "$PB_PORT2"
	check_err $? "second iperf3 server did not start"
	pb_set "$SND" cc=bbrx
	PB_STATE="default bbrx, a cubic flow beside"
	pb_during "$SND" sharing "0 2" pre pb_flows_sharing
	PB_STATE=
	pb_do "$SND" sharing 1 apply
	pb_knobs "$SND" apply cc=bbrx3
	PB_STATE="default bbrx3, a cubic flow beside"
	pb_during "$SND" sharing 2 post pb_flows_sharing
	PB_STATE=
	pb_do "$SND" sharing 3 rollback
	pb_knobs "$SND" "roll back" cc=cubic

	pre=$(pb_out sharing pre 2)
	post=$(pb_out sharing post 2)
	cc0=$(pb_field "$pre" cc data_segs_out bbrx)
	cc1=$(pb_field "$post" cc data_segs_out bbrx3)
	i1=$(pb_val "$post" Bbrx3SocketsInit)
	r1=$(pb_rounds "$post" bbrx3_round)
	[[ $cc0 == bbrx && $cc1 == bbrx3 ]]
	check_err $? "no bbrx flow before ('$cc0') or no bbrx3 flow after ('$cc1')"
	[[ -n $(pb_field "$pre" cc data_segs_out cubic) && -n $(pb_field "$post" cc data_segs_out cubic) ]]
	check_err $? "the cubic flow beside was not seen"
	pb_pos "$i1" && pb_pos "$r1"
	check_err $? "after the switch: Bbrx3SocketsInit '$i1', bbrx3_round events '$r1'"
	log_test "playbook sharing: our flows move to bbrx3 beside cubic (shares printed only)" \
		"before: $(awk '$1 == "share" { printf "%s %s; ", $2, $3 }' "$pre")after: $(awk '$1 == "share" { printf "%s %s; ", $2, $3 }' "$post")"
}

require_command iperf3 jq ip tc ss nstat sysctl ethtool mountpoint
require_helper tx_delay
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_qdisc tbf fq netem
PB_DOC=$(pb_find_doc) ||
	ksft_exit_skip "docs/playbooks.md not found (set BBRX_PLAYBOOKS, or stage it next to this script)"
log_info "playbooks: $PB_DOC"
pb_extract
# The blocks run in a new bash: a fallback awk function (lib.sh) must go
# with them.
[[ $(type -t awk) == function ]] && export -f awk
# veth on purpose, whatever NETIFS says: the hook tests' paths.
use_veth "the playbooks run on the hook tests' paths"
require_topo
iperf3_server_start || exit 1

tests_run
tests_done
exit $EXIT_STATUS
