#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Counters of a netns outlived by one of its kernel sockets.
#
# Kernel sockets (kern=1: SUNRPC, CIFS, iSCSI) hold no netns reference and
# are closed by their owner's pernet .exit, which runs after bbrx's when the
# owner registered first. The helper module kern_sock/bbrx_kern_sock.ko
# (loaded before tcp_bbrx) holds such a pair over loopback with bbrx as the
# client's congestion control; when the netns is deleted, its .exit runs
# after bbrx's, keeps sending and switches the client to reno and back to
# bbrx, so that bbrx's .init counts an event on a netns whose counters
# bbrx already retired. Until 2026-12 bbrx freed the per-cpu counters in
# .exit and such events wrote into freed per-cpu memory (KASAN cannot see
# that); now bbrx drops them and says how many at unload.
#
# Asserts: the pair runs bbrx, bbrx's .init ran again after bbrx's exit in
# the dying netns (the helper's report), bbrx reports the dropped events
# (at least 1) when unloaded, the netns is gone, and the kernel log stays
# clean (no Oops, WARN or BUG).

ALL_TESTS="
	kern_sock_open
	kern_sock_netns_exit
	kern_sock_events_dropped
"
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_hooks.sh"

KO=$BIN_DIR/kern_sock/bbrx_kern_sock.ko
NS=bbrx-ks-$$
OPEN_RC=1
EXIT_LINE=
UNLOAD_LINE=

kern_sock_cleanup()
{
	ip netns del "$NS" 2>/dev/null
	rmmod bbrx_kern_sock 2>/dev/null
}

kern_sock_open()
{
	check_err "$OPEN_RC" "opening the kernel socket pair in $NS failed"
	grep -q 'bbrx_kern_sock: opened .*congestion control bbrx' "$TMPD/dmesg.open"
	check_err $? "the helper did not report a bbrx pair"
	[[ ${OPEN_INIT:-0} -ge 1 ]]
	check_err $? "SocketsInit of $NS was ${OPEN_INIT:-unreadable}, expected >= 1"
	log_test "a kern=1 TCP pair in a netns runs bbrx"
}

kern_sock_netns_exit()
{
	check_err "$((EXIT_LINE == 0))" "no 'netns exit' report from the helper within 60 s"
	[[ $EXIT_LINE_TEXT == *"back to bbrx 0 (now bbrx)"* ]]
	check_err $? "bbrx was not re-initialised in the dying netns: $EXIT_LINE_TEXT"
	log_test "bbrx .init runs on a socket of a netns after bbrx's pernet exit" \
		"${EXIT_LINE_TEXT#*netns exit: }"
}

kern_sock_events_dropped()
{
	local n

	n=$(sed -n 's/.*bbrx: unloaded (\([0-9]*\) counter events of exiting netns dropped).*/\1/p' \
		<<<"$UNLOAD_LINE")
	[[ -n $n && $n -ge 1 ]]
	check_err $? "unload reported '${UNLOAD_LINE:-nothing}', expected >= 1 dropped event"
	log_test "events after the netns' counters are gone are dropped, not written" \
		"${n:-?} dropped"
}

require_root
require_command ip modprobe rmmod insmod
[[ -r $KO ]] || ksft_exit_skip "$KO not built (make vm-build builds it)"
bbrx_unload || { echo "# tcp_bbrx is in use; cannot start"; exit 1; }
rmmod bbrx_kern_sock 2>/dev/null
trap 'kern_sock_cleanup; cleanup' EXIT

# The helper first: its pernet .exit then runs after bbrx's.
insmod "$KO" || exit 1
bbrx_module_load || exit 1
ip netns add "$NS" || exit 1
ip -n "$NS" link set lo up
mark=$(dmesg | wc -l)
ip netns exec "$NS" sh -c 'echo 1 > /sys/module/bbrx_kern_sock/parameters/open'
OPEN_RC=$?
OPEN_INIT=$(bbrx_stat SocketsInit "$NS")
dmesg | tail -n +$((mark + 1)) >"$TMPD/dmesg.open"

ip netns del "$NS"
EXIT_LINE=0
for ((i = 0; i < 300; i++)); do
	EXIT_LINE_TEXT=$(dmesg | tail -n +$((mark + 1)) | grep 'bbrx_kern_sock: netns exit:' | tail -n 1)
	[[ -n $EXIT_LINE_TEXT ]] && { EXIT_LINE=1; break; }
	sleep 0.2
done
log_info "${EXIT_LINE_TEXT:-no exit report}"
bbrx_unload
UNLOAD_LINE=$(dmesg | tail -n +$((mark + 1)) | grep 'bbrx: unloaded' | tail -n 1)
log_info "${UNLOAD_LINE:-no unload line}"
rmmod bbrx_kern_sock

tests_run
bbrx_module_load
tests_done
exit $EXIT_STATUS
