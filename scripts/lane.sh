#!/bin/bash
# lane.sh - run selftests on another pinned kernel build.
#
# Usage: scripts/lane.sh NAME TEST...
#        scripts/lane.sh NAME --all     the whole suite (make run_tests),
#                                       but the tests in $LANE_SKIP
#
# Builds tcp_bbrx.ko and the selftests' test modules (kern_sock/, klp_tcp_push/) against
# the headers of kernel build NAME (scripts/kernels.conf, e.g. cloud-6.12)
# in a staged copy under .cache/lane-NAME (W=1: any warning fails), boots
# that kernel in the VM and runs the given selftests there with the
# kselftest runner. The selftests' user-space helpers come from the tree
# (make vm-build builds them; they do not depend on the kernel).
set -euo pipefail

REPO=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
[[ $# -ge 2 ]] || { sed -n 's/^# \{0,1\}//; 2,/^$/p' "${BASH_SOURCE[0]}" >&2; exit 2; }
name=$1; shift
rel=$("$REPO/scripts/vm-kver" "$name")
kdir=/usr/src/linux-headers-$rel
stage=$REPO/.cache/lane-$name

rm -rf "$stage"
mkdir -p "$stage"
cp -r "$REPO/Kbuild" "$REPO/module" "$REPO/include" "$REPO/selftests" "$stage/"
# objects the tree built for the default kernel
find "$stage" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
	-o -name '.*.cmd' -o -name Module.symvers -o -name modules.order \) -delete
for m in "$stage" "$stage/selftests/kern_sock" "$stage/selftests/klp_tcp_push"; do
	make -C "$kdir" M="$m" W=1 modules 2>&1 | tee "$m/build.log"
	if grep -E 'warning:|error:' "$m/build.log"; then
		echo "lane.sh: warnings building $m against $rel" >&2
		exit 1
	fi
done
echo "lane.sh: $name ($rel): ${*}"
run="./ksft_runner.sh $*"
# LANE_SKIP: tests the whole-suite run leaves out (top Makefile says why).
[[ $* == --all ]] && run="make run_tests SKIP_TESTS='${LANE_SKIP:-}'"
VM_KVER=$rel "$REPO/scripts/vm-run" --ko "$stage/tcp_bbrx.ko" \
	--dir "$stage/selftests" -- "KSFT_FAIL_ON_SKIP=1 $run"
