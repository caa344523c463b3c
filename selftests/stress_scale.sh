#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Scale: many concurrent bbrx flows through the router path (sender ->
# router -> receiver, lib_topo.sh topo_create), every hook policy
# non-zero (sender autocork 1 and tsq 1 for its bbrx sockets; receiver
# scope 1, rcvbuf 1, delack 1), and what bbrx allocates while they run.
#
#   default (make check)   BBRX_STRESS_FLOWS=200 flows for BBRX_STRESS_SECS=15 s
#   BBRX_STRESS_FULL=1     1000 flows for 120 s
#
# iperf3 caps -P at 128, so the flows are split over several client
# processes (at most 125 streams each, -C bbrx, 16 KiB writes), each with
# its own server in the receiver netns.  Each flow is paced by the
# sender's fq qdisc at BBRX_STRESS_TOTAL_MBIT (40) / flows (--fq-rate,
# SO_MAX_PACING_RATE, which bbrx honours).  fq, not TCP's own pacing
# timer, so that each flow's next packets wait in the qdisc, still
# charged to the socket: that is the state in which the send hooks act
# (autocork corks a partial tail, TSQ throttles).  With TCP's pacing
# timer a packet left the sender at once and the send counters moved by
# 0-46 in 15 s, too few to assert.  Under TCG, 1000 unpaced flows (bbrx, bbr and cubic
# alike, with or without a 100 Mbit/s router bottleneck) left the clients
# still connecting starved; iperf3 -b instead made the 8 clients spin in
# user space.  Even paced, setting up 1000 connections takes 45-120 s of
# mostly kernel time under TCG (cubic and in-tree bbr too), and the
# clients connect one after another, so the flows run for as long as the
# setup takes: each client's -t only bounds a hang, and once every flow is
# established (BBRX_STRESS_SETUP_MAX, 300 s, guards a hang there) they all
# run together for SECS more and are then stopped by the test: ss reads
# what every server-side socket received, then each client is killed
# (iperf3_kill, lib_flow.sh, says why not SIGTERM).  The servers' idle
# timeout (--rcv-timeout, 120 s by default) is raised to 600 s.
#
# Allocations: a tracefs instance of its own records kmem:kmalloc,
# kmem:kmem_cache_alloc and percpu:percpu_alloc_percpu filtered on a
# call_site inside tcp_bbrx's image (/proc/modules: base, size; the
# call_site of kmalloc_track_caller users such as kmemdup and of
# alloc_percpu is their caller's).  Allocations the kernel makes in
# functions bbrx calls are not attributed to bbrx.  A positive
# control first: creating a netns makes bbrx allocate (its sysctl table,
# kcalloc, and its counters, alloc_percpu), and both must be seen, so the
# filters are known to work.  Then from the moment
# every flow is established until the flows end: zero allocations from
# bbrx (asserted), against the ACKs the sender took in (TcpInSegs), so
# the figure printed is allocations per ACK.  Allocations while the
# connections were set up are printed, not asserted (per flow, not per ACK).
#
# Asserts: every iperf3 client ran until the test stopped it, and each
# of its streams' server-side sockets received data (ss, just before the
# stop); at least FLOWS bbrx sockets
# established at once and
# SocketsInit grew by FLOWS; the send and receive hook counters moved; the
# positive control; zero bbrx allocations while the flows ran; dmesg clean.
# Prints: memory per flow from /proc/meminfo (Slab, Percpu) and
# /proc/net/sockstat (TCP mem, pages) before and once all flows are up
# (both ends of a flow are in this host: one flow = two sockets plus the
# data in flight), goodput, ACKs.

ALL_TESTS="
	scale_flows_complete
	scale_bbrx_sockets
	scale_hooks_acted
	scale_alloc_control
	scale_no_alloc_per_ack
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

if [[ ${BBRX_STRESS_FULL:-0} == 1 ]]; then
	FLOWS=${BBRX_STRESS_FLOWS:-1000}
	SECS=${BBRX_STRESS_SECS:-120}
else
	FLOWS=${BBRX_STRESS_FLOWS:-200}
	SECS=${BBRX_STRESS_SECS:-15}
