#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, the three namespaces of lib.sh's topology,
# the NICs lent to them and given back, and the end of what runs in them.
#
# lib.sh sources it; a test sources lib.sh, never this file.

ns_kill_all()
{
	local ns=$1 pids

	pids=$(ip netns pids "$ns" 2>/dev/null)
	if [[ -n $pids ]]; then
		kill $pids 2>/dev/null
		sleep 0.2
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[[ -n $pids ]] && kill -9 $pids 2>/dev/null
	fi
	ns_abort_tcp "$ns"
}

# ns_abort_tcp NS: abort (SOCK_DESTROY, ss -K) the TCP sockets left in NS
# once its processes are gone.  A closed socket with unsent data is an
# orphan that keeps its congestion control, and so tcp_bbrx, until it
# drains or its retries run out; a slowly paced one (stress_scale's
# 200 kbit/s flows) or one whose netns is then deleted holds the module
# for minutes, and the next test's rmmod waits.  Where the kernel lacks
# CONFIG_INET_DIAG_DESTROY this does nothing and the orphans drain.
ns_abort_tcp()
{
	ip netns exec "$1" ss -K -tan &>/dev/null
}

# netif_part DEV PART: one part of a NIC's state, as netif_save keeps it:
# features (ethtool -k), gso (gso_max_size/segs), qdisc, addr (global).
netif_part()
{
	case $2 in
	features) ethtool -k "$1" 2>/dev/null ;;
	gso) ip -d link show dev "$1" | grep -o 'gso_max_[a-z]* [0-9]*' ;;
	qdisc) tc qdisc show dev "$1" ;;
	addr) ip -o addr show dev "$1" scope global ;;
	esac
}

# netif_save DEV: what the NIC has before a test changes it (offloads,
# GSO limits, qdiscs, addresses, up state), in $TMPD/netif-DEV.*.
netif_save()
{
	local dev=$1 f=$TMPD/netif-$1 p

	for p in features gso qdisc addr; do
		netif_part "$dev" "$p" >"$f.$p"
	done
	ip -o link show dev "$dev" | grep -q '[<,]UP[,>]' && echo up >"$f.up"
	return 0
}

# netif_state DEV: the state netif_save keeps, as one text (to compare).
netif_state()
{
	netif_part "$1" features
	netif_part "$1" gso
	netif_part "$1" qdisc
	netif_part "$1" addr | awk '{ print $3, $4 }'
}

