// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx per-netns counters: /proc/net/bbrx_stat.
 *
 * A module cannot add fields to /proc/net/netstat, so the counters get their
 * own file in the same two-line "Prefix: names" / "Prefix: values" format,
 * which nstat-like tools and awk one-liners already parse. Counters are
 * per-cpu (incremented from the ACK path without locks) and summed on read.
 */
#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
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
	[BBRX_STAT_AUTOCORK_CORKED]	= "AutocorkCorked",
	[BBRX_STAT_AUTOCORK_DECLINED]	= "AutocorkDeclined",
	[BBRX_STAT_TSQ_THROTTLED]	= "TsqThrottled",
	[BBRX_STAT_TSQ_SINGLE_SKB]	= "TsqSingleSkb",
	[BBRX_STAT_TSQ_WITHHELD]	= "TsqWithheld",
	[BBRX_STAT_RCVBUF_SIZED]	= "RcvbufSized",
	[BBRX_STAT_RCVBUF_GROWN]	= "RcvbufGrown",
	[BBRX_STAT_DELACK_PUSH_MARKED]	= "DelackPushMarked",
	[BBRX_STAT_DELACK_PUSH_SUPPRESSED] = "DelackPushSuppressed",
};

static int bbrx_stat_show(struct seq_file *seq, void *v)
{
	struct bbrx_net *bn = bbrx_pernet(seq_file_single_net(seq));
	int i, cpu;

	seq_puts(seq, BBRX_STAT_PREFIX);
	for (i = 0; i < BBRX_STAT_MAX; i++)
		seq_printf(seq, " %s", bbrx_stat_names[i]);
	seq_puts(seq, "\n" BBRX_STAT_PREFIX);
	for (i = 0; i < BBRX_STAT_MAX; i++) {
		unsigned long sum = 0;

		for_each_possible_cpu(cpu)
			sum += per_cpu_ptr(bn->mib, cpu)->mibs[i];
		seq_printf(seq, " %lu", sum);
	}
	seq_putc(seq, '\n');
	return 0;
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
	bn->mib = alloc_percpu(struct bbrx_mib);
	if (!bn->mib)
		return -ENOMEM;

	if (!proc_create_net_single("bbrx_stat", 0444, net->proc_net,
				    bbrx_stat_show, NULL)) {
		free_percpu(bn->mib);
		bn->mib = NULL;
		return -ENOMEM;
	}
	return 0;
}

/**
 * bbrx_stats_net_exit() - remove the proc file, then free the counters
 * @net: the network namespace
 * @bn: its bbrx state
 */
void bbrx_stats_net_exit(struct net *net, struct bbrx_net *bn)
{
	remove_proc_entry("bbrx_stat", net->proc_net);
	free_percpu(bn->mib);
}
