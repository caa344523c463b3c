#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The bbrx selftests' library, tcp_bbrx itself: its knobs (the tests' own
# tables, the oracle), loading and unloading it, its counters and its
# sysctls.
#
# lib.sh sources it; a test sources lib.sh, never this file.

##############################################################################
# The knobs

# The knobs of net.ipv4.bbrx: name default min max. The names must be the
# module's (bbrx_sysctl.sh fails on a name in one and not the other, read
# from /proc/sys/net/ipv4/bbrx of the loaded module); the defaults and
# ranges are the tests' own copy of bbrx_params[] in module/sysctl.c on
# purpose, as the oracle: a test that read them from the module could not
# catch a wrong default or range.
# BBRX_SYSCTL_TABLE: the model knobs.
BBRX_SYSCTL_TABLE="\
scope 0 0 1
high_gain 2885 1000 10000
drain_gain 344 100 1000
cwnd_gain 2000 1000 10000
probe_bw_up_gain 1250 1000 3000
probe_bw_down_gain 750 100 1000
extra_acked_gain 1000 0 10000
min_rtt_win_ms 10000 100 600000
probe_rtt_ms 200 10 10000
tso_margin 3 0 16
gso_cap 0 0 1
pacing_shift 10 4 16
lt_bw 1 0 1
bbrx3_loss_thresh 20 1 500
bbrx3_beta 700 100 1000
bbrx3_headroom 150 0 500
bbrx3_ecn 0 0 1
bbrx3_ecn_thresh 500 1 1000
bbrx3_ecn_max_rtt_us 5000 0 10000000
bbrx3_probe_rtt_win_ms 5000 100 10000"

# BBRX_POLICY_TABLE: the hook policies (0 = the kernel's behaviour); which
# hooks each needs: POLICY_HOOKS in lib_hooks.sh.
BBRX_POLICY_TABLE="\
autocork 0 0 3
tsq 0 0 2
rcvbuf 0 0 1
delack 0 0 2"

# bbrx_policy_names: the hook policies of BBRX_POLICY_TABLE, space separated.
bbrx_policy_names()
{
	awk '{ printf "%s%s", sep, $1; sep = " " } END { print "" }' <<<"$BBRX_POLICY_TABLE"
}

##############################################################################
# Load, unload, counters and sysctls

bbrx_module_loaded()
{
	[[ -d /sys/module/tcp_bbrx ]]
}

# bbrx_installed: tcp_bbrx is installed where modprobe (and the kernel's
# on-demand load, request_module) finds it.
bbrx_installed()
{
	modinfo tcp_bbrx &>/dev/null
}

# bbrx_modload [PARAM=VALUE...]: load tcp_bbrx with these parameters:
# insmod $BBRX_KO when set (that file, installed or not), else modprobe.
# Errors on stderr.
bbrx_modload()
{
	if [[ -n ${BBRX_KO:-} ]]; then
		[[ -f $BBRX_KO && -r $BBRX_KO ]] ||
			{ echo "BBRX_KO=$BBRX_KO: no such file" >&2; return 1; }
		insmod "$BBRX_KO" "$@"
	elif bbrx_installed; then
		modprobe tcp_bbrx "$@"
	else
		echo "tcp_bbrx is not installed (no modinfo tcp_bbrx) and BBRX_KO is not set" >&2
		return 1
	fi
}

# bbrx_loader: how bbrx_modload loads the module, for messages.
bbrx_loader()
{
	if [[ -n ${BBRX_KO:-} ]]; then
		echo "insmod $BBRX_KO"
	else
		echo modprobe
	fi
}

# bbrx_modinfo FIELD: modinfo's FIELD of the module bbrx_modload loads.
bbrx_modinfo()
{
	modinfo -F "$1" "${BBRX_KO:-tcp_bbrx}" 2>/dev/null
}

# bbrx_on_demand: the kernel can load tcp_bbrx by name (a sysctl or
# setsockopt naming bbrx loads it). Not when BBRX_KO names the module
# only: the kernel would load the installed one, or none.
bbrx_on_demand()
{
	[[ -z ${BBRX_KO:-} ]] && bbrx_installed
}

# Load tcp_bbrx (and the modules the tests use); skip if there is none to
# load, fail if BBRX_KO names a missing file.
bbrx_module_load()
{
	local m

	for m in inet_diag tcp_diag tcp_bbr veth sch_tbf sch_htb sch_netem; do
		modprobe -q "$m" 2>/dev/null
	done
	bbrx_module_loaded && return 0
	[[ -n ${BBRX_KO:-} ]] || bbrx_installed ||
		ksft_exit_skip "tcp_bbrx is not installed (no modinfo tcp_bbrx) and BBRX_KO is not set"
	bbrx_modload || return 1
	bbrx_module_loaded
}

require_bbrx()
{
	require_root
	bbrx_module_load || {
		echo "# loading tcp_bbrx failed ($(bbrx_loader))"
		RET=1 retmsg="loading tcp_bbrx failed"
		log_test "load tcp_bbrx"
		tests_done
		exit 1
	}
}

# bbrx_stat NAME [NS]: print counter NAME of /proc/net/bbrx_stat (of netns NS).
# Handles any number of "Prefix: names" / "Prefix: values" line pairs.
bbrx_stat()
{
	local name=$1 ns=$2
	local -a cmd=(cat /proc/net/bbrx_stat)

	[[ -n $ns ]] && cmd=(ip netns exec "$ns" cat /proc/net/bbrx_stat)
	"${cmd[@]}" 2>/dev/null | awk -v n="$name" '
		{ p = $1 }
		!(p in names) { names[p] = $0; next }
		{
			split(names[p], h)
			for (i = 2; i <= NF; i++)
				if (h[i] == n) { print $i; found = 1; exit }
			delete names[p]
		}
		END { exit !found }'
}

# bbrx_stat_all [NS]: the counters as "Name=value ..." for logs.
bbrx_stat_all()
{
	local ns=$1
	local -a cmd=(cat /proc/net/bbrx_stat)

	[[ -n $ns ]] && cmd=(ip netns exec "$ns" cat /proc/net/bbrx_stat)
	"${cmd[@]}" 2>/dev/null | awk '
		{ p = $1 }
		!(p in names) { names[p] = $0; next }
		{ split(names[p], h); s = ""
		  for (i = 2; i <= NF; i++) s = s h[i] "=" $i " "
		  print s; delete names[p] }'
}

bbrx_sysctl_set()
{
	local ns=$1 name=$2 val=$3

	ip netns exec "$ns" sysctl -qw "net.ipv4.bbrx.$name=$val"
}

bbrx_sysctl_get()
{
	local ns=$1 name=$2

	ip netns exec "$ns" sysctl -n "net.ipv4.bbrx.$name"
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
