#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, what the sockets and the namespaces report:
# `ss -ti` samples, and the counters of /proc/net/snmp and netstat.
#
# lib.sh sources it; a test sources lib.sh, never this file.

##############################################################################
# ss -ti

# ss_sampler_start NS SPORT FILE INTERVAL: sample `ss -tin` of the socket with
# local port SPORT every INTERVAL s.  Sets SS_SAMPLER_PID.
ss_sampler_start()
{
	local ns=$1 sport=$2 file=$3 int=$4

	ip netns exec "$ns" bash -c '
		while :; do
			echo "@ $EPOCHREALTIME"
			ss -tinH state established "( sport = :'"$sport"' )"
			sleep '"$int"'
		done' >"$file" 2>/dev/null &
	SS_SAMPLER_PID=$!
	bg_track $SS_SAMPLER_PID
}

# ss_flow NS SPORT: one sample, same format as ss_parse prints.
ss_flow()
{
	local ns=$1 sport=$2

	{ echo "@ $EPOCHREALTIME"
	  ip netns exec "$ns" ss -tinH state established "( sport = :$sport )"; } | ss_parse
}

# ss_parse: turn sampler output (stdin or FILE) into one line per sample:
#   t=<s> cc=<name> cwnd=<segs> mss=<bytes> rtt=<ms> pacing_rate=<bit/s>
#   delivery_rate=<bit/s> bw=<bit/s> mrtt=<ms> pacing_gain=<x> cwnd_gain=<x>
#   bytes_acked=<n> retrans=<n>
# Fields ss did not print are left out.  Rates are converted from ss's
# "%.1f[KMG]bps" to bit/s.
ss_parse()
{
	awk '
	function rate(s,   v, u) {
		if (!match(s, /^[0-9.]+[KMG]?bps/)) return -1
		s = substr(s, 1, RLENGTH - 3)
		u = substr(s, length(s), 1)
		if (u == "G") return substr(s, 1, length(s) - 1) * 1e9
		if (u == "M") return substr(s, 1, length(s) - 1) * 1e6
		if (u == "K") return substr(s, 1, length(s) - 1) * 1e3
		return s + 0
	}
	function flush(   k, out) {
		if (have) {
			out = "t=" t
			for (k in f) out = out " " k "=" f[k]
			print out
		}
		delete f; have = 0
	}
	/^@ / { flush(); t = $2; next }
	{
		for (i = 1; i <= NF; i++) {
			tok = $i
			if (tok ~ /^(reno|cubic|bbr|bbrx|bbr2|bbr3|dctcp|vegas|htcp|westwood|[a-z][a-z0-9_]*)$/ &&
			    !("cc" in f) && tok !~ /^(ts|sack|ecn|ecnseen|fastopen|cong|app_limited|send|pacing_rate|delivery_rate|lastsnd|lastrcv|lastack|busy|rwnd_limited|sndbuf_limited|unacked|retrans|lost|sacked|reordering|notsent|minrtt|rcv_rtt|rcv_space|rcv_ssthresh|ssthresh)$/) {
				f["cc"] = tok
			} else if (tok ~ /^cwnd:/) {
				f["cwnd"] = substr(tok, 6); have = 1
			} else if (tok ~ /^mss:/) {
				f["mss"] = substr(tok, 5)
			} else if (tok ~ /^rtt:/) {
				split(substr(tok, 5), a, "/"); f["rtt"] = a[1]
			} else if (tok ~ /^bytes_acked:/) {
				f["bytes_acked"] = substr(tok, 13)
			} else if (tok ~ /^retrans:/) {
				split(substr(tok, 9), a, "/"); f["retrans"] = a[2]
			} else if (tok == "pacing_rate") {
				f["pacing_rate"] = rate($(i + 1)); i++
			} else if (tok == "delivery_rate") {
				f["delivery_rate"] = rate($(i + 1)); i++
			} else if (tok ~ /^bbr:\(/) {
				s = tok; sub(/^bbr:\(/, "", s); sub(/\)$/, "", s)
				n = split(s, kv, ",")
				for (j = 1; j <= n; j++) {
					split(kv[j], p, ":")
					if (p[1] == "bw") f["bw"] = rate(p[2])
					else f[p[1]] = p[2]
				}
			}
		}
	}
	END { flush() }' "$@"
}

# ss_samples FILE [SKIP_S]: parsed samples of a sampler file, without those
# of the first SKIP_S seconds after the first sample that shows the socket.
ss_samples()
{
	local file=$1 skip=${2:-0}

	ss_parse "$file" | awk -v skip="$skip" '{
		split($1, p, "="); t = p[2] + 0
		if (!n++) t0 = t
		if (t - t0 >= skip) print
	}'
}

# ss_field FIELD [AWK-CONDITION] < parsed samples: the values of FIELD in
# the samples matching the condition (e.g. 'pacing_gain == 1.25').
ss_field()
{
	local field=$1 cond=${2:-1}

	awk -v fld="$field" '{
		delete v
		for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
	}
	{ if (!(fld in v)) next }
	'"$(ss_cond_awk "$cond")"' { print v[fld] }'
}

# ss_burst_goal SHIFT [CAP_SEGS] < parsed samples: bbrx's burst goal
# (tso_segs_goal, segments) at each sample, from its pacing_rate and mss:
# min(127, max(2, min(pacing_rate >> SHIFT bytes, 65279) / mss)), capped at
# CAP_SEGS where given (gso_cap = 1 and the device's gso_max_segs).  The
# docs/usage.md's burst goal; bbrx_gso.sh checks cwnd against it.
ss_burst_goal()
{
	awk -v shift="$1" -v cap="${2:-0}" '{
		delete v
		for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
		if (!("pacing_rate" in v) || !(v["mss"] > 0)) next
		bytes = int(v["pacing_rate"] / 8 / 2 ^ shift)
		if (bytes > 65536 - 1 - 256) bytes = 65536 - 1 - 256
		goal = int(bytes / v["mss"])
		if (goal < 2) goal = 2
		if (cap > 0 && goal > cap) goal = cap
		if (goal > 127) goal = 127
		print goal
	}'
}

# Translate a condition on field names into awk on v[]: "pacing_gain == 1"
# -> (v["pacing_gain"] == 1).
ss_cond_awk()
{
	echo "($1)" | sed -E 's/([a-z_]+[a-z])([ ]*[=!<>])/v["\1"]+0\2/g'
}

##############################################################################
# snmp and netstat counters

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
