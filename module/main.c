// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx: module bring-up and tear-down.
 *
 * Order matters: per-netns settings and counters exist before the congestion
 * control can be chosen by any socket, and the congestion control is gone
 * (and its RCU readers finished) before they are freed. Hooks are installed
 * after the settings they read and removed (with a tasks-RCU wait) before
 * them. Sockets and netns defaults using bbrx hold a module reference, so
 * unload cannot race them; other sockets reach bbrx only through the hooks.
 */
#include <linux/module.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <linux/rcupdate.h>
#include <net/tcp.h>

#include "bbrx.h"

unsigned int bbrx_net_id __read_mostly;

static int __net_init bbrx_net_init(struct net *net)
{
	struct bbrx_net *bn = bbrx_pernet(net);
	int err;

	bbrx_sysctl_defaults(bn);

	err = bbrx_stats_net_init(net, bn);
	if (err)
		return err;

	err = bbrx_hooks_net_init(net);
	if (err)
		goto err_stats;

	err = bbrx_sysctl_net_init(net, bn);
	if (err)
		goto err_hooks;
	return 0;

err_hooks:
	bbrx_hooks_net_exit(net);
err_stats:
	bbrx_stats_net_exit(net, bn);
	return err;
}

/*
 * A dying netns may still have kernel sockets (which hold no netns
 * reference) sending, until the pernet .exit of the subsystem that owns
 * them, which runs after ours: turn the hook policies off first, so hooks
 * leave those sockets to the kernel. Whatever bbrx still counts for them
 * (their congestion control may be bbrx) is dropped once the counters are
 * gone (stats.c); struct bbrx_net itself lives until every .exit has run.
 */
static void __net_exit bbrx_net_pre_exit(struct net *net)
{
	bbrx_sysctl_policies_off(bbrx_pernet(net));
}

static void __net_exit bbrx_net_exit(struct net *net)
{
	struct bbrx_net *bn = bbrx_pernet(net);

	bbrx_sysctl_net_exit(bn);
	bbrx_hooks_net_exit(net);
	bbrx_stats_net_exit(net, bn);
}

static struct pernet_operations bbrx_net_ops = {
	.init = bbrx_net_init,
	.pre_exit = bbrx_net_pre_exit,
	.exit = bbrx_net_exit,
	.id = &bbrx_net_id,
	.size = sizeof(struct bbrx_net),
};

static int __init bbrx_module_init(void)
{
	int err;

	err = register_pernet_subsys(&bbrx_net_ops);
	if (err)
		return err;

	/* Hooks act only where a netns policy asks; all start at 0. */
	err = bbrx_hooks_install();
	if (err)
		goto err_pernet;

	/* -EEXIST if a name is taken, -EINVAL if ops are incomplete */
	err = bbrx3_block_cache_create();
	if (err)
		goto err_hooks;
	err = tcp_register_congestion_control(&bbrx_cong_ops);
	if (err)
		goto err_cache;
	err = tcp_register_congestion_control(&bbrx3_cong_ops);
	if (err)
		goto err_cc;
	pr_info("bbrx: congestion controls \"%s\" and \"%s\" registered\n",
		BBRX_CA_NAME, BBRX3_CA_NAME);
	return 0;

err_cc:
	tcp_unregister_congestion_control(&bbrx_cong_ops);
err_cache:
	bbrx3_block_cache_destroy();
err_hooks:
	bbrx_hooks_remove();
err_pernet:
	unregister_pernet_subsys(&bbrx_net_ops);
	return err;
}

static void __exit bbrx_module_exit(void)
{
	/* each waits for RCU readers of the kernel's list */
	tcp_unregister_congestion_control(&bbrx3_cong_ops);
	tcp_unregister_congestion_control(&bbrx_cong_ops);
	/* no socket is left on bbrx3: each held a module reference */
	bbrx3_block_cache_destroy();
	bbrx_hooks_remove();
	unregister_pernet_subsys(&bbrx_net_ops);
	/* the counters' RCU callbacks (stats.c) run module text */
	rcu_barrier();
	pr_info("bbrx: unloaded (%lu counter events of exiting netns dropped)\n",
		bbrx_stats_late_count());
}

module_init(bbrx_module_init);
module_exit(bbrx_module_exit);

MODULE_AUTHOR("bbrx developers <bbrx@localhost>");
MODULE_DESCRIPTION("TCP BBR-family congestion control with a GSO-independent burst goal");
MODULE_LICENSE("GPL");
MODULE_VERSION(BBRX_VERSION);
/* TCP_CONGESTION "bbrx3" loads this module on demand ("tcp_" + name) */
MODULE_ALIAS("tcp_" BBRX3_CA_NAME);