# netif_restore_saved DEV: give the NIC, back in this netns, what
# netif_save saw; warns with what still differs.
netif_restore_saved()
{
	local dev=$1 f=$TMPD/netif-$1 name val kind handle spec line now

	[[ -f $f.qdisc ]] || return 0
	# Offloads: the changeable ones (not [fixed]) that differ, groups
	# before their members (ethtool -k's order), twice for the
	# dependencies. "off [requested on]": the request is what is set (the
	# device or another feature keeps it off).
	for _ in 1 2; do
		now=$(netif_part "$dev" features)
		[[ $now == "$(cat "$f.features")" ]] && break
		while IFS= read -r line; do
			[[ $'\n'$now$'\n' == *$'\n'"$line"$'\n'* ]] && continue
			name=${line%%:*}
			name=${name//$'\t'/}
			val=${line#*: }
			[[ $val == *"[requested "* ]] && val=${val##*\[requested }
			val=${val%%[]\ ]*}
			[[ $val == on || $val == off ]] || continue
			ethtool -K "$dev" "$name" "$val" &>/dev/null
		done < <(grep -v '\[fixed\]\|^Features' "$f.features")
	done
	# shellcheck disable=SC2046  # "gso_max_size N gso_max_segs N"
	ip link set dev "$dev" $(tr '\n' ' ' <"$f.gso")
	# A move between namespaces leaves the default qdisc: put back a root
	# and an ingress/clsact qdisc of another kind (their options as tc
	# shows them; filters are not restored).
	tc qdisc del dev "$dev" ingress &>/dev/null
	tc qdisc del dev "$dev" clsact &>/dev/null
	while read -r line; do
		read -r _ kind handle _ <<<"$line"
		case $line in
		*" root "*)
			[[ $(tc qdisc show dev "$dev" | grep ' root ') == "$line" ]] && continue
			[[ $handle == 0: ]] && handle= || handle="handle $handle"
			spec=$(sed 's/^qdisc [^ ]* [^ ]* root //; s/^refcnt [0-9]* //' <<<"$line")
			# tc's own words; else packet counts without their "p"
			# (tc prints "limit 500p", parses "limit 500"); else the
			# kind's defaults
			# shellcheck disable=SC2086
			tc qdisc replace dev "$dev" root $handle "$kind" $spec &>/dev/null ||
				tc qdisc replace dev "$dev" root $handle "$kind" \
					$(sed -E 's/\<([0-9]+)p\>/\1/g' <<<"$spec") &>/dev/null ||
				tc qdisc replace dev "$dev" root $handle "$kind" &>/dev/null ;;
		"qdisc ingress "*|"qdisc clsact "*)
			tc qdisc add dev "$dev" "$kind" &>/dev/null ;;
		esac
	done <"$f.qdisc"
	while read -r _ _ _ val _; do
		ip addr add "$val" dev "$dev" &>/dev/null
	done <"$f.addr"
	[[ -f $f.up ]] && ip link set dev "$dev" up
	line=$(diff <({ cat "$f.features" "$f.gso" "$f.qdisc"; awk '{ print $3, $4 }' "$f.addr"; }) \
		<(netif_state "$dev"))
	[[ -z $line ]] || log_warn "$dev not restored as it was before the test: $(tr '\n' ' ' <<<"$line")"
}

# netif_restore NS DEV: clear the NIC in NS and move it back to the initial
# netns (which resets its qdiscs); netif_restore_saved then restores it.
netif_restore()
{
	local ns=$1 dev=$2

	[[ -z $dev ]] && return
	if ip netns list | grep -qw "$ns" && ip -n "$ns" link show dev "$dev" &>/dev/null; then
		tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null
		ip -n "$ns" addr flush dev "$dev" 2>/dev/null
		ip -n "$ns" link set dev "$dev" down
		ip -n "$ns" link set dev "$dev" netns 1
	fi
}

topo_destroy()
{
	local ns i dev

	[[ $TOPO_UP -eq 1 ]] || return 0
	for ns in $SND $RTR $RCV; do
		ns_kill_all "$ns"
	done
	if [[ -n $NETIFS_USED ]]; then
		netif_restore "$SND" "$SND_IF"
		netif_restore "$RTR" "$RTR_IF_S"
	fi
	for ns in $SND $RTR $RCV; do
		ip netns del "$ns" 2>/dev/null
	done
	if [[ -n $NETIFS_USED ]]; then
		# Wait for the NICs to be back in the initial namespace so the
		# next test script finds them.
		for dev in $NETIFS_USED; do
			for ((i = 0; i < 100; i++)); do
				ip link show dev "$dev" &>/dev/null && break
				sleep 0.1
			done
			netif_restore_saved "$dev"
		done
	fi
	TOPO_UP=0
}

ns_sysctl()
{
	local ns=$1; shift

	ip netns exec "$ns" sysctl -qw "$@"
}

