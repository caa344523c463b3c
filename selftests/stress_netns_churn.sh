#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stress: network namespaces with bbrx state created and deleted while
# flows run in them.
#
# NETNS namespaces (24; BBRX_STRESS_FULL=1: 200), PAR at a time (4).  Each
# gets: lo up, net.ipv4.tcp_congestion_control=bbrx (a module reference),
# scope 1 and policies by its index N (each N % (its maximum + 1):
# autocork N%4, tsq N%3, rcvbuf N%2, delack N%3), a discard sink on the
# loopback and three flows into it
# (default cc = bbrx over IPv4, cubic over IPv6, bbrx by setsockopt over
# IPv6, each sending until killed).  Once the flows are established, a
# "late writer" (perl) opens the netns' delack and tsq policy files, moves
# itself to the initial netns (setns) and keeps writing 1, 2, 0 to them
# through the open files, so policy writes race the namespace's teardown.
# Then the netns is deleted (`ip netns del`) and its processes killed with
# SIGKILL while the flows are still sending; the kernel dismantles it
# asynchronously.
#
# Asserts:
#   - every netns came up with its flows established and counted by bbrx
#     (SocketsInit >= 2), and delack's lazy hook was armed in each netns
#     with delack != 0 (read there before its late writer starts);
#   - every late writer ends with ENOENT once its netns is dismantled
#     (no write is accepted for a dead netns);
#   - after the asynchronous cleanup, the net_namespace slab is back to its
#     count after a warm-up round of PAR netns that did the same (exact: the
#     cache is shrunk before each read, so per-cpu slabs do not hide free
#     objects; the kernel frees the struct net of the last netns batch it
#     dismantled only when another netns dies (net_complete_free()), so
#     both counts are taken after throwaway netns lifecycles, netns_flush),
#     the
#     lazy hooks' armed= is back to its start value, tcp_bbrx's reference
#     count is back to its start value, and rmmod then succeeds;
#   - memory balances: from after the warm-up to after the churn, caches
#     dropped and every slab cache shrunk both times, SUnreclaim grows by
#     at most BBRX_CHURN_SLAB_TOL_KB (1024; full form 2048) and Percpu by
#     at most BBRX_CHURN_PCPU_TOL_KB (256; full form 512: 200 netns grew
#     it by 168 kB on 6.1 and 288 kB on 6.12, 2026-12-03, with the
#     net_namespace count back exactly, so the per-cpu allocator's
#     populated chunks, not leaked netns).  Measured: +352..396 kB after
#     40 netns, +1004 kB after 200 (kernel caches of the process, socket
#     and qdisc churn: 200 plain netns with policies written, no flows,
#     grow it by under 100 kB, module loaded or not).  A live netns of this test costs about
#     0.5 MiB of slab (printed), so this catches leaked namespaces, sockets
#     or devices; it cannot see a leak of the module's own per-netns state
#     alone (about 2 KiB of slab and 136 bytes per CPU), which stays inside
#     the run-to-run noise even over 200 netns;
#   - dmesg clean.
# The figures are printed as "# ..." lines.

ALL_TESTS="
	churn_netns_up
	churn_late_writes_refused
	churn_netns_freed
	churn_hooks_and_module_released
	churn_memory_balanced
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

if [[ ${BBRX_STRESS_FULL:-0} == 1 ]]; then
	NETNS=${BBRX_CHURN_NETNS:-200}
	SLAB_TOL_KB=${BBRX_CHURN_SLAB_TOL_KB:-2048}
	PCPU_TOL_KB=${BBRX_CHURN_PCPU_TOL_KB:-512}
else
	NETNS=${BBRX_CHURN_NETNS:-24}
	SLAB_TOL_KB=${BBRX_CHURN_SLAB_TOL_KB:-1024}
	PCPU_TOL_KB=${BBRX_CHURN_PCPU_TOL_KB:-256}
fi
PAR=${BBRX_CHURN_PAR:-4}
CLEANUP_WAIT=${BBRX_CHURN_WAIT:-180}
PORT=5401
NSSLAB=/sys/kernel/slab/net_namespace

armed_tokens()
{
	awk '{ for (i = 4; i <= NF; i++) if ($i ~ /^armed=[01]$/) printf "%s=%s ", $1, substr($i, 7) }' \
		/proc/net/bbrx_hooks 2>/dev/null
}