fi
SETUP_MAX=${BBRX_STRESS_SETUP_MAX:-300}
TOTAL_MBIT=${BBRX_STRESS_TOTAL_MBIT:-40}
RATE_K=$((TOTAL_MBIT * 1000 / FLOWS))
PER_PROC_MAX=125
NPROC=$(( (FLOWS + PER_PROC_MAX - 1) / PER_PROC_MAX ))
BASE_PORT=5501
ALLOC_EVENTS="kmem/kmalloc kmem/kmem_cache_alloc percpu/percpu_alloc_percpu"
TI=
CTRL_NS=scl-$SFX
EXTRA_NETNS=$CTRL_NS

# streams of client process I (0-based): FLOWS spread evenly.
streams_of()
{
	echo $(( FLOWS / NPROC + ($1 < FLOWS % NPROC ? 1 : 0) ))
}

# trace_setup: an instance with kmalloc, kmem_cache_alloc and
# percpu_alloc_percpu filtered on a call_site inside bbrx's image.
trace_setup()
{
	local base size lo hi ev f

	read -r base size < <(awk '$1 == "tcp_bbrx" { print $6, $2 }' /proc/modules)
	[[ -n $base && $((base)) -ne 0 ]] || { echo "# no address of tcp_bbrx in /proc/modules"; return 1; }
	# 64-bit addresses wrap in bash arithmetic; printf %x prints them back.
	lo=$(printf '0x%x' "$((base))")
	hi=$(printf '0x%x' "$((base + size))")
	BBRX_IMAGE="$lo-$hi"
	TI=$TRACEFS/instances/bbrx-scale-$SFX
	mkdir "$TI" || return 1
	echo 4096 >"$TI/buffer_size_kb"
	for ev in $ALLOC_EVENTS; do
		f="call_site >= $lo && call_site < $hi"
		echo "$f" >"$TI/events/$ev/filter" ||
			{ echo "# filter '$f' on $ev refused"; return 1; }
		echo 1 >"$TI/events/$ev/enable" || return 1
	done
}

trace_teardown()
{
	local ev

	[[ -n $TI && -d $TI ]] || return 0
	echo 0 >"$TI/tracing_on" 2>/dev/null
	echo 0 >"$TI/events/enable" 2>/dev/null
	for ev in $ALLOC_EVENTS; do
		echo 0 >"$TI/events/$ev/filter" 2>/dev/null
	done
	rmdir "$TI" 2>/dev/null
	TI=
}

# allocs_count FILE: "kmem percpu": kmalloc + kmem_cache_alloc events and
# percpu_alloc_percpu events in a saved trace (already filtered).
allocs_count()
{
	awk '/^#/ { next }
	     / (kmalloc|kmem_cache_alloc): / { km++ }
	     / percpu_alloc_percpu: / { pc++ }
	     END { print km + 0, pc + 0 }' "$1"
}

# mem_snap FILE: Slab and Percpu (kB), sockstat TCP mem (pages) and the
# established TCP sockets of the sender and the receiver.
mem_snap()
{
	{
		awk '$1 == "Slab:" || $1 == "Percpu:" { sub(/:$/, "", $1); print $1, $2 }' /proc/meminfo
		awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") print "TcpMem", $(i + 1) }' /proc/net/sockstat
		echo "SndEst $(ip netns exec "$SND" ss -tnH state established | wc -l)"
		echo "RcvEst $(ip netns exec "$RCV" ss -tnH state established | wc -l)"
	} >"$1"
}

snap_val()
{
	awk -v n="$2" '$1 == n { print $2 }' "$1"
}

# flows_established: established data and control connections to the
# servers in the sender netns (cheap: no tcp_info).
flows_established()
{
	ip netns exec "$SND" ss -tnH state established \
		"( dport >= :$BASE_PORT and dport < :$((BASE_PORT + NPROC)) )" 2>/dev/null | wc -l
}

