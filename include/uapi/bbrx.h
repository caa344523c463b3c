/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * bbrx: names the module registers and the encodings of its policy knobs,
 * for user-space tools written in C. The selftests are shell scripts and
 * helpers that take these names as arguments; they do not include it.
 *
 * The congestion control is selected by name (setsockopt TCP_CONGESTION,
 * net.ipv4.tcp_congestion_control, ip route ... congctl); the module file is
 * tcp_<name>.ko so the kernel's request_module("tcp_%s") finds it.
 */
#ifndef _UAPI_BBRX_H
#define _UAPI_BBRX_H

#define BBRX_CA_NAME		"bbrx"
#define BBRX3_CA_NAME		"bbrx3"
#define BBRX_SYSCTL_DIR		"/proc/sys/net/ipv4/bbrx"
#define BBRX_STAT_FILE		"/proc/net/bbrx_stat"
#define BBRX_STAT_PREFIX	"Bbrx:"

/* Encoding shared by every hook policy sysctl (docs/usage.md). */
enum bbrx_policy {
	BBRX_POLICY_KERNEL = 0,	/* bbrx does not act */
	BBRX_POLICY_POST = 1,	/* behaviour after the upstream change */
	BBRX_POLICY_PRE = 2,	/* behaviour before the upstream change */
	BBRX_AUTOCORK_NEVER = 3,	/* autocork only: never cork */
};

/* net.ipv4.bbrx.scope */
enum bbrx_scope {
	BBRX_SCOPE_BBRX = 0,	/* hooks act on bbrx sockets only */
	BBRX_SCOPE_ALL = 1,	/* hooks act on every TCP socket of the netns */
};

#endif /* _UAPI_BBRX_H */
