#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Who may write net.ipv4.bbrx.* from a container, the cases of
# docs/usage.md, "Containers". Two checks stand between a writer and a
# knob:
#   - the kernel's, on the sysctl file (fs/proc/proc_sysctl.c,
#     net/sysctl_net.c): the files are 0644; a writer with CAP_NET_ADMIN
#     in the user namespace that owns the netns gets the owner's access,
#     and so does uid 0 of the host, whatever its capabilities; anyone
#     else gets EACCES;
#   - bbrx's, for the hook policies only (bbrx_proc_policy() in
#     module/sysctl.c): capable(CAP_NET_ADMIN), i.e. in the initial user
#     namespace, or EPERM with the value unchanged. A policy arms hooks
#     every netns shares (the delack kprobe traps for every socket of the
#     host), so a netns' own root must not set it.
# The test reads the knobs of the loaded module (/proc/sys/net/ipv4/bbrx)
# and sorts them with lib_module.sh's tables into policies and other knobs (a
# knob in neither fails), then writes each as:
#   host root   `nsenter -t PID -n sysctl -w`, into a "container" (a
#               process in its own user and network namespace, its root
#               mapped to host uid 100000 as a runtime's user-namespace
#               remapping does): every policy set (the delack kprobe
#               then armed, host-wide), later restored to 0 (disarmed)
#   container root (`nsenter -t PID -U -n`, as `docker exec` enters):
#               every policy write fails with EPERM, in both directions
#               (it can neither clear what the host set nor arm a hook),
#               the value unchanged, and a dmesg line says why; every
#               other knob is written and read back (then restored)
#   root of a user namespace in a netns that namespace does not own (the
#               test's own netns, owned by the initial user namespace):
#               mapped from host uid 0 (`unshare -U -r`), policies EPERM
#               and the other knobs writable (uid 0); mapped from 100000
#               (the container's user namespace), every write EACCES
#   host uid 0 without CAP_NET_ADMIN (setpriv drops it from the bounding
#               set): policies EPERM, other knobs writable
#   host uid 0 with CAP_NET_ADMIN only: every policy set and restored
#               (`ip netns exec NS sysctl -w`), the kprobe armed meanwhile
# It can fail: with ns_capable(net->user_ns, CAP_NET_ADMIN) in place of
# capable() the container's root would set policies; without the check
# every EPERM case would succeed (the kernel's file check lets uid 0
# through); with another capability (CAP_SYS_ADMIN) the last two cases
# would swap outcomes.

ALL_TESTS="
	ct_knobs_sorted
	ct_host_root_sets
	ct_container_root
	ct_userns_foreign_netns
	ct_no_net_admin
	ct_only_net_admin
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

SYSDIR=/proc/sys/net/ipv4/bbrx
ERRF=
HNS=bbrx-ct-$SFX
EXTRA_NETNS=$HNS
CT_PID=
CT_BASE=100000		# host uid and gid of the container's root
POLICIES=
KNOBS=
UNSORTED=
ARMED0=
declare -A PMAX KDEF KALT