# streams_receiving: "I STREAMS BYTES" for each client I: its server's
# established sockets in the receiver netns that received more than 4 KiB
# (the control connection carries less) and the bytes they received.
streams_receiving()
{
	ip netns exec "$RCV" ss -tinH state established \
		"( sport >= :$BASE_PORT and sport < :$((BASE_PORT + NPROC)) )" 2>/dev/null |
		awk -v base="$BASE_PORT" -v nproc="$NPROC" '
		!/^[ \t]/ { n = split($3, a, ":"); i = a[n] - base; next }
		match($0, /bytes_received:[0-9]+/) {
			b = substr($0, RSTART + 15, RLENGTH - 15) + 0
			if (b > 4096) {
				s[i]++
				by[i] += b
			}
		}
		END { for (i = 0; i < nproc; i++) print i, s[i] + 0, by[i] + 0 }'
}

# bbrx_established: established bbrx sockets in the sender netns.
bbrx_established()
{
	ip netns exec "$SND" ss -tinH state established 2>/dev/null | grep -cw bbrx
}

servers_start()
{
	local i p n

	for ((i = 0; i < NPROC; i++)); do
		p=$((BASE_PORT + i))
		ip netns exec "$RCV" iperf3 -s -p "$p" --rcv-timeout 600000 \
			>"$TMPD/server-$i.log" 2>&1 &
		bg_track $!
	done
	for ((n = 0; n < 100; n++)); do
		[[ $(ip netns exec "$RCV" ss -ltnH "sport >= :$BASE_PORT and sport < :$((BASE_PORT + NPROC))" | wc -l) -eq $NPROC ]] &&
			return 0
		sleep 0.1
	done
	echo "# iperf3 servers did not start"
	return 1
}

measure()
{
	local i p n t0 est=0 pids=() acks0 acks1 si0 si1

	ns_sysctl "$SND" net.core.somaxconn=4096
	ns_sysctl "$RCV" net.core.somaxconn=4096
	{ bbrx_sysctl_set "$SND" autocork 1 &&
	  bbrx_sysctl_set "$SND" tsq 1 &&
	  bbrx_sysctl_set "$RCV" scope 1 &&
	  bbrx_sysctl_set "$RCV" rcvbuf 1 &&
	  bbrx_sysctl_set "$RCV" delack 1; } || SETUP_ERR+=" policy sysctls failed;"
	tc -n "$SND" qdisc replace dev "$SND_IF" root fq ||
		SETUP_ERR+=" fq on $SND_IF;"
	servers_start || SETUP_ERR+=" servers;"

	# Positive control: a new netns makes bbrx allocate.
	if ! trace_setup; then
		SETUP_ERR+=" tracing setup failed;"
		return
	fi
	echo >"$TI/trace"
	ip netns add "$CTRL_NS" && ip netns del "$CTRL_NS"
	sleep 0.5
	cat "$TI/trace" >"$TMPD/trace-control.txt"
	read -r CTRL_KM CTRL_PC < <(allocs_count "$TMPD/trace-control.txt")
	echo >"$TI/trace"

	mem_snap "$TMPD/mem0"
	HS0=$(hooks_counters_sum "$SND")
	HR0=$(hooks_counters_sum "$RCV")
	si0=$(bbrx_stat SocketsInit "$SND")
	for ((i = 0; i < NPROC; i++)); do
		p=$((BASE_PORT + i))
		n=$(streams_of "$i")
		ip netns exec "$SND" timeout $((SETUP_MAX + SECS + 300)) iperf3 -c "$RCV_IP4" -p "$p" \
			-P "$n" -t $((SETUP_MAX + SECS + 240)) -C bbrx -l 16K --fq-rate "${RATE_K}K" -J \
			>"$TMPD/client-$i.json" 2>"$TMPD/client-$i.err" &
		pids+=($!)
		bg_track $!
	done
	# Connection setup: until every flow (and the NPROC control
	# connections) is established; SETUP_MAX only guards a hang.
	t0=$SECONDS
	while ((SECONDS - t0 < SETUP_MAX)); do
		est=$(flows_established)
		((est >= FLOWS + NPROC)) && break
		sleep 0.5
	done
	SETUP_SECS=$((SECONDS - t0))
	# All up: count the bbrx sockets and sample memory at once (each
	# client's -t started when its own streams were up).
	MAX_EST=$(bbrx_established)
	mem_snap "$TMPD/mem1"
	cat "$TI/trace" >"$TMPD/trace-setup.txt"
	echo >"$TI/trace"
	read -r SETUP_KM SETUP_PC < <(allocs_count "$TMPD/trace-setup.txt")
	acks0=$(snmp_get "$SND" TcpInSegs)

	# All flows together for SECS, then the test stops the clients.
	sleep "$SECS"
	streams_receiving >"$TMPD/clients.data"
	# stderr off: bash reports each killed job ("Killed").
	{
		for ((i = 0; i < NPROC; i++)); do
			if pgrep -P "${pids[i]}" -x iperf3 >/dev/null; then
				echo "$i" >>"$TMPD/clients.alive"
			fi
			iperf3_kill "${pids[i]}"
		done
		for ((i = 0; i < NPROC; i++)); do
			wait "${pids[i]}"
			echo "$i $?" >>"$TMPD/clients.rc"
		done
	} 2>/dev/null
	acks1=$(snmp_get "$SND" TcpInSegs)
	cat "$TI/trace" >"$TMPD/trace-run.txt"
	read -r RUN_KM RUN_PC < <(allocs_count "$TMPD/trace-run.txt")
	trace_teardown
	ACKS=$((acks1 - acks0))
	si1=$(bbrx_stat SocketsInit "$SND")
	SOCK_INIT=$(( ${si1:-0} - ${si0:-0} ))
	HS1=$(hooks_counters_sum "$SND")
	HR1=$(hooks_counters_sum "$RCV")
	HOOK_COUNTERS="sender: $(hooks_counters_list "$SND"); receiver: $(hooks_counters_list "$RCV")"
	report
}

