#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, flows: iperf3 and its JSON, ping, the C
# helpers' sink, and batches of short flows cut on time.
#
# lib.sh sources it; a test sources lib.sh, never this file.

##############################################################################
# iperf3

# listen_wait NS PORT: wait up to 5 s for a TCP listener on PORT in NS.
listen_wait()
{
	local i

	for ((i = 0; i < 50; i++)); do
		[[ -n $(ip netns exec "$1" ss -ltnH "sport = :$2") ]] && return 0
		sleep 0.1
	done
	return 1
}

iperf3_server_start()
{
	ip netns exec "$RCV" iperf3 -s -p "$IPERF_PORT" >"$TMPD/iperf3-server.log" 2>&1 &
	bg_track $!
	listen_wait "$RCV" "$IPERF_PORT" && return 0
	echo "# iperf3 server did not start"
	return 1
}

# flow_run ID CC SECS [iperf3 client args...]
#   One iperf3 flow snd -> rcv with congestion control CC (sent as -C CC;
#   CC "-" leaves the default).  Results in $TMPD/ID.json.  Optional:
#   FLOW_V6=1      use IPv6
#   FLOW_SS=SEC    sample `ss -ti` of the data socket every SEC s -> ID.ss
#   FLOW_PING=1    ping snd -> rcv every 0.1 s from 2 s to the end -> ID.ping
#   FLOW_BEFORE / FLOW_AFTER: commands run before/after (eval'd)
#   Sets FLOW_CPORT (the data stream's client port).
flow_run()
{
	local id=$1 cc=$2 secs=$3; shift 3
	local pre=$TMPD/$id dst=$RCV_IP4 rc spid= ppid= pdur
	local -a ccarg=()

	[[ ${FLOW_V6:-0} -eq 1 ]] && dst=$RCV_IP6
	[[ $cc != - ]] && ccarg=(-C "$cc")
	CPORT=$((CPORT + 1))
	FLOW_CPORT=$CPORT
	rm -f "$pre".*

	if [[ -n ${FLOW_SS:-} ]]; then
		ss_sampler_start "$SND" "$FLOW_CPORT" "$pre.ss" "$FLOW_SS"
		spid=$SS_SAMPLER_PID
	fi
	if [[ ${FLOW_PING:-0} -eq 1 ]]; then
		pdur=$((secs - 3))
		((pdur < 1)) && pdur=1
		(sleep 2; exec ip netns exec "$SND" ping -n -i 0.1 -w "$pdur" "$dst") \
			>"$pre.ping" 2>&1 &
		ppid=$!
		bg_track $ppid
	fi
	ip netns exec "$SND" timeout $((secs + 60)) iperf3 -c "$dst" -p "$IPERF_PORT" \
		--cport "$FLOW_CPORT" -t "$secs" "${ccarg[@]}" -J "$@" \
		>"$pre.json" 2>"$pre.err"
	rc=$?
	[[ -n $ppid ]] && wait "$ppid" 2>/dev/null
	[[ -n $spid ]] && bg_kill "$spid"
	if [[ $rc -ne 0 ]]; then
		echo "# iperf3 ($id, $cc) exit $rc: $(jq -r '.error // empty' "$pre.json" 2>/dev/null) $(head -c 300 "$pre.err")"
	fi
	return $rc
}

iperf3_goodput()	# Mbit/s received
{
	jq -r '(.end.sum_received.bits_per_second // 0) / 1e6 | . * 100 | round / 100' "$1" 2>/dev/null || echo 0
}

iperf3_retrans()
{
	jq -r '.end.sum_sent.retransmits // 0' "$1" 2>/dev/null || echo 0
}

iperf3_max_cwnd()	# segments
{
	jq -r --argjson mss "$MSS" '(.end.streams[0].sender.max_snd_cwnd // 0) / $mss | round' "$1" 2>/dev/null || echo 0
}

iperf3_mean_cwnd()	# segments, mean of the per-interval samples
{
	jq -r --argjson mss "$MSS" '[.intervals[].streams[0].snd_cwnd] | if length > 0 then add / length / $mss | round else 0 end' "$1" 2>/dev/null || echo 0
}

iperf3_mean_rtt()	# ms, iperf3's smoothed RTT mean
{
	jq -r '(.end.streams[0].sender.mean_rtt // 0) / 1000' "$1" 2>/dev/null || echo 0
}

