#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tcp_bbrx loads and unloads, registers "bbrx", is loaded on demand, is
# selected by the netns default, by a route (congctl) and by setsockopt
# (TCP_CONGESTION), and cannot be unloaded while a socket or a netns default
# still uses it.  Its second congestion control "bbrx3" is selected beside
# bbrx (setsockopt, route, netns default), loads the module on demand, shows
# its model in ss -ti, and holds the module like bbrx.

ALL_TESTS="
	load_unload
	autoload_sysctl
	select_netns_default
	select_route
	select_setsockopt
	bbrx3_select
	stat_per_netns
	rmmod_busy_socket
	rmmod_busy_netns_default
	rmmod_busy_netns_deleted
"
source "$(dirname "$0")/lib.sh"

AVAIL=/proc/sys/net/ipv4/tcp_available_congestion_control

cc_available()
{
	grep -qw bbrx "$AVAIL" && grep -qw bbrx3 "$AVAIL"
}

# module_unload [SECS]: bbrx_unload (lib_module.sh) with this test's
# shorter default guard, 10 s.
module_unload()
{
	bbrx_unload "${1:-10}"
}

module_ensure_loaded()
{
	bbrx_module_loaded || bbrx_modload
}

# helper CC DST [BYTES [HOLD]]: run cc_setsockopt in the sender, print the
# congestion control the socket ended up with.
helper()
{
	local cc=$1 dst=$2 bytes=${3:-1048576} hold=${4:-0}

	ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -H "$hold" "$cc" "$dst" \
		"$SINK_PORT" "$bytes"
}

# on_demand_select CC: with tcp_bbrx unloaded, setsockopt(TCP_CONGESTION,
# CC) loads it (an installed module only: not with BBRX_KO).
on_demand_select()
{
	local cc

	if ! bbrx_on_demand; then
		log_info "on-demand load by $1 not checked: BBRX_KO=$BBRX_KO is not installed"
		return
	fi
	cc=$(helper "$1" "$RCV_IP4")
	check_err $? "setsockopt(TCP_CONGESTION, $1) with the module unloaded failed"
	[[ $cc == "$1" ]]
	check_err $? "getsockopt says '$cc' after on-demand load by $1"
}

# helper_bg_check CC DST: hold a connection open and check what ss says
# about it: the cc name and the bbr:(...) info.  Prints the ss line.
helper_bg_check()
{
	local cc=$1 dst=$2 pid line

	helper "$cc" "$dst" 1048576 3 >"$TMPD/helper.out" 2>&1 &
	pid=$!
	line=$(ss_sink_flow 5)
	wait "$pid"
	echo "$line"
}

load_unload()
{
	local lic

	module_unload
	check_err $? "tcp_bbrx could not be unloaded before the test"
	cc_available
	check_fail $? "bbrx still in tcp_available_congestion_control after rmmod"

	bbrx_modload
	check_err $? "loading tcp_bbrx failed"
	bbrx_module_loaded
	check_err $? "/sys/module/tcp_bbrx missing after loading it"
	cc_available
	check_err $? "bbrx not in tcp_available_congestion_control: $(cat $AVAIL)"
	[[ -d /proc/sys/net/ipv4/bbrx ]]
	check_err $? "/proc/sys/net/ipv4/bbrx missing"
	[[ $(bbrx_stat SocketsInit) =~ ^[0-9]+$ ]]
	check_err $? "/proc/net/bbrx_stat has no SocketsInit counter"
	[[ $(bbrx_stat SocketsInit "$SND") =~ ^[0-9]+$ ]]
	check_err $? "/proc/net/bbrx_stat missing in a netns"
	lic=$(bbrx_modinfo license)
	[[ $lic == GPL* ]]
	check_err $? "module license is '$lic'"
	log_info "modinfo: version $(bbrx_modinfo version)," \
		"$(bbrx_modinfo description)"

	rmmod tcp_bbrx
	check_err $? "rmmod tcp_bbrx failed with no user"
	cc_available
	check_fail $? "bbrx still available after rmmod"
	[[ -e /proc/sys/net/ipv4/bbrx ]]
	check_fail $? "/proc/sys/net/ipv4/bbrx still there after rmmod"
	[[ -e /proc/net/bbrx_stat ]]
	check_fail $? "/proc/net/bbrx_stat still there after rmmod"

	# Twice more, to catch leaks or double frees on re-registration.
	bbrx_modload && rmmod tcp_bbrx && bbrx_modload
	check_err $? "second load/rmmod/load cycle failed"
	cc_available
	check_err $? "bbrx not available after reload"

	log_test "$(bbrx_loader) / rmmod tcp_bbrx, bbrx in tcp_available_congestion_control"
}

