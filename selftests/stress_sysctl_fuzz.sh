#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stress: fuzz every net.ipv4.bbrx.* knob from 4 network namespaces at the
# same time while flows run.
#
# The namespaces are the sender, router and receiver of the usual topology
# (4 cubic flows and one bbrx flow run sender -> receiver in back-to-back
# batches) and a fourth netns whose default is bbrx, with a bbrx flow over
# its loopback.  In each netns one writer makes WRITES random writes
# through /proc/sys (one write(2) each, as `printf '%s\n'` does), each
# followed by a read of the same knob:
#   valid:   values from the netns' own set (knob range split by residue: in
#            netns K, (value - min) mod M == K mod M with M = min(4, range
#            size)), its lowest and highest element (together the four
#            netns hit min and max of every knob), and the same values in
#            hex (0x..), with leading blanks and with a trailing tab;
#   invalid: min-1, max+1, random values below and above the range,
#            +-2^31, +-(2^31-1), 2^32 + a valid value (a 32-bit wrap would
#            land in range), 2^63, 2^64-1, 2^64, a 23-digit number, the
#            negated valid value, and text: empty, blanks, "abc", "1.5",
#            "<v>abc", "+<v>", "--<v>", "-", "0x", "<v>e3", "1,2", a byte
#            0xff.
# Asserts:
#   - every valid write succeeds and reads back as the value written;
#   - every invalid write fails with EINVAL and leaves the value as it was
#     (the netns' last successful write: each netns has one writer);
#   - no write is lost or torn and none leaks into another netns: a reader
#     per netns, running alongside, only ever sees the default or a value
#     of its own netns' set, and after all writers stopped every knob of
#     every netns equals that netns' last successful write;
#   - the flows completed; after the policies are back at 0 in every netns,
#     the lazy hooks' armed= is back to its value at the start (0);
#   - dmesg clean.
# The policies (autocork, tsq, rcvbuf, delack) are fuzzed like the other
# knobs; their non-zero values need the hooks, which are installed here.
#
# Short form (make check): 4 x 250 writes.  BBRX_STRESS_FULL=1: 4 x 2500.
# BBRX_FUZZ_WRITES overrides the per-netns count, BBRX_SEED the random
# seed (printed, so a failing run can be repeated).

ALL_TESTS="
	fuzz_writes_checked
	fuzz_no_lost_or_torn_write
	fuzz_flows_completed
	fuzz_hooks_released
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

if [[ ${BBRX_STRESS_FULL:-0} == 1 ]]; then
	WRITES=${BBRX_FUZZ_WRITES:-2500}
else
	WRITES=${BBRX_FUZZ_WRITES:-250}
fi
SEED=${BBRX_SEED:-$(( (RANDOM << 15) | RANDOM ))}
BATCH=10
XNS=fzx-$SFX
NSS=()
SYSDIR=/proc/sys/net/ipv4/bbrx

# name default min max: the model knobs and the hook policies (lib_module.sh).
FUZZ_TABLE="$BBRX_SYSCTL_TABLE
$BBRX_POLICY_TABLE"

# armed_tokens: "hook=0|1 ..." for the lazy hooks of /proc/net/bbrx_hooks
# (the armed= token anywhere after the first three fields).
armed_tokens()
{
	awk '{ for (i = 4; i <= NF; i++) if ($i ~ /^armed=[01]$/) printf "%s=%s ", $1, substr($i, 7) }' \
		/proc/net/bbrx_hooks 2>/dev/null
}

