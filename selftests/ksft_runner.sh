#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Minimal kselftest runner: runs each test given on the command line, prints
# TAP 13 (the test's own output indented as "# " diagnostics), treats exit 4
# as skip and a timeout (from ./settings, or KSFT_TIMEOUT) as failure, prints
# each test's seconds, and ends with the line
# "N passed, N failed[, N skipped]".  Exits 1 if any test failed.
#
# Usage: ksft_runner.sh TEST...
#        ksft_runner.sh --plan FILE   one test a line: "TEST [VAR=VALUE ...]";
#                                     the assignments (bash syntax) apply to
#                                     that test only, KSFT_TIMEOUT among them
#
# With $VM_OUT set (scripts/vm/vm-run), each test's output is also kept in
# $VM_OUT/logs/TEST.log and the kernel log in $VM_OUT/logs/dmesg.txt.

cd "$(dirname "$0")" || exit 1

ksft_skip=4
timeout=45
if [[ -r settings ]]; then
	while IFS='=' read -r key val; do
		[[ $key == timeout ]] && timeout=$val
	done < <(grep -v '^#' settings)
fi

names=() envs=()
if [[ ${1:-} == --plan ]]; then
	[[ -r ${2:-} ]] || { echo "usage: $0 --plan FILE" >&2; exit 2; }
	while read -r t e; do
		[[ -z $t || $t == '#'* ]] && continue
		names+=("$t")
		envs+=("$e")
	done <"$2"
else
	for t in "$@"; do
		names+=("$t")
		envs+=("")
	done
fi
[[ ${#names[@]} -gt 0 ]] || { echo "usage: $0 TEST... | --plan FILE" >&2; exit 2; }

logdir=
if [[ -n ${VM_OUT:-} ]]; then
	logdir=$VM_OUT/logs
	mkdir -p "$logdir"
fi

# run_one TEST ENV: the test in a subshell with ENV's assignments exported;
# prints its output indented and returns its exit status.
run_one()
{
	local t=$1 e=$2 log=/dev/null

	[[ -n $logdir ]] && log=$logdir/${t%.sh}.log
	(
		[[ -n $e ]] && eval "export $e"
		local to=$timeout
		# make check-debug and lanes.conf: a test's own timeout.
		[[ ${KSFT_TIMEOUT:-} =~ ^[1-9][0-9]*$ ]] && to=$KSFT_TIMEOUT
		if command -v timeout >/dev/null; then
			timeout --foreground -k 10 "$to" bash "./$t" 2>&1
		else
			bash "./$t" 2>&1
		fi
	) | tee "$log" | sed -u 's/^/# /'
	return "${PIPESTATUS[0]}"
}

pass=0 fail=0 skip=0 n=0 failed=()
echo "TAP version 13"
echo "1..${#names[@]}"
for i in "${!names[@]}"; do
	t=${names[$i]}
	n=$((n + 1))
	echo "# selftests: bbrx: $t"
	start=$SECONDS
	if [[ ! -e $t ]]; then
		echo "# Warning: file $t is missing!"
		rc=1
	else
		[[ -n ${envs[$i]} ]] && echo "# environment: ${envs[$i]}"
		run_one "$t" "${envs[$i]}"
		rc=$?
	fi
	dur=$((SECONDS - start))
	echo "# $t: exit $rc after ${dur}s"
	if [[ $rc -eq 0 ]]; then
		pass=$((pass + 1))
		echo "ok $n selftests: bbrx: $t"
	elif [[ $rc -eq $ksft_skip ]]; then
		skip=$((skip + 1))
		echo "ok $n selftests: bbrx: $t # SKIP"
	elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
		fail=$((fail + 1))
		failed+=("$t")
		echo "not ok $n selftests: bbrx: $t # TIMEOUT"
	else
		fail=$((fail + 1))
		failed+=("$t")
		echo "not ok $n selftests: bbrx: $t # exit=$rc"
	fi
done

[[ -n $logdir ]] && dmesg >"$logdir/dmesg.txt" 2>/dev/null
[[ ${#failed[@]} -gt 0 ]] && echo "# failed: ${failed[*]}"
summary="$pass passed, $fail failed"
[[ $skip -gt 0 ]] && summary+=", $skip skipped"
echo "$summary"
# make check sets KSFT_FAIL_ON_SKIP=1: in the VM nothing may be skipped.
[[ $fail -eq 0 ]] && [[ ${KSFT_FAIL_ON_SKIP:-0} -eq 0 || $skip -eq 0 ]]
