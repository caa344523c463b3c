#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Helpers shared by the hook tests (hook_*.sh), sourced after lib.sh.

# hook_state NAME: the state word of hook NAME in /proc/net/bbrx_hooks
# (installed, refused, disabled, not-installed).
hook_state()
{
	awk -v h="$1" '$1 == h { s = $3; sub(/:$/, "", s); print s }' /proc/net/bbrx_hooks 2>/dev/null
}

# hooks_map FN NAME...: FN NAME for each NAME, joined by "/".
hooks_map()
{
	local fn=$1 h out=

	shift
	for h in "$@"; do
		out+="${out:+/}$("$fn" "$h")"
	done
	echo "$out"
}

# hook_states NAME...: the states of the named hooks joined by "/"
# (installed/installed/...).
hook_states()
{
	hooks_map hook_state "$@"
}

# BBRX_EXPECT_REFUSED: hooks the kernel under test is known to refuse,
# space separated (set by an "env" line of scripts/lanes.conf for a kernel
# whose docs/kernels.md entry says why; empty: every hook installs).
# hook_expected NAME: the state hook NAME must have on this kernel.
hook_expected()
{
	if [[ " ${BBRX_EXPECT_REFUSED:-} " == *" $1 "* ]]; then
		echo refused
	else
		echo installed
	fi
}

# hooks_expected NAME...: hook_expected of each, joined by "/".
hooks_expected()
{
	hooks_map hook_expected "$@"
}

# hooks_usable NAME...: the named hooks this kernel must install.
hooks_usable()
{
	local h out=

	for h in "$@"; do
		[[ $(hook_expected "$h") == installed ]] && out+="${out:+ }$h"
	done
	echo "$out"
}

# BBRX_HOOKS: the hooks tcp_bbrx must have (module/bbrx_hooks.h),
# written out here on purpose as the tests' oracle: hook_refusal.sh checks
# the loaded module's list against it in both directions, so a hook
# dropped from or added to the module fails there with the difference.
# No other test uses it: they read the loaded module's list at run time
# (all_hooks_read, bbrx_hook_names).
# shellcheck disable=SC2034  # read by hook_refusal.sh
BBRX_HOOKS="autocork tsq rcvbuf rcvbuf_grow delack"

# The hooks each policy sysctl needs: a non-zero value is refused
# (EOPNOTSUPP) unless all of them are installed. Also an oracle (the
# module's BBRX_POLICY() lines): hook_refusal.sh checks that it names
# every hook of BBRX_HOOKS exactly once.
declare -A POLICY_HOOKS=([autocork]=autocork [tsq]=tsq [rcvbuf]="rcvbuf rcvbuf_grow"
			 [delack]=delack)

# policies_usable POLICY...: the named policies whose hooks this kernel
# must all install.
policies_usable()
{
	local p out=

	for p in "$@"; do
		# shellcheck disable=SC2086 # a list of hook names
		[[ $(hooks_usable ${POLICY_HOOKS[$p]}) == "${POLICY_HOOKS[$p]}" ]] &&
			out+="${out:+ }$p"
	done
	echo "$out"
}

# hook_names: every hook of the loaded module (the first field of each
# line of /proc/net/bbrx_hooks), space separated; empty when tcp_bbrx is
# not loaded.
hook_names()
{
	awk '{ printf "%s%s", sep, $1; sep = " " } END { print "" }' /proc/net/bbrx_hooks 2>/dev/null
}

# bbrx_hook_names: hook_names, but returns 1 (and prints why on stderr)
# when the loaded module lists no hook.
bbrx_hook_names()
{
	local names

	names=$(hook_names)
	if [[ -z $names ]]; then
		if bbrx_module_loaded; then
			echo "tcp_bbrx is loaded but /proc/net/bbrx_hooks lists no hook" >&2
		else
			echo "tcp_bbrx is not loaded: no /proc/net/bbrx_hooks" >&2
		fi
		return 1
	fi
	echo "$names"
}

# all_hooks_read: ALL_HOOKS = every hook of tcp_bbrx (bbrx_hook_names),
# loading the module (bbrx_load) if it is not loaded. A test whose hooks
# cannot be read fails here (exit 1) rather than iterate over an empty
# list.
all_hooks_read()
{
	local err

	bbrx_module_loaded || err=$(bbrx_load 2>&1)
	if ! ALL_HOOKS=$(bbrx_hook_names 2>&1); then
		RET=1 retmsg="the hooks of tcp_bbrx: $ALL_HOOKS${err:+ (load: $err)}"
		ALL_HOOKS=
		log_test "read the hooks of tcp_bbrx"
		tests_done
		exit 1
	fi
}

# hooks_but NAME...: ALL_HOOKS (all_hooks_read) without the named hooks.
hooks_but()
{
	local h out=

	for h in $ALL_HOOKS; do
		[[ " $* " == *" $h "* ]] || out+="${out:+ }$h"
	done
	echo "$out"
}