report()
{
	local slab pcpu tcpm sin rin kib_flow

	slab=$(( $(snap_val "$TMPD/mem1" Slab) - $(snap_val "$TMPD/mem0" Slab) ))
	pcpu=$(( $(snap_val "$TMPD/mem1" Percpu) - $(snap_val "$TMPD/mem0" Percpu) ))
	tcpm=$(( $(snap_val "$TMPD/mem1" TcpMem) - $(snap_val "$TMPD/mem0" TcpMem) ))
	sin=$(snap_val "$TMPD/mem1" SndEst)
	rin=$(snap_val "$TMPD/mem1" RcvEst)
	kib_flow=$(calc "($slab + $pcpu + $tcpm * 4) / $FLOWS")
	read -r RCV_DATA RCV_MB < <(awk '{ n += $2; b += $3 }
		END { printf "%d %.1f\n", n, b / 1e6 }' "$TMPD/clients.data")
	echo "# $FLOWS bbrx flows ($NPROC iperf3 clients, ${SECS}s, -l 16K, paced at ${RATE_K} kbit/s each) over $SND_IF -> router -> veth; connections established after ${SETUP_SECS}s, $MAX_EST bbrx sockets established then; then ${SECS}s together; $RCV_MB MB received in all"
	echo "# hook counters at the end (0 before): $HOOK_COUNTERS"
	echo "# memory while they run, minus before: Slab $slab KiB, Percpu $pcpu KiB, TCP mem (sockstat) $((tcpm * 4)) KiB; established sockets: sender $sin, receiver $rin"
	echo "# memory per flow (two sockets and the data in flight): Slab $(calc "$slab / $FLOWS") KiB, Percpu $(calc "$pcpu * 1024 / $FLOWS") B, TCP mem $(calc "$tcpm * 4 / $FLOWS") KiB; $kib_flow KiB in all"
	echo "# allocations from tcp_bbrx ($BBRX_IMAGE): control (netns add/del) kmalloc/kmem_cache $CTRL_KM, percpu $CTRL_PC; connection setup $SETUP_KM, $SETUP_PC; while the flows ran $RUN_KM, $RUN_PC over $ACKS ACKs = $(calc "($RUN_KM + $RUN_PC) / ($ACKS > 0 ? $ACKS : 1)") per ACK"
}

scale_flows_complete()
{
	local i rc want got bad=

	[[ -z $SETUP_ERR ]]
	check_err $? "setup:$SETUP_ERR"
	# Each client was still running when the test stopped it (its
	# iperf3 alive, then killed: exit 137 from timeout) and each of its
	# streams had delivered data to its server then.
	while read -r i rc; do
		want=$(streams_of "$i")
		got=$(awk -v i="$i" '$1 == i { print $2 }' "$TMPD/clients.data")
		if ! grep -qx "$i" "$TMPD/clients.alive" 2>/dev/null || ((rc != 137)); then
			bad+=" [client $i: ended before the stop, exit $rc, $(head -c 200 "$TMPD/client-$i.err" 2>/dev/null | tr '\n' ' ') server: $(grep -iE 'error|unable|timeout' "$TMPD/server-$i.log" | tail -n 2 | tr '\n' ' ')]"
		elif ((${got:-0} < want)); then
			bad+=" [client $i: ${got:-0} of $want streams received data]"
		fi
	done <"$TMPD/clients.rc"
	[[ $(wc -l <"$TMPD/clients.rc") -eq $NPROC ]]
	check_err $? "not every client ran"
	[[ -z $bad ]]
	check_err $? "flows that did not run until the test stopped them:$bad"
	[[ ${RCV_DATA:-0} -ge $FLOWS ]]
	check_err $? "${RCV_DATA:-0} server-side sockets received data, expected $FLOWS"
	log_test "$FLOWS concurrent bbrx flows ran until stopped, every stream moved data" \
		"$RCV_MB MB received, $RCV_DATA streams received"
}

scale_bbrx_sockets()
{
	[[ ${MAX_EST:-0} -ge $FLOWS ]]
	check_err $? "${MAX_EST:-0} bbrx sockets established once all flows were up, expected $FLOWS"
	[[ ${SOCK_INIT:-0} -ge $FLOWS ]]
	check_err $? "SocketsInit grew by ${SOCK_INIT:-0}, expected >= $FLOWS"
	log_test "$FLOWS bbrx sockets established at once" "SocketsInit +$SOCK_INIT"
}

scale_hooks_acted()
{
	[[ ${HS1:-0} -gt ${HS0:-0} && ${HR1:-0} -gt ${HR0:-0} ]]
	check_err $? "hook counters: send ${HS0:-?} -> ${HS1:-?}, receive ${HR0:-?} -> ${HR1:-?}"
	log_test "send and receive hooks acted on the flows" \
		"send +$(( ${HS1:-0} - ${HS0:-0} )), receive +$(( ${HR1:-0} - ${HR0:-0} ))"
}

scale_alloc_control()
{
	[[ ${CTRL_KM:-0} -ge 1 ]]
	check_err $? "a new netns made no kmalloc from tcp_bbrx visible (filter on $BBRX_IMAGE broken?)"
	[[ ${CTRL_PC:-0} -ge 1 ]]
	check_err $? "a new netns made no percpu allocation from tcp_bbrx visible"
	log_test "allocation tracing sees bbrx's own allocations (netns add: kmalloc ${CTRL_KM:-0}, percpu ${CTRL_PC:-0})"
}

scale_no_alloc_per_ack()
{
	[[ ${ACKS:-0} -gt 0 ]]
	check_err $? "the sender took in no ACKs while the flows ran"
	[[ ${RUN_KM:-x} == 0 && ${RUN_PC:-x} == 0 ]]
	check_err $? "tcp_bbrx allocated while the flows ran: kmalloc/kmem_cache ${RUN_KM:-?}, percpu ${RUN_PC:-?} over ${ACKS:-?} ACKs"
	if [[ ${RUN_KM:-0} != 0 ]]; then
		grep -v '^#' "$TMPD/trace-run.txt" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^call_site=/) print $i }' |
			sort | uniq -c | sort -rn | head -n 5 | sed 's/^/# call sites: /'
	fi
	log_test "no allocation from tcp_bbrx while $FLOWS flows ran" "$ACKS ACKs"
}

scale_cleanup()
{
	trace_teardown
	cleanup
}
trap scale_cleanup EXIT

require_root
require_command iperf3 jq ip ss
tracefs_find instances || ksft_exit_skip "no tracefs with instances"
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_qdisc fq
require_topo
SETUP_ERR=
: >"$TMPD/clients.rc"
: >"$TMPD/clients.alive"
measure
tests_run
tests_done
exit $EXIT_STATUS