# netns_objects: net_namespace objects in use (the cache shrunk first, so
# per-cpu slabs are flushed and free objects are not counted as active).
netns_objects()
{
	echo 1 >"$NSSLAB/shrink" 2>/dev/null
	awk '{ print $1; exit }' "$NSSLAB/objects"
}

meminfo_kb()
{
	awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo
}

# mem_settle: drop caches and shrink every slab cache; prints
# "SUnreclaim_kB Slab_kB Percpu_kB".
mem_settle()
{
	local f

	sync
	echo 3 >/proc/sys/vm/drop_caches
	for f in /sys/kernel/slab/*/shrink; do
		echo 1 >"$f"
	done 2>/dev/null
	sleep 1
	echo "$(meminfo_kb SUnreclaim) $(meminfo_kb Slab) $(meminfo_kb Percpu)"
}

# ns_policies N: netns N's policies, "name=value ..." (the header's rule,
# each policy N % (its maximum + 1), from BBRX_POLICY_TABLE).
ns_policies()
{
	awk -v n="$1" '{ printf "%s%s=%d", sep, $1, n % ($4 + 1); sep = " " } END { print "" }' \
		<<<"$BBRX_POLICY_TABLE"
}

# ns_body N POLICIES LIBDIR OUT PORT: runs inside netns N (see the
# header); POLICIES as ns_policies prints them.
ns_body()
{
	local n=$1 pols=$2 lib=$3 out=$4 port=$5
	local d=/proc/sys/net/ipv4/bbrx i c arm kv bad=0

	ip link set lo up
	# 20 Mbit/s per netns: flows that keep sending without eating the
	# guest's CPU (the hooks act the same, the teardown has work to do).
	tc qdisc add dev lo root tbf rate 20mbit burst 20k limit 200k 2>>"$out/ns$n.err"
	{ echo bbrx >/proc/sys/net/ipv4/tcp_congestion_control &&
	  echo 1 >$d/scope &&
	  for kv in $pols; do echo "${kv#*=}" >"$d/${kv%%=*}" || { bad=1; break; }; done &&
	  ((bad == 0)); } \
		2>"$out/ns$n.err" || { echo "setup failed" >>"$out/ns$n.err"; return 1; }
	"$lib/cc_setsockopt" -l -6 "$port" >/dev/null 2>&1 &
	for ((i = 0; i < 100; i++)); do
		[[ -n $(ss -ltnH "sport = :$port") ]] && break
		sleep 0.1
	done
	"$lib/cc_setsockopt" - 127.0.0.1 "$port" 1000000000000 >/dev/null 2>>"$out/ns$n.err" &
	"$lib/cc_setsockopt" cubic ::1 "$port" 1000000000000 >/dev/null 2>>"$out/ns$n.err" &
	"$lib/cc_setsockopt" bbrx ::1 "$port" 1000000000000 >/dev/null 2>>"$out/ns$n.err" &
	# (a hang guard of 120 s: the loop ends once the 3 flows are up)
	for ((i = 0; i < 1200; i++)); do
		c=$(ss -tnH state established "( dport = :$port )" | wc -l)
		((c >= 3)) && break
		sleep 0.1
	done
	# delack's arming, read while this netns' own delack (N%3) is still
	# as set up: the late writers cycle 1, 2, 0, so a round-wide sample
	# can find every netns of the round at 0 (then disarmed, rightly).
	arm=$(awk '$1 == "delack" { for (i = 4; i <= NF; i++) if ($i ~ /^armed=/) print substr($i, 7) }' \
		/proc/net/bbrx_hooks)
	# The late writer: files opened here, then setns to the initial netns.
	LC_ALL=C perl -e '
		my ($out, $n) = @ARGV;
		open(my $dl, "+<", "/proc/sys/net/ipv4/bbrx/delack") or die "delack: $!";
		open(my $tq, "+<", "/proc/sys/net/ipv4/bbrx/tsq") or die "tsq: $!";
		# ip netns exec gave us a mount namespace whose sysfs mount
		# holds the netns: leave it too, for the initial one.
		open(my $ns, "<", "/proc/1/ns/net") or die "init netns: $!";
		open(my $mnt, "<", "/proc/1/ns/mnt") or die "init mntns: $!";
		syscall(308, fileno($ns), 0x40000000) == 0 or die "setns net: $!";
		syscall(308, fileno($mnt), 0x00020000) == 0 or die "setns mnt: $!";
		close($ns); close($mnt);
		open(my $r, ">", "$out/late$n.started") and close($r);
		my ($ok, $err, $t0) = (0, "timeout", time);
		OUTER: while (time - $t0 < 120) {
			for my $v (1, 2, 0) {
				for my $fh ($dl, $tq) {
					sysseek($fh, 0, 0);
					if (!defined(syswrite($fh, "$v\n"))) {
						$err = $!{ENOENT} ? "ENOENT" : "$!";
						last OUTER;
					}
					$ok++;
				}
				select(undef, undef, undef, 0.05);
			}
		}
		open(my $o, ">", "$out/late$n") or die;
		print $o "$ok $err\n";
	' "$out" "$n" 2>>"$out/ns$n.err" &
	for ((i = 0; i < 100; i++)); do
		[[ -e $out/late$n.started ]] && break
		sleep 0.1
	done
	echo "$c $(awk 'NR == 1 { for (i = 2; i <= NF; i++) if ($i == "SocketsInit") k = i }
		NR == 2 { print $k }' /proc/net/bbrx_stat) ${arm:-none}" >"$out/ready$n"
	wait
}

declare -a UP_BAD=()
ARMED_SEEN_BAD=
NS_START=
NS_BOOT=
REF_START=
ARMED_START=
MEM_BASE=
MEM_END=
MEM_LIVE=
CHURN_TIME=0
WAIT_TIME=0
NS_END=
LATE_WAIT_BAD=

# churn_round FIRST COUNT: netns FIRST .. FIRST+COUNT-1 up, flows, deleted.
churn_round()
{
	local first=$1 count=$2 n i ns pids c si arm

	local r0=$SECONDS
	for ((n = first; n < first + count; n++)); do
		ns=chn$n-$SFX
		ip netns add "$ns" || { UP_BAD+=("$n:netns add failed"); continue; }
		EXTRA_NETNS+=" $ns"
		# A subshell's child, not a job: no "Killed" notices.
		(ip netns exec "$ns" bash -c "$(declare -f ns_body); ns_body $n '$(ns_policies "$n")' '$BIN_DIR' '$TMPD' $PORT" \
			>/dev/null 2>&1 &)
	done
	# Up to 180 s, a hang guard: each netns reports once its flows are up.
	for ((n = first; n < first + count; n++)); do
		for ((i = 0; i < 1800; i++)); do
			[[ -e $TMPD/ready$n ]] && break
			sleep 0.1
		done
	done
	[[ -z $MEM_LIVE && $first -eq 0 ]] && MEM_LIVE="$(meminfo_kb SUnreclaim) $(meminfo_kb Percpu)"
	for ((n = first; n < first + count; n++)); do
		ns=chn$n-$SFX
		if [[ ! -e $TMPD/ready$n ]]; then
			UP_BAD+=("$n:not ready after 180s ($(head -c 200 "$TMPD/ns$n.err" 2>/dev/null))")
		else
			read -r c si arm <"$TMPD/ready$n"
			[[ " $(ns_policies "$n") " == *" delack=0 "* ]] || [[ $arm == 1 ]] ||
				ARMED_SEEN_BAD+=" $n:armed=$arm"
			((c >= 3 && si >= 2)) ||
				UP_BAD+=("$n:$c flows established, SocketsInit $si ($(head -c 200 "$TMPD/ns$n.err" 2>/dev/null))")
			[[ -e $TMPD/late$n.started ]] ||
				UP_BAD+=("$n:late writer did not start ($(head -c 200 "$TMPD/ns$n.err" 2>/dev/null))")
		fi
	done
	# Flows still sending: delete, then kill everything in them.
	for ((n = first; n < first + count; n++)); do
		ns=chn$n-$SFX
		pids=$(ip netns pids "$ns" 2>/dev/null)
		ip netns del "$ns"
		EXTRA_NETNS=${EXTRA_NETNS/ $ns/}
		[[ -n $pids ]] && kill -9 $pids 2>/dev/null
	done
	[[ ${BBRX_VERBOSE:-0} == 1 ]] && log_info "round $first: $((SECONDS - r0))s"
	return 0
}

# wait_late FIRST LAST: wait (up to 60 s) for the late writers to report.
wait_late()
{
	local n i

	for ((n = $1; n <= $2; n++)); do
		for ((i = 0; i < 600; i++)); do
			[[ -s $TMPD/late$n || ! -e $TMPD/late$n.started ]] && break
			sleep 0.1
		done
	done
}

# netns_flush: one throwaway netns lifecycle.  The kernel (6.1.y and
# 6.12.y alike: "net: defer final 'struct net' free in netns dismantle")
# frees the struct net of a dismantled netns only in the next cleanup_net()
# run (net_complete_free()), so the last batch dismantled, 1 to PAR or more
# netns, stays in the slab until another netns dies.  After a flush the
# count settles at the live netns plus one: the flush's own, deferred.
netns_flush()
{
	ip netns add "chnflush-$SFX" 2>/dev/null
	ip netns del "chnflush-$SFX"
}

# netns_floor MAX: the lowest net_namespace count over flushes 1 s apart,
# once it has not gone down for 3 flushes in a row (at most MAX s).
netns_floor()
{
	local t0=$SECONDS o min= same=0

	while ((same < 3 && SECONDS - t0 < $1)); do
		netns_flush
		sleep 1
		o=$(netns_objects)
		if [[ -z $min ]] || ((o < min)); then
			min=$o same=0
		else
			same=$((same + 1))
		fi
	done
	echo "$min"
}

# wait_netns_freed: until the net_namespace count is back to NS_START,
# flushing the deferred frees once a second.
wait_netns_freed()
{
	local t0=$SECONDS o max=${1:-$CLEANUP_WAIT}

	while o=$(netns_objects); ((o > NS_START && SECONDS - t0 < max)); do
		(((SECONDS - t0) % 20 == 19)) &&
			log_info "$((SECONDS - t0))s: net_namespace objects $o, $(grep -h '^TCP:' /proc/net/sockstat)"
		netns_flush
		sleep 1
	done
}

# netns_holders: processes whose net or mount namespace is not the initial
# one (a mount namespace of `ip netns exec` holds its netns through sysfs).
netns_holders()
{
	local p n0 m0

	n0=$(readlink /proc/1/ns/net)
	m0=$(readlink /proc/1/ns/mnt)
	for p in /proc/[0-9]*; do
		[[ -s $p/cmdline ]] || continue	# kernel threads
		[[ $(readlink "$p/ns/net" 2>/dev/null) != "$n0" ||
		   $(readlink "$p/ns/mnt" 2>/dev/null) != "$m0" ]] &&
			echo "${p#/proc/}:$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | head -c 60)"
	done
}

measure()
{
	local n t0

	[[ -r $NSSLAB/objects ]] || { echo "# $NSSLAB missing"; return 1; }
	NS_BOOT=$(netns_objects)
	REF_START=$(cat /sys/module/tcp_bbrx/refcnt)
	ARMED_START=$(armed_tokens)

	# Warm-up round (ids above the churn's, same policy formula).  On a
	# fresh boot the first netns lifecycles leave one net_namespace
	# object in use for good, with or without tcp_bbrx (a plain `ip
	# netns add a; ip netns del a` does): the start counts are taken
	# after this round, which does everything a churn round does.
	churn_round $((NETNS + 1000)) "$PAR"
	wait_late $((NETNS + 1000)) $((NETNS + 1000 + PAR - 1))
	NS_START=$(netns_floor 60)
	MEM_BASE=$(mem_settle)
	log_info "start: net_namespace objects $NS_BOOT before / $NS_START after the warm-up round of $PAR netns, tcp_bbrx refcnt $REF_START, armed '$ARMED_START'"

	t0=$SECONDS
	for ((n = 0; n < NETNS; n += PAR)); do
		churn_round "$n" $((NETNS - n < PAR ? NETNS - n : PAR))
	done
	CHURN_TIME=$((SECONDS - t0))
	t0=$SECONDS
	wait_late 0 $((NETNS - 1))
	wait_netns_freed
	WAIT_TIME=$((SECONDS - t0))
	NS_END=$(netns_objects)
	MEM_END=$(mem_settle)
	echo "# netns: $NETNS created and deleted ($PAR at a time, 3 flows each, policies set) in ${CHURN_TIME}s; cleanup done ${WAIT_TIME}s later"
}

churn_netns_up()
{
	local n bad=

	[[ ${#UP_BAD[@]} -eq 0 ]]
	check_err $? "${#UP_BAD[@]} netns did not come up fully: ${UP_BAD[*]:0:3}"
	[[ -z $ARMED_SEEN_BAD ]]
	check_err $? "delack not armed while a netns had delack != 0:$ARMED_SEEN_BAD"
	log_test "$NETNS netns up with bbrx default, policies and 3 established flows each"
}

churn_late_writes_refused()
{
	local n ok err tot=0 bad= nenoent=0

	for ((n = 0; n < NETNS; n++)); do
		if [[ ! -s $TMPD/late$n ]]; then
			bad+=" $n:no report"
			continue
		fi
		read -r ok err <"$TMPD/late$n"
		tot=$((tot + ok))
		if [[ $err == ENOENT ]]; then
			nenoent=$((nenoent + 1))
		else
			bad+=" $n:$ok writes then '$err'"
		fi
	done
	echo "# late policy writes accepted before teardown: $tot; writers ended by ENOENT: $nenoent of $NETNS"
	[[ -z $bad ]]
	check_err $? "late writers that did not end with ENOENT:$bad"
	log_test "policy writes through files kept open fail with ENOENT once the netns is dismantled"
}

churn_netns_freed()
{
	echo "# net_namespace objects: $NS_START after the warm-up, $NS_END after the churn's cleanup (${WAIT_TIME}s, limit ${CLEANUP_WAIT}s)"
	((NS_END <= NS_START))
	check_err $? "net_namespace objects $NS_START -> $NS_END after ${WAIT_TIME}s: netns not freed"
	if ((NS_END > NS_START)); then
		echo "# processes outside the initial net/mount namespace: $(netns_holders | tr '\n' ' ')"
		echo "# $(grep -h -E '^(sockets|TCP):' /proc/net/sockstat | tr '\n' ' ')"
	fi
	log_test "every deleted netns freed (net_namespace slab back to its start, deferred frees flushed)"
}

churn_hooks_and_module_released()
{
	local ref armed

	armed=$(armed_tokens)
	ref=$(cat /sys/module/tcp_bbrx/refcnt 2>/dev/null)
	log_info "after: armed '$armed', tcp_bbrx refcnt $ref"
	[[ $armed == "$ARMED_START" && $armed != *=1* ]]
	check_err $? "lazy hooks armed '$armed' after the cleanup (start '$ARMED_START')"
	[[ $ref == "$REF_START" ]]
	check_err $? "tcp_bbrx refcnt $REF_START -> $ref"
	bbrx_unload
	check_err $? "rmmod tcp_bbrx failed after the churn: $(rmmod tcp_bbrx 2>&1)"
	bbrx_module_loaded || bbrx_load
	log_test "hook users, module references released; rmmod works"
}

churn_memory_balanced()
{
	local su0 sl0 pc0 su1 sl1 pc1 lsu lpc dsu dpc

	read -r su0 sl0 pc0 <<<"$MEM_BASE"
	read -r su1 sl1 pc1 <<<"$MEM_END"
	read -r lsu lpc <<<"$MEM_LIVE"
	dsu=$((su1 - su0))
	dpc=$((pc1 - pc0))
	echo "# memory after warm-up / after $NETNS netns (kB): SUnreclaim $su0 -> $su1 ($dsu, tolerance $SLAB_TOL_KB), Slab $sl0 -> $sl1, Percpu $pc0 -> $pc1 ($dpc, tolerance $PCPU_TOL_KB)"
	[[ -n $lsu ]] && echo "# with $PAR netns of this test alive: SUnreclaim $((lsu - su0)) kB, Percpu $((lpc - pc0)) kB above the base"
	((dsu <= SLAB_TOL_KB))
	check_err $? "SUnreclaim grew by $dsu kB (tolerance $SLAB_TOL_KB)"
	((dpc <= PCPU_TOL_KB))
	check_err $? "Percpu grew by $dpc kB (tolerance $PCPU_TOL_KB)"
	log_test "slab and per-cpu memory balance after the churn" "SUnreclaim ${dsu} kB, Percpu ${dpc} kB"
}

require_command ip ss perl
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
require_helper

measure || { RET=1 retmsg="net_namespace slab not readable"; log_test "setup"; tests_done; exit 1; }
tests_run
tests_done
exit $EXIT_STATUS