# hooks_all_state STATE NAME...: STATE once per NAME, joined by "/" as
# hook_states prints them (installed/installed/...).
hooks_all_state()
{
	local st=$1 h out=

	shift
	for h in "$@"; do
		out+="${out:+/}$st"
	done
	echo "$out"
}

# hook_line NAME: the whole line of hook NAME.
hook_line()
{
	awk -v h="$1" '$1 == h' /proc/net/bbrx_hooks 2>/dev/null
}

# snmp_get NS NAME: counter NAME of the netns, NAME as nstat spells it
# (TcpOutSegs, TcpExtTCPAutoCorking, IpExtOutOctets...): prefix + field of
# /proc/net/snmp and /proc/net/netstat.
snmp_get()
{
	local ns=$1 name=$2

	ip netns exec "$ns" cat /proc/net/snmp /proc/net/netstat 2>/dev/null | awk -v n="$name" '
		{ p = $1; sub(/:$/, "", p) }
		!(p in hdr) { hdr[p] = $0; next }
		{
			split(hdr[p], h)
			for (i = 2; i <= NF; i++)
				if (p h[i] == n) { print $i; found = 1; exit }
			delete hdr[p]
		}
		END { exit !found }'
}

# counters_snap NS FILE NAME...: write "NAME value" lines for the snmp
# counters (Tcp*, TcpExt*, Ip*) and bbrx counters (Bbrx:NAME) named.
counters_snap()
{
	local ns=$1 file=$2; shift 2
	local n v

	: >"$file"
	for n in "$@"; do
		case $n in
		Bbrx:*) v=$(bbrx_stat "${n#Bbrx:}" "$ns") ;;
		*) v=$(snmp_get "$ns" "$n") ;;
		esac
		echo "$n ${v:-nan}" >>"$file"
	done
}