# The body each identity runs: for each NAME VALUE pair after its first
# argument (a path in a directory any uid may write to, for the shell's
# error messages),
# write VALUE to $SYSDIR/NAME and print "NAME RESULT READ_BACK", RESULT
# ok, EPERM, EACCES or the error's text.  Builtins only: under TCG every
# process a test starts costs tens of milliseconds.
# shellcheck disable=SC2016  # expanded by the inner shell
CT_SCRIPT='
d=/proc/sys/net/ipv4/bbrx e=$1.$$
shift
while (($# >= 2)); do
	n=$1 v=$2 err= val=
	shift 2
	if printf "%s\n" "$v" 2>"$e" >"$d/$n"; then
		r=ok
	else
		read -r err <"$e"
		case $err in
		*"Operation not permitted"*) r=EPERM ;;
		*"Permission denied"*) r=EACCES ;;
		*) r=${err##*: } r=${r// /_} ;;
		esac
	fi
	read -r val <"$d/$n" 2>/dev/null
	echo "$n $r $val"
done'

# as_container_root ARGS...: CT_SCRIPT as the container's root, in its
# user and network namespace.
as_container_root()
{
	nsenter -t "$CT_PID" -U -n -- bash -c "$CT_SCRIPT" _ "$ERRF" "$@"
}

# as_userns_root_host0 ARGS...: root of a new user namespace mapped from
# host uid 0, in HNS (owned by the initial user namespace).
as_userns_root_host0()
{
	ip netns exec "$HNS" unshare -U -r -- bash -c "$CT_SCRIPT" _ "$ERRF" "$@"
}

# as_container_root_in_hns ARGS...: the container's root (user namespace
# of the container, host uid 100000) in HNS.
as_container_root_in_hns()
{
	ip netns exec "$HNS" nsenter -t "$CT_PID" -U -- bash -c "$CT_SCRIPT" _ "$ERRF" "$@"
}

# as_root_caps CAPS ARGS...: host uid 0 with the bounding set CAPS
# (setpriv's syntax), in HNS.
as_root_caps()
{
	local caps=$1

	shift
	ip netns exec "$HNS" setpriv --inh-caps=-all --bounding-set="$caps" -- \
		bash -c "$CT_SCRIPT" _ "$ERRF" "$@"
}

# pairs KIND VALUE...: "NAME VALUE" arguments for every knob of KIND
# (policies, knobs); VALUE max/alt/def/0/1 per knob.
pairs()
{
	local kind=$1 how=$2 list=$KNOBS n v

	[[ $kind == policies ]] && list=$POLICIES
	for n in $list; do
		case $how in
		max) v=${PMAX[$n]} ;;
		alt) v=${KALT[$n]} ;;
		def) v=${KDEF[$n]} ;;
		*) v=$how ;;
		esac
		printf '%s %s ' "$n" "$v"
	done
}

# expect OUT RESULT [VALUE]: the names of OUT's lines whose result is not
# RESULT or, when VALUE is given (a number, or max/alt/def), whose value
# read back is not VALUE.
expect()
{
	local out=$1 res=$2 val=${3:-} n r v want bad=

	while read -r n r v; do
		[[ -z $n ]] && continue
		case $val in
		'') want=$v ;;
		max) want=${PMAX[$n]} ;;
		alt) want=${KALT[$n]} ;;
		def) want=${KDEF[$n]} ;;
		*) want=$val ;;
		esac
		[[ $r == "$res" && $v == "$want" ]] || bad+=" $n:$r:$v"
	done <<<"$out"
	echo "$bad"
}

# delack_armed: the armed= field of the delack hook's status line.
delack_armed()
{
	local h rest

	while read -r h rest; do
		[[ $h == delack && $rest =~ armed=[01] ]] && echo "${BASH_REMATCH[0]}"
	done </proc/net/bbrx_hooks
}

# check_armed WANT WHEN: the delack kprobe's armed= is WANT, when nothing
# else on the host held it before the test (ARMED0).
check_armed()
{
	local a

	[[ $ARMED0 == armed=0 ]] || return 0
	a=$(delack_armed)
	[[ $a == "$1" ]]
	check_err $? "delack kprobe $a $2 (expected $1)"
}

# assignments HOW: "net.ipv4.bbrx.NAME=VALUE" for every policy, VALUE its
# max or HOW.
assignments()
{
	local n v=$1

	for n in $POLICIES; do
		[[ $1 == max ]] && v=${PMAX[$n]}
		printf 'net.ipv4.bbrx.%s=%s ' "$n" "$v"
	done
}

# host_set_policies HOW: host root sets every policy in the container's
# netns with the documented command; prints its errors.
host_set_policies()
{
	# shellcheck disable=SC2046,SC2069  # the assignments; stderr only
	nsenter -t "$CT_PID" -n sysctl -qw $(assignments "$1") 2>&1 >/dev/null
}