autoload_sysctl()
{
	local old v

	if ! bbrx_on_demand; then
		log_test_skip "on-demand load by sysctl" "the kernel loads an installed tcp_bbrx only (BBRX_KO=${BBRX_KO:-})"
		return
	fi
	module_unload
	check_err $? "tcp_bbrx could not be unloaded"

	# In a netns (the per-netns default) ...
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	check_err $? "sysctl tcp_congestion_control=bbrx failed in a netns"
	bbrx_module_loaded
	check_err $? "tcp_bbrx not loaded on demand by the netns sysctl"
	v=$(ip netns exec "$SND" sysctl -n net.ipv4.tcp_congestion_control)
	[[ $v == bbrx ]]
	check_err $? "netns default reads '$v'"
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=cubic

	# ... and in the initial netns, as an admin would, restoring at once.
	module_unload
	check_err $? "tcp_bbrx could not be unloaded"
	old=$(sysctl -n net.ipv4.tcp_congestion_control)
	sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	check_err $? "sysctl tcp_congestion_control=bbrx failed"
	v=$(sysctl -n net.ipv4.tcp_congestion_control)
	sysctl -qw net.ipv4.tcp_congestion_control="$old"
	[[ $v == bbrx ]]
	check_err $? "default reads '$v' after setting bbrx"
	bbrx_module_loaded
	check_err $? "tcp_bbrx not loaded on demand"

	module_ensure_loaded
	log_test "on-demand load by sysctl net.ipv4.tcp_congestion_control=bbrx"
}

select_netns_default()
{
	local before after cc line

	module_ensure_loaded
	before=$(bbrx_stat SocketsInit "$SND")
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	check_err $? "setting the netns default to bbrx failed"

	cc=$(helper - "$RCV_IP4")
	check_err $? "connection with the netns default failed"
	[[ $cc == bbrx ]]
	check_err $? "getsockopt(TCP_CONGESTION) says '$cc' with netns default bbrx"

	line=$(helper_bg_check - "$RCV_IP4")
	log_info "ss: $line"
	[[ $line == *" cc=bbrx"* ]]
	check_err $? "ss -ti does not show bbrx for the flow: $line"
	[[ $line == *" bw="* && $line == *" mrtt="* ]]
	check_err $? "ss -ti shows no bbr:(bw,mrtt) info for the flow"

	after=$(bbrx_stat SocketsInit "$SND")
	((after >= before + 2))
	check_err $? "SocketsInit went $before -> $after for 2 connections"

	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=cubic
	cc=$(helper - "$RCV_IP4")
	[[ $cc != bbrx ]]
	check_err $? "still bbrx after the netns default went back to cubic"

	log_test "selection by the netns default (net.ipv4.tcp_congestion_control)"
}

select_route()
{
	local cc cc6 line before after

	module_ensure_loaded
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=cubic
	before=$(bbrx_stat SocketsInit "$SND")
	ip -n "$SND" route add "$RCV_IP4/32" via "$RTR_IP4_S" congctl bbrx
	check_err $? "ip route ... congctl bbrx failed"
	ip -n "$SND" -6 route add "$RCV_IP6/128" via "$RTR_IP6_S" congctl bbrx
	check_err $? "ip -6 route ... congctl bbrx failed"

	cc=$(helper - "$RCV_IP4")
	check_err $? "IPv4 connection over the congctl route failed"
	cc6=$(helper - "$RCV_IP6")
	check_err $? "IPv6 connection over the congctl route failed"
	[[ $cc == bbrx && $cc6 == bbrx ]]
	check_err $? "route congctl bbrx gave '$cc' (IPv4) and '$cc6' (IPv6)"

	line=$(helper_bg_check - "$RCV_IP4")
	[[ $line == *" cc=bbrx"* ]]
	check_err $? "ss -ti does not show bbrx for the routed flow: $line"

	after=$(bbrx_stat SocketsInit "$SND")
	((after >= before + 3))
	check_err $? "SocketsInit went $before -> $after for 3 connections"

	ip -n "$SND" route del "$RCV_IP4/32"
	ip -n "$SND" -6 route del "$RCV_IP6/128"
	cc=$(helper - "$RCV_IP4")
	[[ $cc == cubic ]]
	check_err $? "got '$cc' without the congctl route (netns default cubic)"

	log_test "selection by ip route ... congctl bbrx (IPv4 and IPv6)"
}

