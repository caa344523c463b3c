#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, shaping the path: bottlenecks, delay, loss,
# policers, ACK slots, the sender's qdisc and late TX completions.
#
# lib.sh sources it; a test sources lib.sh, never this file.

# The reference path of the tests: 100 Mbit/s bottleneck, 20 ms RTT.
PATH_RATE=100
PATH_RTT=20
PATH_BDP=$(bdp_bytes $PATH_RATE $PATH_RTT)
PATH_GOODPUT_MAX=$(awk -v r=$PATH_RATE -v f="$GOODPUT_FRAC" 'BEGIN { printf "%.1f", r * f }')

# path_bottleneck [BUF_BDP] [LOSS_PCT]: tbf PATH_RATE with a BUF_BDP x BDP
# buffer (default 1) on the router, PATH_RTT of delay on the ACK path.
path_bottleneck()
{
	local bufbdp=${1:-1} loss=$2 buf

	buf=$(awk -v b="$PATH_BDP" -v m="$bufbdp" 'BEGIN { printf "%d", b * m }')
	shape_bottleneck "$PATH_RATE" "$buf" $loss &&
		shape_delay "$PATH_RTT" "$PATH_BDP"
}

# shape_bottleneck RATE_MBIT BUF_BYTES [LOSS_PCT]
#   Router egress toward the receiver: tbf at RATE with a BUF_BYTES queue.
#   With LOSS_PCT: htb at RATE with a netem child dropping LOSS_PCT% per
#   packet (sized to BUF_BYTES); call hop_per_packet so the skbs are packets.
shape_bottleneck()
{
	local rate=$1 buf=$2 loss=$3
	local pkts

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	if [[ -z $loss ]]; then
		tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: \
			tbf rate "${rate}mbit" burst "$(shape_burst "$rate")" limit "$buf"
	else
		pkts=$(( buf / 1514 > 10 ? buf / 1514 : 10 ))
		shape_rate_netem "$rate" loss "${loss}%" limit "$pkts"
	fi
}

# shape_peak_bucket RATE_MBIT PEAK_MBIT BUCKET_BYTES BUF_BYTES: the
# router's egress toward the receiver at PEAK (htb) for a first
# BUCKET_BYTES, then at RATE (a tbf under it with that bucket): a path whose
# rate falls once a flow has measured PEAK.
shape_peak_bucket()
{
	local burst

	burst=$(shape_burst "$2")
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${2}mbit" ceil "${2}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: \
		tbf rate "${1}mbit" burst "$3" limit "$4"
}

# shape_burst RATE_MBIT: a shaper's bucket, 2 ms worth of tokens and at
# least 10 full frames.
shape_burst()
{
	awk -v r="$1" 'BEGIN { b = r * 1e6 / 8 * 0.002; if (b < 15140) b = 15140; printf "%d", b }'
}

# shape_rate_netem RATE_MBIT NETEM_ARGS...: the router's egress toward the
# receiver at RATE (htb, shape_burst) into a netem with those arguments.
shape_rate_netem()
{
	local rate=$1 burst

	shift
	burst=$(shape_burst "$rate")
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${rate}mbit" ceil "${rate}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: netem "$@"
}

# shape_loss LOSS_PCT: no rate limit, per-packet random loss on the router's
# egress toward the receiver.
shape_loss()
{
	local loss=$1

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root netem loss "${loss}%" limit 10000
}

# shape_delay RTT_MS [BDP_BYTES]: netem delay on the receiver's egress (the
# ACK path) so the sender's own qdisc never orphans data skbs.  The limit is
# set well above the number of packets in flight.
shape_delay()
{
	local ms=$1 bdp=${2:-0}
	local limit

	limit=$(( bdp / 500 > 10000 ? bdp / 500 : 10000 ))
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	tc -n "$RCV" qdisc add dev "$RCV_IF" root netem delay "${ms}ms" limit "$limit"
}

# shape_ack_slots RTT_MS SLOT_MS: shape_delay's netem on the ACK path,
# releasing what it holds in one burst per SLOT_MS (netem slot): the ACK
# aggregation of a Wi-Fi or DOCSIS hop.
shape_ack_slots()
{
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	tc -n "$RCV" qdisc add dev "$RCV_IF" root netem delay "${1}ms" \
		slot "${2}ms" "${2}ms" limit 10000
}

# shape_reorder RATE_MBIT DELAY_MS PCT GAP: the router's egress toward the
# receiver at RATE through a netem that delays packets DELAY_MS but sends
# every GAPth one at once, ahead of the others, with PCT% chance.
shape_reorder()
{
	shape_rate_netem "$1" delay "${2}ms" reorder "$3%" gap "$4" limit 1000
}