# counters_delta BEFORE AFTER NAME: after - before of one counter.
counters_delta()
{
	local b a

	b=$(awk -v n="$3" '$1 == n { print $2 }' "$1")
	a=$(awk -v n="$3" '$1 == n { print $2 }' "$2")
	awk -v a="$a" -v b="$b" 'BEGIN { if (a == "" || b == "" || a == "nan" || b == "nan") print "nan"; else printf "%d\n", a - b }'
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

# bbrx_unload [SECS]: rmmod tcp_bbrx, retrying while sockets that used it
# finish closing (their last round trips follow the guest's speed).
# Returns 0 as soon as it is gone; SECS (default 120) only guard a hang.
bbrx_unload()
{
	local secs=${1:-120} i

	for ((i = 0; i < secs * 5; i++)); do
		bbrx_module_loaded || return 0
		rmmod tcp_bbrx 2>/dev/null && return 0
		sleep 0.2
	done
	! bbrx_module_loaded
}

# Module parameters every hook test loads with (later parameters override
# them). Empty: the module's default, which installs every hook.
BBRX_HOOK_PARAMS=${BBRX_HOOK_PARAMS-}

# bbrx_load [PARAM=VALUE...]: load tcp_bbrx with $BBRX_HOOK_PARAMS and the
# module parameters given (bbrx_modload: insmod $BBRX_KO when set, else
# modprobe).  Errors on stderr.
bbrx_load()
{
	# shellcheck disable=SC2086  # word-split parameter list
	bbrx_modload $BBRX_HOOK_PARAMS "$@"
}

# BBRX_REQUIRE_HOOKS: hooks the kernel under test must install, space
# separated, or "all" (every hook /proc/net/bbrx_hooks lists but those of
# BBRX_EXPECT_REFUSED). Unset or empty (a kernel CI, a host of one's own):
# a test that needs a hook this kernel refused, or that the module
# parameter disable= left out, skips (exit 4) with the reason. scripts/
# lanes.conf sets it for every booted kernel ("env" lines), so that in
# make check a refusal fails.
# hook_required NAME: NAME is in BBRX_REQUIRE_HOOKS.
hook_required()
{
	local r=${BBRX_REQUIRE_HOOKS:-}

	if [[ $r == all ]]; then
		[[ " ${BBRX_EXPECT_REFUSED:-} " != *" $1 "* ]]
	else
		[[ " $r " == *" $1 "* ]]
	fi
}

# hooks_require_check: every name in BBRX_REQUIRE_HOOKS is a hook of the
# loaded module, and none is also expected refused; exits 1 otherwise.
hooks_require_check()
{
	local h known

	[[ -z ${BBRX_REQUIRE_HOOKS:-} || $BBRX_REQUIRE_HOOKS == all ]] && return 0
	known=" $(hook_names) "
	[[ $known == " " ]] && return 0
	for h in $BBRX_REQUIRE_HOOKS; do
		if [[ $known != *" $h "* ]]; then
			echo "# BBRX_REQUIRE_HOOKS: '$h' is not a hook of tcp_bbrx (hooks:$known; or all)"
			exit 1
		fi
		if [[ " ${BBRX_EXPECT_REFUSED:-} " == *" $h "* ]]; then
			echo "# BBRX_REQUIRE_HOOKS and BBRX_EXPECT_REFUSED both name '$h'"
			exit 1
		fi
	done
}

# hook_why NAME: why hook NAME is not installed: its status line and the
# module's last kernel log line about it (the verifier's reason, or the
# module parameter that disabled it).
hook_why()
{
	local line msg

	line=$(hook_line "$1")
	msg=$(dmesg 2>/dev/null | grep -F "bbrx: hook $1 (" | tail -n 1 | sed 's/^\[[^]]*\] //')
	echo "${line:-$1: no status line}${msg:+ (dmesg: $msg)}"
}

# require_hooks NAME...: tcp_bbrx loaded with the named hooks installed
# (reloaded with $BBRX_HOOK_PARAMS if one is not). A hook still not
# installed because the kernel refused it (its verifier, ftrace) or
# disable= left it out skips the test with the reason, unless
# BBRX_REQUIRE_HOOKS names it: then, as for any other state (the module
# did not load), the test fails.
require_hooks()
{
	local h st bad= skip=

	hooks_require_check
	for h in "$@"; do
		[[ $(hook_state "$h") == installed ]] || bad=1
	done
	[[ -z $bad ]] && return 0
	bbrx_reload >/dev/null 2>&1
	hooks_require_check
	bad=
	for h in "$@"; do
		st=$(hook_state "$h")
		[[ $st == installed ]] && continue
		if ! hook_required "$h" && [[ $st =~ ^(refused|disabled|inactive)$ ]]; then
			skip+="${skip:+; }$(hook_why "$h")"
		elif hook_required "$h"; then
			bad+=" [$(hook_why "$h"); required by BBRX_REQUIRE_HOOKS=$BBRX_REQUIRE_HOOKS]"
		else
			bad+=" [$(hook_why "$h")]"
		fi
	done
	if [[ -n $bad ]]; then
		RET=1 retmsg="hooks not installed:$bad"
		log_test "hooks $* installed"
		tests_done
		exit 1
	fi
	[[ -z $skip ]] || ksft_exit_skip "a hook this test needs is not installed on this kernel: $skip"
}

# bbrx_reload [PARAM=VALUE...]: unload (must succeed) and load again.
bbrx_reload()
{
	bbrx_unload || { echo "rmmod tcp_bbrx failed: module in use" >&2; return 1; }
	bbrx_load "$@"
}

# sysctl_write_err NS NAME VALUE: write net.ipv4.bbrx.NAME through
# /proc/sys and print the errno name the write failed with (OK if none).
sysctl_write_err()
{
	local ns=$1 name=$2 val=$3 err

	err=$(ip netns exec "$ns" bash -c "echo $val > /proc/sys/net/ipv4/bbrx/$name" 2>&1)
	if [[ -z $err ]]; then
		echo OK
	elif [[ $err == *"not supported"* ]]; then
		echo EOPNOTSUPP
	elif [[ $err == *"Invalid argument"* ]]; then
		echo EINVAL
	elif [[ $err == *"Device or resource busy"* ]]; then
		echo EBUSY
	else
		echo "OTHER($err)"
	fi
}

# The /proc/net/bbrx_stat counters that move only when a hook acts.
HOOK_COUNTERS_RE='^(AutocorkCorked|AutocorkDeclined|TsqThrottled|TsqSingleSkb|TsqWithheld|RcvbufSized|RcvbufGrown|DelackPushMarked|DelackPushSuppressed)$'

# hooks_counters_sum NS: sum of the hook counters of the netns (one read).
hooks_counters_sum()
{
	bbrx_stat_all "$1" | awk -v re="$HOOK_COUNTERS_RE" '{
		for (i = 1; i <= NF; i++) {
			split($i, p, "=")
			if (p[1] ~ re)
				s += p[2]
		}
	} END { print s + 0 }'
}

# hooks_counters_list NS: "Name=value ..." of the netns' non-zero hook
# counters, or "none".
hooks_counters_list()
{
	bbrx_stat_all "$1" | awk -v re="$HOOK_COUNTERS_RE" '{
		for (i = 1; i <= NF; i++) {
			split($i, p, "=")
			if (p[1] ~ re && p[2] != 0)
				s = s (s == "" ? "" : " ") $i
		}
	} END { print (s == "" ? "none" : s) }'
}

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

# hooks_after_segs SEGS: wait until the sender netns has sent SEGS more
# segments (TcpOutSegs) than at the call, then HW_SND / HW_RCV = the
# sender's and the receiver's hook counter sums.  Traffic, not time,
# bounds the wait, so a slower guest only waits longer; BBRX_HOOK_WAIT_MAX
# s (300) only guard a hang (no flow running at all, returns 1).
hooks_after_segs()
{
	local segs=$1 s0 s t0=$SECONDS

	s0=$(snmp_get "$SND" TcpOutSegs)
	while :; do
		s=$(snmp_get "$SND" TcpOutSegs)
		((s - s0 >= segs)) && break
		((SECONDS - t0 < ${BBRX_HOOK_WAIT_MAX:-300})) || break
		sleep 0.2
	done
	HW_SND=$(hooks_counters_sum "$SND")
	HW_RCV=$(hooks_counters_sum "$RCV")
	((s - s0 >= segs))
}