select_setsockopt()
{
	local cc cc6 before after

	module_ensure_loaded
	before=$(bbrx_stat SocketsInit "$SND")
	cc=$(helper bbrx "$RCV_IP4")
	check_err $? "setsockopt(TCP_CONGESTION, bbrx) client failed (IPv4)"
	cc6=$(helper bbrx "$RCV_IP6")
	check_err $? "setsockopt(TCP_CONGESTION, bbrx) client failed (IPv6)"
	[[ $cc == bbrx && $cc6 == bbrx ]]
	check_err $? "getsockopt after setsockopt bbrx: '$cc' (IPv4) '$cc6' (IPv6)"
	after=$(bbrx_stat SocketsInit "$SND")
	((after >= before + 2))
	check_err $? "SocketsInit went $before -> $after for 2 connections"

	helper bbrx-nonexistent "$RCV_IP4" &>/dev/null
	check_fail $? "setsockopt with an unknown congestion control succeeded"

	# setsockopt on demand: the kernel loads tcp_bbrx for a privileged user
	# (an installed one: not with BBRX_KO).
	if bbrx_on_demand; then
		module_unload
		check_err $? "tcp_bbrx could not be unloaded"
	fi
	on_demand_select bbrx

	log_test "selection by setsockopt(TCP_CONGESTION, \"bbrx\") (IPv4, IPv6)"
}

stat_per_netns()
{
	local s0 s1 r0 r1 n t
	local -a nst

	module_ensure_loaded
	s0=$(bbrx_stat SocketsInit "$SND")
	r0=$(bbrx_stat SocketsInit "$RTR")
	helper bbrx "$RCV_IP4" >/dev/null
	check_err $? "bbrx connection failed"
	s1=$(bbrx_stat SocketsInit "$SND")
	r1=$(bbrx_stat SocketsInit "$RTR")
	((s1 == s0 + 1))
	check_err $? "sender netns SocketsInit went $s0 -> $s1 for one socket"
	((r1 == r0))
	check_err $? "router netns SocketsInit moved ($r0 -> $r1) for a socket in another netns"
	log_info "sender netns: $(bbrx_stat_all "$SND")"

	# iproute2's nstat reads the file PROC_NET_NETSTAT names (docs/usage.md),
	# with a history file of its own: one socket is an increment of 1, and
	# its total is the file's value.
	nst=(ip netns exec "$SND" env PROC_NET_NETSTAT=/proc/net/bbrx_stat
	     NSTAT_HISTORY="$TMPD/nstat-bbrx" nstat)
	"${nst[@]}" -n
	check_err $? "nstat -n on /proc/net/bbrx_stat failed"
	helper bbrx "$RCV_IP4" >/dev/null
	check_err $? "bbrx connection failed"
	n=$("${nst[@]}" -z BbrxSocketsInit | awk '$1 == "BbrxSocketsInit" { print $2 }')
	[[ $n == 1 ]]
	check_err $? "nstat's BbrxSocketsInit increment is '$n' for one socket"
	t=$("${nst[@]}" -asz BbrxSocketsInit | awk '$1 == "BbrxSocketsInit" { print $2 }')
	s1=$(bbrx_stat SocketsInit "$SND")
	[[ $t == "$s1" ]]
	check_err $? "nstat -a's BbrxSocketsInit '$t', the file's $s1"
	log_test "/proc/net/bbrx_stat counts per netns, and nstat reads it"
}

