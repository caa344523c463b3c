#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# net.ipv4.bbrx.* sysctls: defaults in a new netns, EINVAL (and no change)
# for out-of-range and non-numeric writes, valid values accepted, and the
# values are per network namespace.  The knobs are exactly those of
# lib_module.sh's tables (names read from the loaded module), checked
# against its defaults and ranges.  Who may write them (a container's root, a user
# namespace's, CAP_NET_ADMIN): bbrx_container.sh.

ALL_TESTS="
	sysctl_names_match
	sysctl_present_defaults
	sysctl_reject_invalid
	sysctl_accept_valid
	sysctl_netns_isolation
"
source "$(dirname "$0")/lib.sh"

SYSDIR=/proc/sys/net/ipv4/bbrx

# sysctl_write NS NAME VALUE: write VALUE (plus newline, as echo does) to the
# proc file in NS.  Prints the shell's error, returns the write status.
sysctl_write()
{
	local ns=$1 name=$2 val=$3

	ip netns exec "$ns" bash -c 'echo "$1" > "$2"' _ "$val" "$SYSDIR/$name" 2>&1
}

sysctl_read()
{
	local ns=$1 name=$2

	ip netns exec "$ns" cat "$SYSDIR/$name"
}

# sysctl_names_match: the files of $SYSDIR (the loaded module's knobs) are
# the names of BBRX_SYSCTL_TABLE and BBRX_POLICY_TABLE (lib_module.sh), no
# more, no fewer.
sysctl_names_match()
{
	local mod tab missing extra dup

	mod=$(ip netns exec "$SND" ls "$SYSDIR" | sort)
	tab=$(awk '{ print $1 }' <<<"$BBRX_SYSCTL_TABLE
$BBRX_POLICY_TABLE" | sort)
	[[ -n $mod ]]
	check_err $? "no file in $SYSDIR"
	missing=$(comm -13 <(echo "$mod") <(uniq <<<"$tab") | paste -sd ' ')
	extra=$(comm -23 <(echo "$mod") <(uniq <<<"$tab") | paste -sd ' ')
	dup=$(uniq -d <<<"$tab" | paste -sd ' ')
	[[ -z $missing$extra$dup ]]
	check_err $? "$(printf '%s' \
		"${missing:+in the tables of lib_module.sh, not in tcp_bbrx: $missing; }" \
		"${extra:+in tcp_bbrx, no row in BBRX_SYSCTL_TABLE or BBRX_POLICY_TABLE (lib_module.sh): $extra; }" \
		"${dup:+two rows in the tables of lib_module.sh: $dup; }")in $SYSDIR: $(paste -sd ' ' <<<"$mod")"
	log_test "the module's knobs are those of lib_module.sh's tables" "$(wc -l <<<"$mod") knobs"
}

sysctl_present_defaults()
{
	local name def min max v

	while read -r name def min max; do
		v=$(sysctl_read "$SND" "$name" 2>/dev/null)
		check_err $? "$SYSDIR/$name missing"
		[[ $v == "$def" ]]
		check_err $? "$name is '$v' in a new netns, default is $def"
	done <<<"$BBRX_SYSCTL_TABLE
$BBRX_POLICY_TABLE"
	log_test "every net.ipv4.bbrx sysctl exists and starts at its default"
}

sysctl_reject_invalid()
{
	local name def min max bad out rc v n=0

	while read -r name def min max; do
		for bad in $((min - 1)) $((max + 1)) abc "" 1.5 99999999999 \
			   -99999999999; do
			out=$(sysctl_write "$SND" "$name" "$bad")
			rc=$?
			v=$(sysctl_read "$SND" "$name")
			n=$((n + 1))
			if [[ $rc -eq 0 ]]; then
				check_err 1 "$name: write '$bad' succeeded (now '$v')"
				continue
			fi
			[[ $out == *"Invalid argument"* ]]
			check_err $? "$name: write '$bad' failed with '$out', not EINVAL"
			[[ $v == "$def" ]]
			check_err $? "$name: value changed to '$v' by rejected write '$bad'"
		done
		# sysctl(8) reports the failure too.
		ip netns exec "$SND" sysctl -qw "net.ipv4.bbrx.$name=$((max + 1))" 2>/dev/null
		check_fail $? "sysctl -w $name=$((max + 1)) succeeded"
	done <<<"$BBRX_SYSCTL_TABLE"
	log_info "$n invalid writes checked"
	log_test "out-of-range and garbage writes fail with EINVAL and change nothing"
}

sysctl_accept_valid()
{
	local name def min max val v mid

	while read -r name def min max; do
		mid=$(( (min + max) / 2 ))
		for val in "$min" "$max" "$mid" "$def"; do
			sysctl_write "$SND" "$name" "$val" >/dev/null
			check_err $? "$name: write $val (valid) failed"
			v=$(sysctl_read "$SND" "$name")
			[[ $v == "$val" ]]
			check_err $? "$name: wrote $val, reads '$v'"
		done
		ip netns exec "$SND" sysctl -qw "net.ipv4.bbrx.$name=$min"
		check_err $? "sysctl -w $name=$min failed"
		sysctl_write "$SND" "$name" "$def" >/dev/null
	done <<<"$BBRX_SYSCTL_TABLE"
	log_test "min, max, middle and default values are accepted and read back"
}

sysctl_netns_isolation()
{
	local name def min max val v ns=yns-$SFX
	local -A init_before

	while read -r name def min max; do
		init_before[$name]=$(sysctl -n "net.ipv4.bbrx.$name")
	done <<<"$BBRX_SYSCTL_TABLE"

	# A non-default value for every knob in the sender netns.
	while read -r name def min max; do
		val=$min
		[[ $val == "$def" ]] && val=$max
		sysctl_write "$SND" "$name" "$val" >/dev/null
		check_err $? "$name: write $val failed"
	done <<<"$BBRX_SYSCTL_TABLE"

	EXTRA_NETNS+=" $ns"
	ip netns add "$ns"
	while read -r name def min max; do
		val=$min
		[[ $val == "$def" ]] && val=$max
		v=$(sysctl_read "$SND" "$name")
		[[ $v == "$val" ]]
		check_err $? "$name: reads '$v' in the netns that set $val"
		v=$(sysctl_read "$RCV" "$name")
		[[ $v == "$def" ]]
		check_err $? "$name: another existing netns sees '$v' (default $def)"
		v=$(sysctl_read "$ns" "$name")
		[[ $v == "$def" ]]
		check_err $? "$name: a netns created afterwards starts at '$v' (default $def)"
		v=$(sysctl -n "net.ipv4.bbrx.$name")
		[[ $v == "${init_before[$name]}" ]]
		check_err $? "$name: the initial netns changed to '$v'"
		sysctl_write "$SND" "$name" "$def" >/dev/null
	done <<<"$BBRX_SYSCTL_TABLE"
	ip netns del "$ns"

	log_test "values are per netns; a new netns starts from the defaults"
}

require_command ip sysctl
require_bbrx
require_topo

tests_run
tests_done
exit $EXIT_STATUS
