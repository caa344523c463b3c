#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Numbers for the bbrx selftests, sourced by lib.sh: medians, repetitions
# that alternate the modes, the spread and margin of measured ratios,
# floating point arithmetic and comparison.

# median of the arguments, or of stdin (one number per line) if none.
median()
{
	if [[ $# -gt 0 ]]; then
		printf '%s\n' "$@"
	else
		cat
	fi | grep -E '^-?[0-9.]+(e[-+]?[0-9]+)?$' | sort -g |
		awk '{ v[NR] = $1 }
		     END { if (NR == 0) { print "nan"; exit 1 }
			   if (NR % 2) printf "%g\n", v[(NR + 1) / 2]
			   else printf "%g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# col_median N FILE: median of column N of a whitespace-separated file.
col_median()
{
	awk -v n="$1" '{ print $n }' "$2" | median
}

# mode (most frequent value) of stdin; ties go to the smaller value.
mode()
{
	grep -E '^-?[0-9.]+$' | sort -g | uniq -c |
		awk '$1 > best { best = $1; v = $2 } END { if (!NR) exit 1; print v }'
}

# reps_more FN [ARG...]: REPS more runs of each mode of MODES, the modes
# alternating within a repetition: FN ARG... MODE REP for REP = NREP + 1
# .. NREP + REPS, then NREP grows by REPS. The script sets NREP=0 first.
reps_more()
{
	local rep m last=$((NREP + REPS))

	for ((rep = NREP + 1; rep <= last; rep++)); do
		for m in $MODES; do
			"$@" "$m" "$rep"
		done
	done
	NREP=$last
}

# reps_median ARRAY KEY: the median of ARRAY[KEY-1] .. ARRAY[KEY-NREP].
reps_median()
{
	local -n arr=$1
	local rep

	for ((rep = 1; rep <= NREP; rep++)); do echo "${arr[$2-$rep]}"; done | median
}

# half_range: the numbers on stdin -> half their range over their median
# (0.02: they lie within +-2% of it); 0 for fewer than two.
half_range()
{
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR < 2) { print 0; exit }
		med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print (med > 0 ? (v[NR] - v[1]) / 2 / med : 0) }'
}

# noise_margin SPREAD...: the margin of a "not below" goodput ratio: 3%, or
# the widest SPREAD (half_range of one mode's runs) up to 10% where the host
# made the runs spread more. An idle host's runs agree within ~1% and keep
# 3%; a busy CI host's spread +-9.5% (docs/results/2026-12-07-ci-noise.md),
# where 3% judged noise.
noise_margin()
{
	printf '%s\n' "$@" | awk '$1 > m { m = $1 }
		END { if (m < 0.03) m = 0.03; if (m > 0.10) m = 0.10; printf "%.3f\n", m }'
}

# calc EXPR: floating point arithmetic with awk.
calc()
{
	awk "BEGIN { printf \"%.4g\n\", $* }"
}

# fcmp A OP B: floating point comparison (returns 0 if true).
fcmp()
{
	awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"
}

# in_range V LO HI
in_range()
{
	fcmp "$1" '>=' "$2" && fcmp "$1" '<=' "$3"
}

bdp_bytes()
{
	local rate_mbit=$1 rtt_ms=$2

	awk -v r="$rate_mbit" -v t="$rtt_ms" 'BEGIN { printf "%d\n", r * 1e6 / 8 * t / 1000 }'
}
