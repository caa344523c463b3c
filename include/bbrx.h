/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bbrx internal interfaces: per-netns settings, per-netns counters and the
 * congestion control registration, shared by the files in module/.
 */
#ifndef _BBRX_H
#define _BBRX_H

#include <linux/types.h>
#include <linux/percpu.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>

#include "uapi/bbrx.h"

/* Also PACKAGE_VERSION in dkms.conf; the Makefile checks they agree. */
#define BBRX_VERSION "0.1.0"

/* Counters of /proc/net/bbrx_stat, in file order (names in stats.c). */
enum bbrx_stat_item {
	BBRX_STAT_SOCKETS_INIT,		/* sockets that chose bbrx */
	BBRX_STAT_STARTUP_EXIT,		/* STARTUP found full bw */
	BBRX_STAT_DRAIN_EXIT,		/* DRAIN reached the BDP */
	BBRX_STAT_PROBE_RTT_ENTER,	/* min_rtt expired */
	BBRX_STAT_RECOVERY_ENTER,	/* fast recovery entered */
	BBRX_STAT_LOSS_ENTER,		/* RTO loss state entered */
	BBRX_STAT_UNDO,			/* spurious loss episode undone */
	BBRX_STAT_APP_LIMITED,		/* app-limited bw samples */
	BBRX_STAT_MAX
};

struct bbrx_mib {
	unsigned long mibs[BBRX_STAT_MAX];
};

/*
 * Per-netns settings, written through net.ipv4.bbrx.* (module/sysctl.c has
 * the units, ranges and defaults). Readers on the fast path use READ_ONCE().
 */
struct bbrx_net {
	int scope;
	int high_gain;
	int drain_gain;
	int cwnd_gain;
	int probe_bw_up_gain;
	int probe_bw_down_gain;
	int extra_acked_gain;
	int min_rtt_win_ms;
	int probe_rtt_ms;
	int tso_margin;
	int gso_cap;
	int pacing_shift;

	struct bbrx_mib __percpu *mib;
	struct ctl_table_header *sysctl_hdr;
	struct ctl_table *sysctl_table;
};

extern unsigned int bbrx_net_id;

static inline struct bbrx_net *bbrx_pernet(const struct net *net)
{
	return net_generic(net, bbrx_net_id);
}

static inline void bbrx_stat_inc(struct bbrx_net *bn, enum bbrx_stat_item item)
{
	this_cpu_inc(bn->mib->mibs[item]);
}

/* sysctl.c */
void bbrx_sysctl_defaults(struct bbrx_net *bn);
int bbrx_sysctl_net_init(struct net *net, struct bbrx_net *bn);
void bbrx_sysctl_net_exit(struct bbrx_net *bn);

/* stats.c */
int bbrx_stats_net_init(struct net *net, struct bbrx_net *bn);
void bbrx_stats_net_exit(struct net *net, struct bbrx_net *bn);

/* bbr.c */
int bbrx_cc_register(void);
void bbrx_cc_unregister(void);

#endif /* _BBRX_H */
