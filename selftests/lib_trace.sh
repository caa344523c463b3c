#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, tracefs, bbrx's trace events and kprobe
# events.
#
# lib.sh sources it; a test sources lib.sh, never this file.

# tracefs_find [ENTRY]: set TRACEFS to the mounted tracefs that has ENTRY
# (default trace; e.g. kprobe_events, instances), mounting it if needed.
tracefs_find()
{
	local d e=${1:-trace}

	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		[[ -e $d/$e ]] && { TRACEFS=$d; return 0; }
	done
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null &&
		[[ -e /sys/kernel/tracing/$e ]] &&
		{ TRACEFS=/sys/kernel/tracing; return 0; }
	return 1
}

# bbrx's trace events.
TRACEFS=
EV_DIR=
BUF_KB0=

# bbrx_events_setup KB: TRACEFS and EV_DIR ($TRACEFS/events/bbrx) set, a
# ring buffer of KB per CPU (the old size restored on exit, with every bbrx
# event off and the buffer emptied). Skips without tracefs; fails without
# the module's events.
bbrx_events_setup()
{
	tracefs_find trace || ksft_exit_skip "no tracefs"
	EV_DIR=$TRACEFS/events/bbrx
	[[ -d $EV_DIR ]] || { echo "# $EV_DIR missing: tcp_bbrx has no trace events"; exit 1; }
	trap 'bbrx_events_cleanup; cleanup' EXIT
	BUF_KB0=$(awk '{ print $1; exit }' "$TRACEFS/buffer_size_kb")
	echo "$1" >"$TRACEFS/buffer_size_kb"
}

bbrx_events_cleanup()
{
	[[ -n $EV_DIR && -d $EV_DIR ]] && echo 0 >"$EV_DIR/enable"
	[[ -n $TRACEFS ]] && : >"$TRACEFS/trace"
	[[ -n $BUF_KB0 ]] && echo "$BUF_KB0" >"$TRACEFS/buffer_size_kb"
}

# trace_start EVENT...: empty ring buffer, only these bbrx events on.
trace_start()
{
	local e

	echo 0 >"$EV_DIR/enable"
	: >"$TRACEFS/trace"
	for e in "$@"; do
		echo 1 >"$EV_DIR/$e/enable" || return 1
	done
	echo 1 >"$TRACEFS/tracing_on"
}

# kprobe_events_add GROUP NAME=TARGET...: an entry kprobe event GROUP/NAME
# on each TARGET (a symbol; MODULE:symbol for a module's), then the group
# enabled.  Says which the kernel refused.
kprobe_events_add()
{
	local g=$1 e

	shift
	for e in "$@"; do
		echo "p:$g/${e%%=*} ${e#*=}" >>"$TRACEFS/kprobe_events" ||
			{ echo "# kprobe event on ${e#*=} refused"; return 1; }
	done
	echo 1 >"$TRACEFS/events/$g/enable" ||
		{ echo "# enabling the kprobe events of $g failed"; return 1; }
}

# kprobe_events_del GROUP: every kprobe event of GROUP off and removed;
# fails if the group is still there.
kprobe_events_del()
{
	local g=$1 ev

	[[ -n ${TRACEFS:-} && -d $TRACEFS/events/$g ]] || return 0
	{ echo 0 >"$TRACEFS/events/$g/enable"; } 2>/dev/null
	for ev in $(sed -n "s|^[pr]:$g/\([^ ]*\) .*|\1|p" "$TRACEFS/kprobe_events"); do
		{ echo "-:$g/$ev" >>"$TRACEFS/kprobe_events"; } 2>/dev/null
	done
	! [[ -d $TRACEFS/events/$g ]]
}

# trace_stop FILE: every bbrx event off, the buffer into FILE; prints the
# events the ring buffer overwrote or dropped (must be 0 for exact counts).
trace_stop()
{
	echo 0 >"$EV_DIR/enable"
	cat "$TRACEFS/trace" >"$1"
	cat "$TRACEFS"/per_cpu/cpu*/stats 2>/dev/null |
		awk '/^(overrun|dropped events):/ { n += $NF } END { print n + 0 }'
}

# trace_of FILE EVENT NETNS [SPORT]: "key=value ..." of each EVENT line
# from netns inode NETNS (and local port SPORT).
trace_of()
{
	awk -v ev=" $2: " -v ns=" netns=$3 " -v sp="${4:+ sport=$4 }" '
		{
			i = index($0, ev)
			if (!i) next
			rest = " " substr($0, i + length(ev)) " "
			if (!index(rest, ns) || (sp != "" && !index(rest, sp))) next
			print substr(rest, 2, length(rest) - 2)
		}' "$1"
}

# tf KEY: the values of KEY in "key=value" lines on stdin.
tf()
{
	awk -v k="$1=" '{ for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }'
}