# read_policies CMD...: "NAME ok VALUE" of every policy, read by CMD (a
# prefix that enters a namespace) in one shell.
read_policies()
{
	# shellcheck disable=SC2016,SC2086  # the inner shell's; a list
	"$@" bash -c 'for n in "${@:2}"; do read -r v <"$1/$n"; echo "$n ok $v"; done' _ "$SYSDIR" $POLICIES
}

# only KIND OUT: the lines of OUT about KIND (policies, knobs).
only()
{
	local list=" $KNOBS " line

	[[ $1 == policies ]] && list=" $POLICIES "
	while read -r line; do
		[[ $list == *" ${line%% *} "* ]] && echo "$line"
	done <<<"$2"
}

# ct_knobs_sorted: every knob of the module is a policy or a knob of
# lib_module.sh's tables, and there are some of each (the cases check nothing
# without them); the container is up.
ct_knobs_sorted()
{
	[[ -z $UNSORTED ]]
	check_err $? "knobs of tcp_bbrx in neither BBRX_POLICY_TABLE nor BBRX_SYSCTL_TABLE (lib_module.sh):$UNSORTED"
	[[ -n $POLICIES && -n $KNOBS ]]
	check_err $? "policies '$POLICIES', knobs '$KNOBS' in $SYSDIR"
	[[ -n $CT_READY ]]
	check_err $? "container: could not write the user namespace's maps of process $CT_PID"
	log_test "the module's knobs: $(wc -w <<<"$POLICIES") policies, $(wc -w <<<"$KNOBS") other knobs; container up" \
		"policies: $POLICIES; container: $CT_READY"
}

# ct_host_root_sets: host root sets every policy in the container's netns
# (nsenter -n), which arms the delack kprobe for the host.
ct_host_root_sets()
{
	local bad out

	bad=$(host_set_policies max)
	check_err $? "host root: nsenter -t PID -n sysctl -w failed: $bad"
	out=$(read_policies nsenter -t "$CT_PID" -n)
	bad=$(expect "$out" ok max)
	[[ -z $bad ]]
	check_err $? "host root: policies not set (name:result:value):$bad"
	check_armed armed=1 "after host root set delack in the container's netns"
	log_test "host root sets every policy in a container's netns (nsenter -n), delack armed host-wide" \
		"$(awk '{ printf "%s%s=%s", s, $1, $3; s = " " }' <<<"$out")"
}

# ct_container_root: in its own netns the container's root gets EPERM on
# every policy write, either way, and writes the other knobs.
ct_container_root()
{
	local out bad n since

	since=$(dmesg 2>/dev/null | wc -l)
	# It cannot clear what the host set...
	# shellcheck disable=SC2046  # NAME VALUE pairs
	out=$(as_container_root $(pairs policies 0) 2>&1)
	log_info "container root, policies set by the host, writes 0: $(paste -sd ';' <<<"$out")"
	bad=$(expect "$out" EPERM max)
	[[ -z $bad ]]
	check_err $? "container root clearing policies: not EPERM with the value kept (name:result:value):$bad"
	# ...the host restores the defaults, the kprobe is disarmed...
	bad=$(host_set_policies 0)
	check_err $? "host root: restoring 0 failed: $bad"
	check_armed armed=0 "after host root restored the policies"
	# ...and it cannot arm a hook.
	# shellcheck disable=SC2046
	out=$(as_container_root $(pairs policies 1) 2>&1)
	log_info "container root, policies 0, writes 1: $(paste -sd ';' <<<"$out")"
	bad=$(expect "$out" EPERM 0)
	[[ -z $bad ]]
	check_err $? "container root arming policies: not EPERM with the value 0 (name:result:value):$bad"
	check_armed armed=0 "after the container root's writes"
	n=$(dmesg 2>/dev/null | tail -n +"$((since + 1))" |
		grep -c 'writing a hook policy needs CAP_NET_ADMIN in the initial user namespace')
	[[ $n -ge 1 ]]
	check_err $? "no dmesg line says why the policy writes failed"
	# The other knobs are its netns' own.
	# shellcheck disable=SC2046
	out=$(as_container_root $(pairs knobs alt) 2>&1)
	bad=$(expect "$out" ok alt)
	# shellcheck disable=SC2046
	bad+=$(expect "$(as_container_root $(pairs knobs def) 2>&1)" ok def)
	[[ -z $bad ]]
	check_err $? "container root: knobs not written and read back (name:result:value):$bad"
	log_test "container root (own user and net namespace): EPERM on every policy write, value kept; other knobs written" \
		"dmesg lines: $n"
}

