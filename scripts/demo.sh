#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bbrx demo (run by `make demo` inside the VM, next to the selftests' lib.sh):
# cubic, in-tree bbr and bbrx on two paths, one table.
#
#   bottleneck  router tbf 100 Mbit/s with a 1-BDP buffer, 20 ms RTT
#   gso2        no bottleneck, sender NIC gso_max_segs 2 (TSO off where the
#               NIC allows), bbrx with gso_cap 0 (fixed) and 1 (pre-fix)
#
# Figures come from an emulated CPU (QEMU TCG): compare rows, do not read
# them as what the hardware does.

cd "$(dirname "$0")" || exit 1
# shellcheck source=../selftests/lib.sh
source ./lib.sh

SECS=${DEMO_SECS:-10}
ROWS=()

require_bbrx
require_topo
iperf3_server_start || exit 1

# row PATH LABEL CC: one flow, then a table row from iperf3's JSON, the ss
# samples (cwnd median) and ping under load (RTT median).
row()
{
	local path=$1 label=$2 cc=$3 id=$1-$2 gp cwnd rtt

	FLOW_SS=0.2 FLOW_PING=1 flow_run "$id" "$cc" "$SECS" || return
	gp=$(iperf3_goodput "$TMPD/$id.json")
	cwnd=$(ss_samples "$TMPD/$id.ss" 2 | ss_field cwnd | median)
	rtt=$(ping_median "$TMPD/$id.ping")
	ROWS+=("$(printf '%-11s %-14s %9s %8s %9s %8s' "$path" "$label" "$gp" \
		"$cwnd" "$rtt" "$(iperf3_retrans "$TMPD/$id.json")")")
	echo "# $path $label: $gp Mbit/s" >&2
}

rtt=20
bdp=$(bdp_bytes 100 $rtt)
shape_delay $rtt "$bdp"
shape_bottleneck 100 "$bdp"
for cc in cubic bbr bbrx; do
	row bottleneck "$cc" "$cc"
done

shape_clear
set_gso_max_segs 2
row gso2 cubic cubic
row gso2 bbr bbr
bbrx_sysctl_set "$SND" gso_cap 0
row gso2 "bbrx gso_cap=0" bbrx
bbrx_sysctl_set "$SND" gso_cap 1
row gso2 "bbrx gso_cap=1" bbrx
bbrx_sysctl_set "$SND" gso_cap 0

echo
echo "kernel $(uname -r); ${SECS}s flows; cwnd = median of ss samples (segments);"
echo "rtt = median ping under load (ms); bottleneck: tbf 100 Mbit/s, 1-BDP buffer, 20 ms"
printf '%-11s %-14s %9s %8s %9s %8s\n' path cc Mbit/s cwnd rtt_ms retrans
printf '%s\n' "${ROWS[@]}"
echo
bbrx_stat_all "$SND" | sed 's/^/bbrx_stat: /'