iperf3_cc()
{
	jq -r '.end.sender_tcp_congestion // empty' "$1" 2>/dev/null
}

##############################################################################
# ping

# ping_median FILE: median RTT in ms of the replies in a ping log.
ping_median()
{
	sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' "$1" | median
}

ping_count()
{
	grep -c ' time=' "$1"
}

##############################################################################
# Helpers: the cc_setsockopt C helper

# require_helper [NAME...]: skip unless these C helpers (default
# cc_setsockopt) are built.
require_helper()
{
	local h

	for h in "${@:-cc_setsockopt}"; do
		[[ -x $BIN_DIR/$h ]] ||
			ksft_exit_skip "$h not built in $BIN_DIR (run make -C selftests on the host)"
	done
}

# ss_sink_flow SECS: the ss_parse line of the sender's established
# connection to the sink (sink_start), waiting up to SECS seconds for one.
ss_sink_flow()
{
	local i line

	for ((i = 0; i < $1 * 5; i++)); do
		line=$({ echo "@ 0"; ip netns exec "$SND" ss -tinH state established \
			"( dport = :$SINK_PORT )"; } | ss_parse | head -n 1)
		if [[ -n $line ]]; then
			echo "$line"
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# sink_start [-6]: start a discard server on SINK_PORT in the receiver.
sink_start()
{
	ip netns exec "$RCV" "$BIN_DIR/cc_setsockopt" -l "$@" "$SINK_PORT" \
		>"$TMPD/sink.log" 2>&1 &
	bg_track $!
	listen_wait "$RCV" "$SINK_PORT"
}

# iperf3_sent_bytes FILE: bytes the sender wrote.
iperf3_sent_bytes()
{
	jq -r '.end.sum_sent.bytes // 0' "$1" 2>/dev/null || echo 0
}

# iperf3_sent_mbit FILE: sender-side throughput, Mbit/s.
iperf3_sent_mbit()
{
	jq -r '(.end.sum_sent.bits_per_second // 0) / 1e6 | . * 100 | round / 100' "$1" 2>/dev/null || echo 0
}

##############################################################################
# Batches of short flows

# flow_batch_run NS PIDFILE OUT CMD...: run CMD (timeout ... iperf3 -J)
# in NS in the background, stdout in OUT.json, stderr in OUT.err, "PID
# OUT" in PIDFILE for flow_batch_cut; waits for it and returns its exit
# code.
flow_batch_run()
{
	local ns=$1 pidf=$2 out=$3; shift 3
	local pid

	ip netns exec "$ns" "$@" >"$out.json" 2>"$out.err" &
	pid=$!
	echo "$pid $out" >"$pidf"
	# stderr off: bash reports a job flow_batch_cut killed ("Killed").
	wait "$pid" 2>/dev/null
}

# streams_acked NS PID: data streams of iperf3 process PID in NS that had
# more than 4 KiB ACKed (the control connection carries less).
streams_acked()
{
	ip netns exec "$1" ss -tinpH state established 2>/dev/null | awk -v p="pid=$2," '
		!/^[ \t]/ { mine = index($0, p) > 0; next }
		mine && match($0, /bytes_acked:[0-9]+/) {
			if (substr($0, RSTART + 12, RLENGTH - 12) + 0 > 4096)
				n++
		}
		END { print n + 0 }'
}

# iperf3_kill PID: kill the iperf3 that PID runs (PID is the "ip netns
# exec" process, which has become timeout, whose child is iperf3; or
# iperf3 itself) with SIGKILL.  Tests never stop iperf3 with SIGTERM or
# SIGINT: its handler leaves through longjmp and then allocates and
# prints, so a signal that lands inside malloc aborts it ("malloc
# assertion failure in sysmalloc", exit 134; seen once in stress_scale
# under iperf3 3.12).  What a killed iperf3 moved is read from ss before
# the kill instead of from its JSON.
iperf3_kill()
{
	local ipid

	ipid=$(pgrep -P "$1" -x iperf3 | head -n 1)
	kill -KILL "${ipid:-$1}" 2>/dev/null
}

# flow_batch_cut LOOPPID PIDFILE NS STREAMS CUTFILE: end a batch loop once
# $TMPD/stop exists (the caller touches it).  Instead of waiting for the
# batch that runs to end, it is killed (iperf3_kill), but only once its
# STREAMS data streams have each had data ACKed (ss), so that a cut batch
# still shows every stream moving data; "OUT ACKED" (PIDFILE's OUT, the
# streams seen with data ACKed) is appended to CUTFILE.  Waits for the
# loop to end.
flow_batch_cut()
{
	local lpid=$1 pidf=$2 ns=$3 streams=$4 cutf=$5 pid out ipid cut= n

	while kill -0 "$lpid" 2>/dev/null; do
		read -r pid out <"$pidf" 2>/dev/null
		if [[ -n $pid && $out != "$cut" ]] && kill -0 "$pid" 2>/dev/null; then
			ipid=$(pgrep -P "$pid" -x iperf3 | head -n 1)
			if [[ -n $ipid ]]; then
				n=$(streams_acked "$ns" "$ipid")
				if ((n >= streams)) && kill -KILL "$ipid" 2>/dev/null; then
					echo "$out $n" >>"$cutf"
					cut=$out
				fi
			fi
		fi
		sleep 0.2
	done
	wait "$lpid"
}

# batch_outcome OUT STREAMS RC CUTFILE: "" when the batch OUT completed
# (exit 0, STREAMS streams, each with data received) or was cut by
# flow_batch_cut (listed in CUTFILE with STREAMS streams seen with data
# ACKed, killed: exit 137 from timeout); otherwise what went wrong.
batch_outcome()
{
	local out=$1 want=$2 rc=$3 cutf=$4 n nz err acked

	acked=$(awk -v o="$out" '$1 == o { print $2 }' "$cutf" 2>/dev/null)
	if [[ -n $acked ]]; then
		((rc == 137 && acked >= want)) && return 0
		echo "cut by the test with $acked of $want streams ACKed, exit $rc"
		return 1
	fi
	err=$(jq -r '.error // empty' "$out.json" 2>/dev/null)
	n=$(jq '[.end.streams[]?] | length' "$out.json" 2>/dev/null)
	nz=$(jq '[.end.streams[]? | select(.receiver.bytes > 0)] | length' "$out.json" 2>/dev/null)
	[[ $rc -eq 0 && $n == "$want" && $nz == "$want" ]] && return 0
	echo "exit $rc, $n streams, $nz with data ($err $(head -c 100 "$out.err" 2>/dev/null))"
	return 1
}

# flow_batches_loop: batches of FLOWS cubic flows (iperf3 -P, 8 KiB writes,
# TCP_NODELAY) of BATCH s each from SND to the receiver, back to back,
# until $TMPD/stop exists; batch K's iperf3 JSON in flows-K.json, "K rc"
# lines in flows.rc.  Batches keep the duration adaptive to the test's;
# flow_batches_stop ends the last one early.
flow_batches_loop()
{
	local k=0

	while [[ ! -e $TMPD/stop ]]; do
		flow_batch_run "$SND" "$TMPD/flows.pid" "$TMPD/flows-$k" \
			timeout $((BATCH + 120)) iperf3 -c "$RCV_IP4" -p "$IPERF_PORT" \
			-P "$FLOWS" -t "$BATCH" -C cubic -l 8K -N -J
		echo "$k $?" >>"$TMPD/flows.rc"
		k=$((k + 1))
	done
}

# flow_batches_stop LOOPPID: stop flow_batches_loop LOOPPID, cutting the
# batch that runs (flow_batch_cut) rather than waiting for its end.
flow_batches_stop()
{
	touch "$TMPD/stop"
	flow_batch_cut "$1" "$TMPD/flows.pid" "$SND" "$FLOWS" "$TMPD/flows.cut"
}

# flow_batches_check: every batch flow_batches_loop ran exited 0 with FLOWS
# streams that all moved data, or was cut by flow_batches_stop after each
# of its streams moved data (check_err otherwise); NB = batches, NCUT =
# batches cut.
flow_batches_check()
{
	local k rc bad= why

	NB=0
	NCUT=$(wc -l <"$TMPD/flows.cut" 2>/dev/null || echo 0)
	while read -r k rc; do
		NB=$((NB + 1))
		why=$(batch_outcome "$TMPD/flows-$k" "$FLOWS" "$rc" "$TMPD/flows.cut") ||
			bad+=" batch $k: $why;"
	done <"$TMPD/flows.rc"
	((NB > 0))
	check_err $? "no flow batch ran"
	[[ -z $bad ]]
	check_err $? "flows that did not complete:$bad"
}