# ct_userns_foreign_netns: a user namespace's root in a netns that it
# does not own: mapped from host uid 0, the file check passes and bbrx's
# refuses the policies; mapped from another uid, the file check refuses
# every write.
ct_userns_foreign_netns()
{
	local out bad

	# shellcheck disable=SC2046
	out=$(as_userns_root_host0 $(pairs policies 1) $(pairs knobs alt) 2>&1)
	log_info "unshare -U -r (host uid 0) in a netns of the initial user namespace: $(paste -sd ';' <<<"$out")"
	bad=$(expect "$(only policies "$out")" EPERM 0)
	[[ -z $bad ]]
	check_err $? "user namespace root (host uid 0): policies not EPERM with the value 0 (name:result:value):$bad"
	bad=$(expect "$(only knobs "$out")" ok alt)
	[[ -z $bad ]]
	check_err $? "user namespace root (host uid 0): knobs not written (name:result:value):$bad"
	# shellcheck disable=SC2046
	ip netns exec "$HNS" bash -c "$CT_SCRIPT" _ "$ERRF" $(pairs knobs def) >/dev/null
	# shellcheck disable=SC2046
	out=$(as_container_root_in_hns $(pairs policies 1) $(pairs knobs alt) 2>&1)
	log_info "the container's user namespace (host uid $CT_BASE) in that netns: $(paste -sd ';' <<<"$out")"
	bad=$(expect "$(only policies "$out")" EACCES 0)
	bad+=$(expect "$(only knobs "$out")" EACCES def)
	[[ -z $bad ]]
	check_err $? "user namespace root (host uid $CT_BASE): writes not EACCES with the value kept (name:result:value):$bad"
	check_armed armed=0 "after the user namespaces' writes"
	log_test "a user namespace's root in a netns it does not own: policies EPERM (host uid 0) or EACCES (host uid $CT_BASE)"
}

# ct_no_net_admin: host uid 0 without CAP_NET_ADMIN: policies EPERM, the
# other knobs written (the file check lets uid 0 through).
ct_no_net_admin()
{
	local out bad

	# shellcheck disable=SC2046
	out=$(as_root_caps -net_admin $(pairs policies 1) $(pairs knobs alt) 2>&1)
	log_info "uid 0 without CAP_NET_ADMIN: $(paste -sd ';' <<<"$out")"
	bad=$(expect "$(only policies "$out")" EPERM 0)
	[[ -z $bad ]]
	check_err $? "policies not EPERM with the value 0 (name:result:value):$bad"
	bad=$(expect "$(only knobs "$out")" ok alt)
	[[ -z $bad ]]
	check_err $? "knobs not written (name:result:value):$bad"
	# shellcheck disable=SC2046
	ip netns exec "$HNS" bash -c "$CT_SCRIPT" _ "$ERRF" $(pairs knobs def) >/dev/null
	check_armed armed=0 "after the writes without CAP_NET_ADMIN"
	log_test "host uid 0 without CAP_NET_ADMIN: EPERM on every policy write; other knobs written"
}