# topo_create: build snd - rtr - rcv (see the header).  Returns non-zero and
# prints why on failure.
topo_create()
{
	local ns if0 if1 i

	TOPO_UP=1
	# A script that builds the topology again (the bench) starts clean.
	NETIFS_USED=
	for ns in $SND $RTR $RCV; do
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up
		ns_sysctl "$ns" net.ipv6.conf.all.accept_dad=0 \
			net.ipv6.conf.default.accept_dad=0 \
			net.ipv6.conf.all.accept_ra=0 \
			net.ipv6.conf.default.accept_ra=0 \
			net.ipv4.tcp_no_metrics_save=1
		# A new netns inherits init_net's default; make it cubic so
		# that only the flows a test chooses use bbrx (a non-init
		# netns may only pick "allowed" ones, hence no error check).
		ns_sysctl "$ns" net.ipv4.tcp_congestion_control=cubic 2>/dev/null
	done

	if [[ -n ${NETIFS:-} ]]; then
		read -r if0 if1 _ <<<"$NETIFS"
		[[ -n $if0 && -n $if1 ]] || { echo "# NETIFS needs two interfaces"; return 1; }
		for i in $if0 $if1; do
			ip link show dev "$i" &>/dev/null ||
				{ echo "# NETIFS interface $i not found"; return 1; }
		done
		[[ $if0 != "$if1" ]] || { echo "# NETIFS names $if0 twice"; return 1; }
		NETIFS_USED="$if0 $if1"
		netif_save "$if0"
		netif_save "$if1"
		log_info "sender-router hop: NICs $if0 - $if1 (${NETIFS_FROM:-NETIFS}); router-receiver: veth"
		ip link set dev "$if0" down
		ip link set dev "$if1" down
		ip addr flush dev "$if0"
		ip addr flush dev "$if1"
		ip link set dev "$if0" netns "$SND" || return 1
		ip link set dev "$if1" netns "$RTR" || return 1
		SND_IF=$if0
		RTR_IF_S=$if1
	else
		log_info "sender-router and router-receiver hops: veth"
		SND_IF=s0
		RTR_IF_S=r0
		ip link add "$SND_IF" netns "$SND" type veth peer "$RTR_IF_S" netns "$RTR" || return 1
	fi
	ip link add "$RTR_IF_R" netns "$RTR" type veth peer "$RCV_IF" netns "$RCV" || return 1

	ip -n "$SND" addr add "$SND_IP4/24" dev "$SND_IF"
	ip -n "$SND" addr add "$SND_IP6/64" dev "$SND_IF" nodad
	ip -n "$RTR" addr add "$RTR_IP4_S/24" dev "$RTR_IF_S"
	ip -n "$RTR" addr add "$RTR_IP6_S/64" dev "$RTR_IF_S" nodad
	ip -n "$RTR" addr add "$RTR_IP4_R/24" dev "$RTR_IF_R"
	ip -n "$RTR" addr add "$RTR_IP6_R/64" dev "$RTR_IF_R" nodad
	ip -n "$RCV" addr add "$RCV_IP4/24" dev "$RCV_IF"
	ip -n "$RCV" addr add "$RCV_IP6/64" dev "$RCV_IF" nodad
	ip -n "$SND" link set "$SND_IF" up
	ip -n "$RTR" link set "$RTR_IF_S" up
	ip -n "$RTR" link set "$RTR_IF_R" up
	ip -n "$RCV" link set "$RCV_IF" up

	ns_sysctl "$RTR" net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	ip -n "$SND" route add default via "$RTR_IP4_S"
	ip -n "$SND" -6 route add default via "$RTR_IP6_S"
	ip -n "$RCV" route add default via "$RTR_IP4_R"
	ip -n "$RCV" -6 route add default via "$RTR_IP6_R"

	topo_wait || return 1
}

# Wait until IPv4 and IPv6 get through snd -> rcv.
topo_wait()
{
	local i

	for ((i = 0; i < 50; i++)); do
		ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP4" &>/dev/null &&
			ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP6" &>/dev/null &&
			return 0
		sleep 0.2
	done
	echo "# no connectivity snd -> rcv"
	return 1
}

# use_veth WHY: the sender-router hop is veth in this test, whatever NICs
# were named (WHY: what the test needs of veth); says so when some were.
use_veth()
{
	[[ -n ${NETIFS:-} ]] && log_info "sender-router hop: veth, not the NICs $NETIFS: $*"
	NETIFS=
}

# Create the topology or fail the whole script.
require_topo()
{
	if ! topo_create; then
		RET=1 retmsg="topology setup failed"
		log_test "topology setup"
		tests_done
		exit 1
	fi
}

netns_ino()
{
	ip netns exec "$1" stat -L -c %i /proc/self/ns/net
}