# shape_policer RATE_MBIT BURST_BYTES: a token-bucket policer (tc police,
#   exceeding packets dropped, no queue) on the router's egress toward the
#   receiver, in a clsact of its own beside any root qdisc.  Needs
#   act_police and cls_matchall.
shape_policer()
{
	modprobe -a act_police cls_matchall sch_ingress 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" clsact &&
		tc -n "$RTR" filter add dev "$RTR_IF_R" egress matchall \
			action police rate "${1}mbit" burst "$2" conform-exceed drop/pipe
}

# shape_drop_every N [full]: drop every Nth packet on the router's egress
#   toward the receiver (act_gact's deterministic mode, in a clsact of its
#   own beside any root qdisc): a loss rate of exactly 1/N, spread evenly,
#   so that any flight of F packets loses F/N of them, give or take one.
#   With "full", only IPv4 packets of 1500 bytes count (full-sized data
#   segments; handshakes and iperf3's control messages pass).  Counts skbs:
#   pair it with hop_per_packet.  Needs act_gact and cls_matchall or
#   cls_u32.
shape_drop_every()
{
	local -a match=(matchall)

	[[ ${2:-} == full ]] && match=(protocol ip u32 match u16 1500 0xffff at 2)
	modprobe -a act_gact cls_matchall cls_u32 sch_ingress 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" clsact &&
		tc -n "$RTR" filter add dev "$RTR_IF_R" egress "${match[@]}" \
			action gact pass random determ drop "$1"
}

# shape_ce_marker RATE_MBIT CE_THRESHOLD: router egress toward the receiver
#   at RATE (htb) into a single fq_codel queue that marks CE on packets
#   whose sojourn exceeds CE_THRESHOLD (e.g. 1ms): one queue (flows 1), so
#   a ping shares the data's queue and sees its delay.  Needs sch_htb and
#   sch_fq_codel; ECN itself is the sender's net.ipv4.tcp_ecn.
shape_ce_marker()
{
	local rate=$1 thresh=$2 burst=25000

	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" root handle 1: htb default 1 &&
	tc -n "$RTR" class add dev "$RTR_IF_R" parent 1: classid 1:1 \
		htb rate "${rate}mbit" ceil "${rate}mbit" burst "$burst" cburst "$burst" &&
	tc -n "$RTR" qdisc add dev "$RTR_IF_R" parent 1:1 handle 10: \
		fq_codel ce_threshold "$thresh" flows 1 ecn
}

shape_clear()
{
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" root 2>/dev/null
	tc -n "$RTR" qdisc del dev "$RTR_IF_R" clsact 2>/dev/null
	tc -n "$RCV" qdisc del dev "$RCV_IF" root 2>/dev/null
	return 0
}

# hop_per_packet: make the router hop carry one packet per skb, so that a
# loss qdisc on the router drops single packets, not GSO/GRO aggregates:
# software segmentation on the sender's NIC (tso/gso off: veth honours it,
# the QEMU NICs have no offloads anyway) and no GRO on the router's ingress.
hop_per_packet()
{
	ip netns exec "$SND" ethtool -K "$SND_IF" tso off gso off &>/dev/null
	ip netns exec "$RTR" ethtool -K "$RTR_IF_S" gro off &>/dev/null
	ip netns exec "$RTR" ethtool -K "$RTR_IF_R" tso off gso off &>/dev/null
	ip netns exec "$RCV" ethtool -K "$RCV_IF" gro off &>/dev/null
	return 0
}

# set_gso_max_segs N: the sender NIC's gso_max_segs (read by sockets at
# connect time).  Also turns TSO off where the NIC lets us.
set_gso_max_segs()
{
	local n=$1

	ip netns exec "$SND" ethtool -K "$SND_IF" tso off &>/dev/null
	ip -n "$SND" link set dev "$SND_IF" gso_max_segs "$n"
}

get_gso_max_segs()
{
	ip -n "$SND" -d link show dev "$SND_IF" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "gso_max_segs") print $(i + 1) }'
}

# shape_sender_tbf RATE_MBIT: a tbf on the sender's own NIC, the closest model
# of a RATE NIC: skbs stay charged to the socket until they leave for the
# "wire" (hook_tsq.sh, bench scenario tsq).
shape_sender_tbf()
{
	tc -n "$SND" qdisc replace dev "$SND_IF" root tbf rate "${1}mbit" \
		burst 15140 limit 150000
}

# shape_sender_fq RATE_MBIT [fq args...]: fq with maxrate on the sender's own
# NIC: a just-sent skb waits in fq, charged to the socket, until its time on
# the "wire" (hook_autocork_semantics.sh, hook_delack_rate.sh, bench).
shape_sender_fq()
{
	local rate=$1; shift

	tc -n "$SND" qdisc replace dev "$SND_IF" root fq maxrate "${rate}mbit" "$@"
}

