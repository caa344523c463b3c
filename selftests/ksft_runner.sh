#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Minimal kselftest runner: runs each test given on the command line, prints
# TAP 13 (the test's own output indented as "# " diagnostics), treats exit 4
# as skip and a timeout (from ./settings, or KSFT_TIMEOUT) as failure, and ends with the line
# "N passed, N failed[, N skipped]".  Exits 1 if any test failed.

cd "$(dirname "$0")" || exit 1

ksft_skip=4
timeout=45
if [[ -r settings ]]; then
	while IFS='=' read -r key val; do
		[[ $key == timeout ]] && timeout=$val
	done < <(grep -v '^#' settings)
fi
# make check-debug: a debug kernel under TCG needs more than ./settings.
[[ ${KSFT_TIMEOUT:-} =~ ^[1-9][0-9]*$ ]] && timeout=$KSFT_TIMEOUT

tests=("$@")
[[ ${#tests[@]} -gt 0 ]] || { echo "usage: $0 TEST..." >&2; exit 2; }

pass=0 fail=0 skip=0 n=0
echo "TAP version 13"
echo "1..${#tests[@]}"
for t in "${tests[@]}"; do
	n=$((n + 1))
	echo "# selftests: bbrx: $t"
	start=$SECONDS
	if [[ ! -e $t ]]; then
		echo "# Warning: file $t is missing!"
		rc=1
	else
		if command -v timeout >/dev/null; then
			timeout --foreground -k 10 "$timeout" bash "./$t" 2>&1 | sed -u 's/^/# /'
			rc=${PIPESTATUS[0]}
		else
			bash "./$t" 2>&1 | sed -u 's/^/# /'
			rc=${PIPESTATUS[0]}
		fi
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
		echo "not ok $n selftests: bbrx: $t # TIMEOUT ${timeout} seconds"
	else
		fail=$((fail + 1))
		echo "not ok $n selftests: bbrx: $t # exit=$rc"
	fi
done

summary="$pass passed, $fail failed"
[[ $skip -gt 0 ]] && summary+=", $skip skipped"
echo "$summary"
# make check sets KSFT_FAIL_ON_SKIP=1: in the VM nothing may be skipped.
[[ $fail -eq 0 ]] && [[ ${KSFT_FAIL_ON_SKIP:-0} -eq 0 || $skip -eq 0 ]]