# ct_only_net_admin: host uid 0 with CAP_NET_ADMIN alone sets every policy
# (the kprobe armed) and restores it, with `ip netns exec NS sysctl -w`.
ct_only_net_admin()
{
	local how out bad armed

	for how in max 0; do
		# shellcheck disable=SC2046  # the assignments
		out=$(ip netns exec "$HNS" setpriv --inh-caps=-all --bounding-set=-all,+net_admin -- \
			sysctl -qw $(assignments "$how") 2>&1)
		check_err $? "sysctl -w with CAP_NET_ADMIN only (policies $how): $out"
		bad=$(expect "$(read_policies ip netns exec "$HNS")" ok "$how")
		[[ -z $bad ]]
		check_err $? "policies not $how after sysctl -w with CAP_NET_ADMIN only:$bad"
		[[ $how == max ]] || continue
		armed=$(delack_armed)
		check_armed armed=1 "with delack set by a process holding CAP_NET_ADMIN only"
	done
	check_armed armed=0 "after the restore"
	log_test "host uid 0 with CAP_NET_ADMIN only: every policy set (delack $armed) and restored"
}

# container_start: a process in its own user and network namespace, the
# user namespace mapped as a runtime maps it (its root is host uid
# CT_BASE). Sets CT_PID, and CT_READY (what ct_knobs_sorted prints; empty
# if the maps could not be written).
container_start()
{
	local i self

	self=$(readlink /proc/self/ns/user)
	unshare --user --net -- sleep 600 &
	CT_PID=$!
	bg_track "$CT_PID"
	for ((i = 0; i < 50; i++)); do
		[[ $(readlink "/proc/$CT_PID/ns/user" 2>/dev/null) != "$self" ]] && break
		sleep 0.1
	done
	if ! { echo "0 $CT_BASE 65536" >"/proc/$CT_PID/uid_map" &&
	       echo "0 $CT_BASE 65536" >"/proc/$CT_PID/gid_map"; } 2>/dev/null; then
		CT_READY=
		return 1
	fi
	CT_READY="pid $CT_PID, root = host uid $(awk '$1 == 0 { print $2 }' "/proc/$CT_PID/uid_map")"
}

require_command unshare nsenter setpriv sysctl ip
require_bbrx
all_hooks_read
# shellcheck disable=SC2086  # a list of hook names
require_hooks $ALL_HOOKS
ip netns add "$HNS" || { echo "# ip netns add $HNS failed"; exit 1; }
# where every identity's shell writes its error messages (CT_SCRIPT)
mkdir -m 1777 "$TMPD/ct" && ERRF=$TMPD/ct/err && chmod 711 "$TMPD"

declare -A TMAX TDEF TMIN
while read -r n def min max; do
	TDEF[$n]=$def TMIN[$n]=$min TMAX[$n]=$max
done <<<"$BBRX_POLICY_TABLE
$BBRX_SYSCTL_TABLE"
for n in $(ip netns exec "$HNS" ls "$SYSDIR"); do
	if [[ $'\n'$BBRX_POLICY_TABLE == *$'\n'"$n "* ]]; then
		POLICIES+="${POLICIES:+ }$n"
		PMAX[$n]=${TMAX[$n]}
	elif [[ $'\n'$BBRX_SYSCTL_TABLE == *$'\n'"$n "* ]]; then
		KNOBS+="${KNOBS:+ }$n"
		KDEF[$n]=${TDEF[$n]}
		KALT[$n]=${TMIN[$n]}
		[[ ${TMIN[$n]} == "${TDEF[$n]}" ]] && KALT[$n]=${TMAX[$n]}
	else
		UNSORTED+=" $n"
	fi
done
ARMED0=$(delack_armed)
[[ $ARMED0 == armed=0 ]] ||
	log_info "the delack kprobe is $ARMED0 before the test (another netns sets delack): its armed= is not checked"
container_start

tests_run
# shellcheck disable=SC2046  # the assignments
ip netns exec "$HNS" sysctl -qw $(assignments 0)
[[ -n $CT_PID ]] && host_set_policies 0 >/dev/null
tests_done
exit $EXIT_STATUS