# fuzz_writer K N SEED OUT TABLE: run inside netns K.  Writes "counts" and
# the last successful value of every knob ("last.K"), and one line per
# violation to "viol.K".
fuzz_writer()
{
	local k=$1 n=$2 seed=$3 out=$4 table=$5
	local d=/proc/sys/net/ipv4/bbrx ef=$out/err.$k
	local -a nm lo hi
	local -A last
	local i j name def min max m r cnt v s exp rc err now cls big
	local nvalid=0 ninval=0 nbad=0 nread=0

	while read -r name def min max; do
		nm+=("$name") lo+=("$min") hi+=("$max")
		read -r now <"$d/$name"
		last[$name]=$now
	done <<<"$table"
	RANDOM=$seed
	: >"$out/viol.$k"
	for ((i = 0; i < n; i++)); do
		j=$((RANDOM % ${#nm[@]}))
		name=${nm[j]} min=${lo[j]} max=${hi[j]}
		m=$((max - min + 1))
		((m > 4)) && m=4
		r=$((k % m))
		cnt=$(( (max - min - r) / m + 1 ))
		big=$(( (RANDOM << 15) | RANDOM ))
		v=$((min + r + m * (big % cnt)))
		exp=EINVAL
		cls=$((RANDOM % 40))
		case $cls in
		0) v=$((min + r)); s=$v; exp=$v ;;
		1) v=$((min + r + m * (cnt - 1))); s=$v; exp=$v ;;
		[2-9]|1[0-1]) s=$v; exp=$v ;;
		12) s=$(printf '0x%x' "$v"); exp=$v ;;
		13) s="  $v"; exp=$v ;;
		14) s="$v"$'\t'; exp=$v ;;
		15) s=$((min - 1)) ;;
		16) s=$((max + 1)) ;;
		17) s=$((min - 1 - big)) ;;
		18) s=$((max + 1 + big)) ;;
		19) s=2147483647 ;;
		20) s=2147483648 ;;
		21) s=-2147483648 ;;
		22) s=-2147483649 ;;
		23) s=$((4294967296 + v)) ;;
		24) s=9223372036854775808 ;;
		25) s=18446744073709551615 ;;
		26) s=18446744073709551616 ;;
		27) s=12345678901234567890123 ;;
		28) s=-$((v + 1)) ;;
		29) s= ;;
		30) s="   " ;;
		31) s=abc ;;
		32) s=1.5 ;;
		33) s="${v}abc" ;;
		34) s="+$v" ;;
		35) s="--$v" ;;
		36) s=- ;;
		37) s=0x ;;
		38) s="${v}e3" ;;
		39) s=$'1,2' ;;
		esac
		((cls == 39 && RANDOM % 2)) && s=$'\xff'
		{ printf '%s\n' "$s" >"$d/$name"; } 2>"$ef"
		rc=$?
		err=
		[[ -s $ef ]] && read -r err <"$ef"
		read -r now <"$d/$name"
		if [[ $exp == EINVAL ]]; then
			ninval=$((ninval + 1))
			if ((rc == 0)); then
				echo "netns $k write $i: $name='$s' (out of range) succeeded, now '$now'" >>"$out/viol.$k"
				nbad=$((nbad + 1))
			elif [[ $err != *"Invalid argument"* ]]; then
				echo "netns $k write $i: $name='$s' failed with '$err', not EINVAL" >>"$out/viol.$k"
				nbad=$((nbad + 1))
			fi
			if [[ $now != "${last[$name]}" ]]; then
				echo "netns $k write $i: $name='$s' rejected, but the value went ${last[$name]} -> '$now'" >>"$out/viol.$k"
				nbad=$((nbad + 1))
				last[$name]=$now
			fi
		else
			nvalid=$((nvalid + 1))
			if ((rc != 0)); then
				echo "netns $k write $i: $name='$s' (valid) failed: $err; value '$now'" >>"$out/viol.$k"
				nbad=$((nbad + 1))
				last[$name]=$now
			else
				last[$name]=$exp
				if [[ $now != "$exp" ]]; then
					echo "netns $k write $i: $name='$s' accepted, reads '$now'" >>"$out/viol.$k"
					nbad=$((nbad + 1))
				fi
			fi
		fi
		nread=$((nread + 1))
	done
	for name in "${nm[@]}"; do
		echo "$name ${last[$name]}"
	done >"$out/last.$k"
	echo "$nvalid $ninval $nbad" >"$out/counts.$k"
}

