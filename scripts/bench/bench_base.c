// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_bbrx3base: the reference arm of `make bench` (BENCH_BASE=REV). bbrx3's
 * congestion-control files from an earlier commit, built by
 * scripts/bench/bench-base with this file, register as "bbrx3base" beside a
 * loaded tcp_bbrx, so that the bench compares a change of bbrx3 with what
 * it replaces in one boot. The model only, at default knobs: no sysctl
 * table, no hooks, no counters (bbrx_stat_inc() finds none and drops the
 * event), no trace events (built with NOTRACE). Never packaged.
 */
#include <linux/module.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "bbrx.h"

unsigned int bbrx_net_id __read_mostly;

static int __net_init bbrx3base_net_init(struct net *net)
{
	bbrx_sysctl_defaults(net_generic(net, bbrx_net_id));
	return 0;
}

static struct pernet_operations bbrx3base_net_ops = {
	.init = bbrx3base_net_init,
	.id = &bbrx_net_id,
	.size = sizeof(struct bbrx_net),
};

/* Linked from the model and sysctl files, never called in this module. */
void bbrx_stats_late(void)
{
}

void bbrx_trace_round_fill(const struct sock *sk, struct bbrx_trace_round *r)
{
}

bool bbrx_hook_installed(enum bbrx_hook_id id)
{
	return false;
}

const char *bbrx_hook_name(enum bbrx_hook_id id)
{
	return "none";
}

void bbrx_hook_lock(void)
{
}

void bbrx_hook_unlock(void)
{
}

int bbrx_hook_users(unsigned long mask, int delta)
{
	return -EOPNOTSUPP;
}

/* A model with a per-socket block has its cache; an earlier one, none. */
#ifndef BBRX3_BLOCK_CACHE
static int bbrx3_block_cache_create(void)
{
	return 0;
}

static void bbrx3_block_cache_destroy(void)
{
}
#endif

static int __init bbrx3base_init(void)
{
	int err;

	err = register_pernet_subsys(&bbrx3base_net_ops);
	if (err)
		return err;
	err = bbrx3_block_cache_create();
	if (err)
		goto err_pernet;
	/* the ops' name is set before registering: its key hashes it */
	strscpy(bbrx3_cong_ops.name, "bbrx3base", sizeof(bbrx3_cong_ops.name));
	err = tcp_register_congestion_control(&bbrx3_cong_ops);
	if (err)
		goto err_cache;
	return 0;

err_cache:
	bbrx3_block_cache_destroy();
err_pernet:
	unregister_pernet_subsys(&bbrx3base_net_ops);
	return err;
}

static void __exit bbrx3base_exit(void)
{
	tcp_unregister_congestion_control(&bbrx3_cong_ops);
	bbrx3_block_cache_destroy();
	unregister_pernet_subsys(&bbrx3base_net_ops);
}

module_init(bbrx3base_init);
module_exit(bbrx3base_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bbrx3 of an earlier commit as bbrx3base, for make bench");
