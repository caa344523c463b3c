#!/bin/bash
# tcg-stress.sh - check that the emulator survives the guest kernel patching
# its own text under load (docs/testing.md, "Known problems of the VM"). Runs
# in the VM, no module:
#
#   scripts/vm/vm-run --ko '' --dir scripts/guest --timeout 400 -- \
#           ./tcg-stress.sh [SECS]
#
# Both vCPUs carry 4 TCP flows over a veth pair while the shell toggles the
# sched_schedstats static key (jump labels on hot scheduler paths) as fast as
# it can. Exit 0 with the toggle count after SECS (default 150); a QEMU that
# keeps stale translations of patched code hangs instead (vm-run: exit 124).
set -u
secs=${1:-150}
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [SECS]" >&2; exit 2; }
key=/proc/sys/kernel/sched_schedstats
[[ -w $key ]] || { echo "tcg-stress: $key not writable" >&2; exit 4; }

ip netns add ts-a && ip netns add ts-b || exit 1
trap 'pkill iperf3; ip netns del ts-a; ip netns del ts-b' EXIT
ip link add va netns ts-a type veth peer name vb netns ts-b
ip -n ts-a addr add 10.99.0.1/24 dev va
ip -n ts-b addr add 10.99.0.2/24 dev vb
for ns in ts-a ts-b; do
	ip -n $ns link set lo up
	ip -n $ns link set "$( [[ $ns == ts-a ]] && echo va || echo vb)" up
done
ip netns exec ts-b iperf3 -s -D -1 || exit 1
sleep 1
ip netns exec ts-a iperf3 -c 10.99.0.2 -t "$secs" -P 4 -l 8K >/dev/null 2>&1 &

end=$((SECONDS + secs)) n=0
while ((SECONDS < end)); do
	echo 1 >$key
	echo 0 >$key
	((++n % 500)) || echo "tcg-stress: $n toggles after $SECONDS s"
done
wait
echo "tcg-stress: done, $n static-key toggles in $secs s under 4 flows"