# fuzz_reader K OUT TABLE: run inside netns K until OUT/stop exists; every
# value read must be the default or in the netns' own set.
fuzz_reader()
{
	local k=$1 out=$2 table=$3
	local d=/proc/sys/net/ipv4/bbrx
	local -a nm df lo hi
	local j name def min max m now nr=0 nbad=0

	while read -r name def min max; do
		nm+=("$name") df+=("$def") lo+=("$min") hi+=("$max")
	done <<<"$table"
	: >"$out/rviol.$k"
	while [[ ! -e $out/stop ]]; do
		j=$((RANDOM % ${#nm[@]}))
		name=${nm[j]} min=${lo[j]} max=${hi[j]}
		m=$((max - min + 1))
		((m > 4)) && m=4
		read -r now <"$d/$name"
		nr=$((nr + 1))
		[[ $now == "${df[j]}" ]] && continue
		if ! [[ $now =~ ^-?[0-9]+$ ]] || ((now < min || now > max ||
						   (now - min) % m != k % m)); then
			echo "netns $k read $nr: $name='$now' is neither the default nor a value this netns wrote" >>"$out/rviol.$k"
			nbad=$((nbad + 1))
		fi
	done
	echo "$nr $nbad" >"$out/rcounts.$k"
}

# flows_loop NS DST PORT CC P TAG: batches of P flows (BATCH s) from NS to
# the iperf3 server at DST:PORT (one test at a time per server) until $TMPD/stop exists; "TAG K rc P" lines in flows.rc; the running
# batch in flows-TAG.pid (flow_batch_cut ends the last one early).
flows_loop()
{
	local ns=$1 dst=$2 port=$3 cc=$4 p=$5 tag=$6 k=0

	while [[ ! -e $TMPD/stop ]]; do
		flow_batch_run "$ns" "$TMPD/flows-$tag.pid" "$TMPD/flows-$tag-$k" \
			timeout $((BATCH + 120)) iperf3 -c "$dst" \
			-p "$port" -P "$p" -t "$BATCH" -C "$cc" -J
		echo "$tag $k $? $p" >>"$TMPD/flows.rc"
		k=$((k + 1))
	done
}

ARMED_START=
FUZZ_TIME=0

measure()
{
	local k pids=() rpids=() fpids=() t0 name val tag p ns

	ARMED_START=$(armed_tokens)
	EXTRA_NETNS+=" $XNS"
	ip netns add "$XNS" && ip -n "$XNS" link set lo up &&
		ns_sysctl "$XNS" net.ipv4.tcp_congestion_control=bbrx || return 1
	ip netns exec "$XNS" iperf3 -s -p "$IPERF_PORT" >"$TMPD/xns-server.log" 2>&1 &
	bg_track $!
	NSS=("$SND" "$RTR" "$RCV" "$XNS")

	: >"$TMPD/flows.rc"
	# The bbrx flow has a server of its own: an iperf3 server runs one
	# test at a time and answers another client "busy".
	ip netns exec "$RCV" iperf3 -s -p $((IPERF_PORT + 1)) >"$TMPD/bbrx-server.log" 2>&1 &
	bg_track $!
	for ((k = 0; k < 600; k++)); do
		[[ -n $(ip netns exec "$RCV" ss -ltnH "sport = :$((IPERF_PORT + 1))") ]] && break
		sleep 0.1
	done
	flows_loop "$SND" "$RCV_IP4" "$IPERF_PORT" cubic 4 cubic &
	fpids+=($!)
	flows_loop "$SND" "$RCV_IP4" $((IPERF_PORT + 1)) bbrx 1 bbrx &
	fpids+=($!)
	sleep 1
	flows_loop "$XNS" 127.0.0.1 "$IPERF_PORT" bbrx 1 xns &
	fpids+=($!)
	bg_track "${fpids[@]}"
	sleep 2

	log_info "seed $SEED (BBRX_SEED=$SEED repeats this run), $WRITES writes per netns"
	t0=$SECONDS
	for ((k = 0; k < 4; k++)); do
		ip netns exec "${NSS[k]}" bash -c "$(declare -f fuzz_reader); fuzz_reader $k '$TMPD' '$FUZZ_TABLE'" &
		rpids+=($!)
		bg_track $!
		ip netns exec "${NSS[k]}" bash -c "$(declare -f fuzz_writer); fuzz_writer $k $WRITES $((SEED + k)) '$TMPD' '$FUZZ_TABLE'" &
		pids+=($!)
		bg_track $!
	done
	for k in "${pids[@]}"; do
		wait "$k"
	done
	touch "$TMPD/stop"
	for k in "${rpids[@]}"; do
		wait "$k"
	done
	FUZZ_TIME=$((SECONDS - t0))
	# The batches running now are cut once their streams moved data.
	k=0
	for tag in cubic:4:$SND bbrx:1:$SND xns:1:$XNS; do
		IFS=: read -r tag p ns <<<"$tag"
		flow_batch_cut "${fpids[k]}" "$TMPD/flows-$tag.pid" "$ns" "$p" "$TMPD/flows.cut"
		k=$((k + 1))
	done

	# The values every netns ended with, read after every writer stopped.
	for ((k = 0; k < 4; k++)); do
		while read -r name _; do
			echo "$name $(ip netns exec "${NSS[k]}" cat "$SYSDIR/$name" 2>&1)"
		done <<<"$FUZZ_TABLE" >"$TMPD/final.$k"
	done
	# Back to the defaults (policies 0 first drop every hook user).
	for ((k = 0; k < 4; k++)); do
		while read -r name val _; do
			bbrx_sysctl_set "${NSS[k]}" "$name" "$val"
		done <<<"$FUZZ_TABLE"
	done
}

fuzz_writes_checked()
{
	local k nv ni nb tv=0 ti=0 tb=0 viol

	for ((k = 0; k < 4; k++)); do
		if [[ ! -s $TMPD/counts.$k ]]; then
			check_err 1 "writer in netns $k (${NSS[k]:-?}) did not finish"
			continue
		fi
		read -r nv ni nb <"$TMPD/counts.$k"
		tv=$((tv + nv)) ti=$((ti + ni)) tb=$((tb + nb))
	done
	echo "# fuzzed writes: $((tv + ti)) in 4 netns ($tv valid, $ti invalid) in ${FUZZ_TIME}s, each read back"
	viol=$(cat "$TMPD"/viol.* 2>/dev/null)
	[[ $tb -eq 0 && -z $viol ]]
	check_err $? "$tb violation(s): $(head -n 1 <<<"$viol")"
	[[ -n $viol ]] && head -n 20 <<<"$viol" | sed 's/^/# /'
	log_test "valid writes read back, invalid ones fail with EINVAL and change nothing" \
		"$((tv + ti)) writes"
}

fuzz_no_lost_or_torn_write()
{
	local k nr nb tr=0 tb=0 viol diffs=

	for ((k = 0; k < 4; k++)); do
		if [[ -s $TMPD/rcounts.$k ]]; then
			read -r nr nb <"$TMPD/rcounts.$k"
			tr=$((tr + nr)) tb=$((tb + nb))
		else
			check_err 1 "reader in netns $k did not finish"
		fi
		if [[ -s $TMPD/last.$k ]]; then
			diffs+=$(diff "$TMPD/last.$k" "$TMPD/final.$k" |
				sed -n "s/^> \(.*\)/netns $k: now \1, /p; s/^< \(.*\)/last write \1; /p" | tr -d '\n')
		fi
	done
	echo "# concurrent reads checked: $tr"
	viol=$(cat "$TMPD"/rviol.* 2>/dev/null)
	[[ $tb -eq 0 && -z $viol ]]
	check_err $? "$tb read(s) saw a value not written in that netns: $(head -n 1 <<<"$viol")"
	[[ -n $viol ]] && head -n 20 <<<"$viol" | sed 's/^/# /'
	[[ -z $diffs ]]
	check_err $? "final value differs from the netns' last successful write: $diffs"
	log_test "no write lost, torn or seen in another netns" "$tr concurrent reads"
}

fuzz_flows_completed()
{
	local tag k rc p n=0 bad= why ncut

	while read -r tag k rc p; do
		n=$((n + 1))
		why=$(batch_outcome "$TMPD/flows-$tag-$k" "$p" "$rc" "$TMPD/flows.cut") ||
			bad+=" $tag-$k: $why;"
	done <"$TMPD/flows.rc"
	ncut=$(wc -l <"$TMPD/flows.cut" 2>/dev/null || echo 0)
	((n > 0))
	check_err $? "no flow batch ran"
	[[ -z $bad ]]
	check_err $? "flow batches failed:$bad"
	log_test "flows ran through the fuzzing (cubic x4, bbrx, bbrx on a loopback)" "$n batches, $ncut cut by the test"
}

fuzz_hooks_released()
{
	local now

	now=$(armed_tokens)
	log_info "armed at start: '${ARMED_START}', after policies back to 0: '$now'"
	[[ $now == "$ARMED_START" ]]
	check_err $? "lazy hooks armed '$now' after every policy went back to 0 (start: '$ARMED_START')"
	[[ $now != *=1* ]]
	check_err $? "a lazy hook is still armed: $now"
	log_test "lazy hooks disarmed once every policy is 0 again"
}

require_command iperf3 jq ip
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_topo
iperf3_server_start || exit 1

extra=$(ls "$SYSDIR" | grep -vxF -f <(awk '{ print $1 }' <<<"$FUZZ_TABLE") | tr '\n' ' ')
[[ -n $extra ]] && log_warn "knobs without a range in this test (not fuzzed): $extra"

measure || { RET=1 retmsg="setup of the fourth netns failed"; log_test "setup"; }
tests_run
tests_done
exit $EXIT_STATUS
