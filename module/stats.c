// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx per-netns counters: /proc/net/bbrx_stat.
 *
 * A module cannot add fields to /proc/net/netstat, so the counters get their
 * own file in the same two-line "Prefix: names" / "Prefix: values" format,
 * which awk one-liners parse, and iproute2's nstat too when
 * PROC_NET_NETSTAT names this file instead of /proc/net/netstat
 * (docs/usage.md; selftests/bbrx_load.sh checks it). Counters are
 * per-cpu (incremented from the ACK path without locks) and summed on read.
 */
#include <linux/atomic.h>
#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/rcupdate.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <net/net_namespace.h>

#include "bbrx.h"

static const char * const bbrx_stat_names[BBRX_STAT_MAX] = {
	[BBRX_STAT_SOCKETS_INIT]	= "SocketsInit",
	[BBRX_STAT_STARTUP_EXIT]	= "StartupExit",
	[BBRX_STAT_DRAIN_EXIT]		= "DrainExit",
	[BBRX_STAT_PROBE_RTT_ENTER]	= "ProbeRttEnter",
	[BBRX_STAT_RECOVERY_ENTER]	= "RecoveryEnter",
	[BBRX_STAT_LOSS_ENTER]		= "LossEnter",
	[BBRX_STAT_UNDO]		= "Undo",
	[BBRX_STAT_APP_LIMITED]		= "AppLimited",
	/* after AppLimited, in the enum's order: the hooks' (bbrx_hooks.h) */
#define BBRX_HOOK_STAT(id, name) name,
#include "bbrx_hooks.h"
	[BBRX_STAT_LT_BW_USED]		= "LtBwUsed",
	[BBRX_STAT_PROBE_RTT_IDLE_EXIT]	= "ProbeRttIdleExit",
	[BBRX_STAT_IDLE_RESTART]	= "IdleRestart",
	[BBRX3_STAT_SOCKETS_INIT]	= "Bbrx3SocketsInit",
	[BBRX3_STAT_STARTUP_EXIT]	= "Bbrx3StartupExit",
	[BBRX3_STAT_STARTUP_EXIT_CONG]	= "Bbrx3StartupExitCong",
	[BBRX3_STAT_BW_PROBE]		= "Bbrx3BwProbe",
	[BBRX3_STAT_INFLIGHT_HI_LOSS]	= "Bbrx3InflightHiLoss",
	[BBRX3_STAT_INFLIGHT_HI_ECN]	= "Bbrx3InflightHiEcn",
	[BBRX3_STAT_LOSS_ROUNDS]	= "Bbrx3LossRounds",
	[BBRX3_STAT_INFLIGHT_LO_LOSS]	= "Bbrx3InflightLoLoss",
	[BBRX3_STAT_INFLIGHT_LO_ECN]	= "Bbrx3InflightLoEcn",
	[BBRX3_STAT_PROBE_RTT_ENTER]	= "Bbrx3ProbeRttEnter",
	[BBRX3_STAT_IDLE_RESTART]	= "Bbrx3IdleRestart",
	[BBRX3_STAT_NO_BLOCK]		= "Bbrx3NoBlock",
	[BBRX3_STAT_BLOCKS]		= "Bbrx3Blocks",
};

/* Events of netns whose counters were already freed (bbrx_stats_late()). */
static atomic_long_t bbrx_stats_dropped = ATOMIC_LONG_INIT(0);

static int bbrx_stat_show(struct seq_file *seq, void *v)
{
	struct bbrx_net *bn = bbrx_pernet(seq_file_single_net(seq));
	struct bbrx_stats *st;
	int i, cpu;

	seq_puts(seq, BBRX_STAT_PREFIX);
	for (i = 0; i < BBRX_STAT_MAX; i++)
		seq_printf(seq, " %s", bbrx_stat_names[i]);
	seq_puts(seq, "\n" BBRX_STAT_PREFIX);
	rcu_read_lock();
	st = rcu_dereference(bn->stats);
	for (i = 0; st && i < BBRX_STAT_MAX; i++) {
		unsigned long sum = 0;

		for_each_possible_cpu(cpu)
			sum += per_cpu_ptr(st->mib, cpu)->mibs[i];
		seq_printf(seq, " %lu", sum);
	}
	rcu_read_unlock();
	seq_putc(seq, '\n');
	return 0;
}

/**
 * bbrx_stats_late() - count an event that came after its netns' counters
 *
 * Kernel sockets of other subsystems (SUNRPC, CIFS, iSCSI: kern=1, no netns
 * reference) are closed by their own pernet .exit, which runs after bbrx's
 * because bbrx registered later; until then they may still ACK, time out or
 * change congestion control. Rare, so one shared atomic is enough.
 */
void bbrx_stats_late(void)
{
	atomic_long_inc(&bbrx_stats_dropped);
}

/**
 * bbrx_stats_late_count() - events dropped by bbrx_stats_late() so far
 *
 * Return: the count since the module was loaded.
 */
unsigned long bbrx_stats_late_count(void)
{
	return atomic_long_read(&bbrx_stats_dropped);
}

/**
 * bbrx_stats_net_init() - allocate a netns' counters and its proc file
 * @net: the network namespace
 * @bn: its bbrx state
 *
 * Return: 0 or -ENOMEM.
 */
int bbrx_stats_net_init(struct net *net, struct bbrx_net *bn)
{
	struct bbrx_stats *st;

	st = kzalloc(sizeof(*st), GFP_KERNEL);
	if (!st)
		return -ENOMEM;
	st->mib = alloc_percpu(struct bbrx_mib);
	if (!st->mib)
		goto err_free;
	RCU_INIT_POINTER(bn->stats, st);

	if (!proc_create_net_single("bbrx_stat", 0444, net->proc_net,
				    bbrx_stat_show, NULL))
		goto err_mib;
	return 0;

err_mib:
	RCU_INIT_POINTER(bn->stats, NULL);
	free_percpu(st->mib);
err_free:
	kfree(st);
	return -ENOMEM;
}

/* free_percpu() may be called from atomic context, an RCU callback too. */
static void bbrx_stats_free_rcu(struct rcu_head *head)
{
	struct bbrx_stats *st = container_of(head, struct bbrx_stats, rcu);

	free_percpu(st->mib);
	kfree(st);
}

/**
 * bbrx_stats_net_exit() - remove the proc file, then retire the counters
 * @net: the network namespace
 * @bn: its bbrx state
 *
 * Writers look the counters up under rcu_read_lock() in bbrx_stat_inc(), in
 * any context (ACK softirq, the process-context hook replacements), so the
 * memory is freed only after a grace period; writers that come later find
 * NULL. Module unload waits for the callbacks (rcu_barrier() in main.c).
 */
void bbrx_stats_net_exit(struct net *net, struct bbrx_net *bn)
{
	struct bbrx_stats *st;

	remove_proc_entry("bbrx_stat", net->proc_net);
	st = rcu_replace_pointer(bn->stats, NULL, true);
	if (st)
		call_rcu(&st->rcu, bbrx_stats_free_rcu);
}