# bbrx3 beside bbrx: both chosen in one netns at once, by each selector; the
# module loads on demand for "bbrx3"; a bbrx3 socket holds the module.
bbrx3_select()
{
	local cc before after pid line

	module_ensure_loaded
	before=$(bbrx_stat Bbrx3SocketsInit "$SND")
	cc=$(helper bbrx3 "$RCV_IP4")
	check_err $? "setsockopt(TCP_CONGESTION, bbrx3) client failed"
	[[ $cc == bbrx3 ]]
	check_err $? "getsockopt after setsockopt bbrx3: '$cc'"
	after=$(bbrx_stat Bbrx3SocketsInit "$SND")
	((after >= before + 1))
	check_err $? "Bbrx3SocketsInit went $before -> $after for a connection"

	# per route, with the netns default bbrx: the route wins
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	ip -n "$SND" route replace "$RCV_IP4/32" via "$RTR_IP4_S" congctl bbrx3
	cc=$(helper - "$RCV_IP4")
	check_err $? "client on the congctl bbrx3 route failed"
	[[ $cc == bbrx3 ]]
	check_err $? "route congctl bbrx3 gave '$cc'"
	ip -n "$SND" route del "$RCV_IP4/32"
	cc=$(helper - "$RCV_IP4")
	[[ $cc == bbrx ]]
	check_err $? "netns default bbrx gave '$cc' beside bbrx3"
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=bbrx3
	cc=$(helper - "$RCV_IP4")
	[[ $cc == bbrx3 ]]
	check_err $? "netns default bbrx3 gave '$cc'"
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=cubic

	line=$(helper_bg_check bbrx3 "$RCV_IP4")
	[[ $line == *" cc=bbrx3"* && $line == *" bw="* ]]
	check_err $? "ss -ti shows no bbrx3 model: $line"

	ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -H 60 bbrx3 "$RCV_IP4" \
		"$SINK_PORT" 1048576 >/dev/null 2>&1 &
	pid=$!
	bg_track $pid
	line=$(ss_sink_flow 5)
	rmmod tcp_bbrx 2>"$TMPD/rmmod.err"
	check_fail $? "rmmod succeeded while a bbrx3 socket exists ($line)"
	log_info "rmmod with a bbrx3 socket: $(head -n 1 "$TMPD/rmmod.err")"
	bg_kill $pid
	module_unload 15
	check_err $? "rmmod still refused 15 s after the bbrx3 socket closed"

	on_demand_select bbrx3
	module_ensure_loaded
	log_test "bbrx3 beside bbrx: setsockopt, route, netns default, ss -ti, on-demand load, rmmod refused while in use"
}

rmmod_busy_socket()
{
	local pid i line

	module_ensure_loaded
	# Started directly (not through a function) so $! is the helper itself.
	ip netns exec "$SND" "$BIN_DIR/cc_setsockopt" -H 60 bbrx "$RCV_IP4" \
		"$SINK_PORT" 1048576 >/dev/null 2>&1 &
	pid=$!
	bg_track $pid
	line=$(ss_sink_flow 5)
	[[ $line == *" cc=bbrx"* ]]
	check_err $? "no established bbrx connection to hold the module: $line"

	rmmod tcp_bbrx 2>"$TMPD/rmmod.err"
	check_fail $? "rmmod succeeded while a bbrx socket exists"
	log_info "rmmod with a bbrx socket: $(head -n 1 "$TMPD/rmmod.err")"
	bbrx_module_loaded
	check_err $? "module gone while a socket uses it"
	cc_available
	check_err $? "bbrx unregistered by a failed rmmod"
	[[ -n $(ip netns exec "$SND" ss -tinH state established "( dport = :$SINK_PORT )") ]]
	check_err $? "the bbrx connection did not survive the refused rmmod"

	bg_kill $pid
	module_unload 15
	check_err $? "rmmod still refused 15 s after the last bbrx socket was closed"

	module_ensure_loaded
	log_test "rmmod refused while a bbrx socket exists, works once it is gone"
}

rmmod_busy_netns_default()
{
	module_ensure_loaded
	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	check_err $? "setting the netns default to bbrx failed"
	module_unload 1
	check_fail $? "rmmod succeeded while a netns default is bbrx"
	bbrx_module_loaded
	check_err $? "module gone while a netns default is bbrx"

	ip netns exec "$SND" sysctl -qw net.ipv4.tcp_congestion_control=cubic
	module_unload 10
	check_err $? "rmmod refused after the netns default went back to cubic"

	module_ensure_loaded
	log_test "rmmod refused while a netns default is bbrx"
}

rmmod_busy_netns_deleted()
{
	local ns=xns-$SFX

	module_ensure_loaded
	EXTRA_NETNS+=" $ns"
	ip netns add "$ns"
	ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control=bbrx
	check_err $? "setting the netns default to bbrx failed"
	module_unload 1
	check_fail $? "rmmod succeeded while a netns default is bbrx"

	ip netns del "$ns"
	module_unload 20
	check_err $? "rmmod refused 20 s after the netns holding bbrx as default was deleted"

	module_ensure_loaded
	log_test "a deleted netns with default bbrx releases the module"
}

require_command modprobe rmmod modinfo ip ss
require_bbrx
require_helper
require_topo
sink_start -6 || { echo "# sink did not start"; exit 1; }

tests_run
module_ensure_loaded
tests_done
exit $EXIT_STATUS