# late_completion_setup RATE_MBIT DELAY_US: the sender's route to the
# receiver leaves through a NIC model whose TX completions come DELAY_US
# after the packet left at RATE_MBIT (tx_delay.c has the why):
#   socket -> lc0 (veth, tbf RATE: the line rate, skbs charged) -> lc1
#   ingress: clone out of SND_IF (the wire), original -> lcd (dummy, fq
#   holding it DELAY_US, still charged) -> freed: the TX completion.
# Needs cls_bpf, sch_fq, dummy and a bpffs (mounted under $TMPD).  Returns
# non-zero and says why on failure.  late_completion_delay DELAY_US changes
# the delay.
# link_field NS DEV FIELD: one field of `ip -j link show` (address, ifindex...).
link_field()
{
	ip -n "$1" -j link show "$2" | jq -r ".[0].$3"
}

late_completion_setup()
{
	local rate=$1 delay=$2 rmac widx hidx

	modprobe -a cls_bpf sch_fq dummy 2>/dev/null
	LC_BPF=$TMPD/bpf
	mkdir -p "$LC_BPF"
	mountpoint -q "$LC_BPF" || mount -t bpf bpf "$LC_BPF" ||
		{ echo "# cannot mount bpffs"; return 1; }
	rmac=$(link_field "$RTR" "$RTR_IF_S" address)
	ip -n "$SND" link add lc0 type veth peer lc1 &&
		ip -n "$SND" link add lcd type dummy &&
		ip -n "$SND" link set lc0 up &&
		ip -n "$SND" link set lc1 up &&
		ip -n "$SND" link set lcd up || { echo "# late completion: links"; return 1; }
	ns_sysctl "$SND" net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.lc1.rp_filter=0 \
		"net.ipv4.conf.$SND_IF.rp_filter=0"
	widx=$(link_field "$SND" "$SND_IF" ifindex)
	hidx=$(link_field "$SND" lcd ifindex)
	"$BIN_DIR/tx_delay" wire "$LC_BPF/wire" "$widx" "$hidx" >/dev/null ||
		{ echo "# tx_delay wire failed"; return 1; }
	tc -n "$SND" qdisc add dev lc1 clsact &&
		tc -n "$SND" filter add dev lc1 ingress bpf object-pinned "$LC_BPF/wire" da &&
		tc -n "$SND" qdisc add dev lcd clsact &&
		tc -n "$SND" qdisc replace dev lcd root fq nopacing limit 100000 flow_limit 100000 &&
		tc -n "$SND" qdisc replace dev lc0 root tbf rate "${rate}mbit" burst 15140 limit 1000000 ||
		{ echo "# late completion: tc setup failed"; return 1; }
	late_completion_delay "$delay" || return 1
	ip -n "$SND" neigh replace "$RTR_IP4_S" lladdr "$rmac" dev lc0 nud permanent &&
		ip -n "$SND" route replace "$RCV_IP4/32" via "$RTR_IP4_S" dev lc0 onlink src "$SND_IP4" ||
		{ echo "# late completion: route"; return 1; }
	ip netns exec "$SND" ping -q -c1 -W1 "$RCV_IP4" &>/dev/null ||
		{ echo "# late completion: no connectivity"; return 1; }
}

late_completion_delay()
{
	rm -f "$LC_BPF/hold"
	"$BIN_DIR/tx_delay" hold "$LC_BPF/hold" "$1" >/dev/null &&
		tc -n "$SND" filter replace dev lcd egress pref 1 handle 1 bpf \
			object-pinned "$LC_BPF/hold" da ||
		{ echo "# tx_delay hold $1 failed"; return 1; }
}

# sender_cwnd_lock CWND: lock the sender's cwnd at CWND segments through its
# default route (`cwnd lock`).  The kernel applies a locked route cwnd only
# through the tcp_metrics cache, so metrics are saved and a 1 s warm-up flow
# (iperf3 server running) creates the entry later connections read.  Sets
# SENDER_METRICS (the sender's tcp_metrics line for the receiver); returns
# non-zero if a step failed.
sender_cwnd_lock()
{
	local cwnd=$1 rc=0

	ip -n "$SND" route change default via "$RTR_IP4_S" dev "$SND_IF" cwnd lock "$cwnd" || rc=1
	ns_sysctl "$SND" net.ipv4.tcp_no_metrics_save=0
	flow_run warmup - 1 >/dev/null || rc=1
	sleep 0.3
	SENDER_METRICS=$(ip -n "$SND" tcp_metrics show "$RCV_IP4" 2>&1)
	[[ $SENDER_METRICS == *"cwnd $cwnd"* ]] || rc=1
	return $rc
}
