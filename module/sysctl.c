// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx per-netns settings: net.ipv4.bbrx.*
 *
 * One descriptor per knob gives its name, default and range; the ctl_table of
 * each netns is built from it, so a new netns starts from the defaults and
 * the table in docs/usage.md has one source to follow. Writes go through
 * proc_dointvec_minmax(): out-of-range or non-numeric input fails with
 * -EINVAL and leaves the value unchanged.
 */
#include <linux/capability.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>

#include "bbrx.h"
#include "compat.h"

struct bbrx_param {
	const char *name;
	size_t offset;		/* of the int in struct bbrx_net */
	int def;
	int min;		/* extra1/extra2 of proc_dointvec_minmax */
	int max;
	int pol;		/* enum bbrx_policy_id of a policy, or -1 */
};

#define BBRX_PARAM(field, d, lo, hi) {				\
	.name = #field,						\
	.offset = offsetof(struct bbrx_net, field),		\
	.def = d, .min = lo, .max = hi, .pol = -1,		\
}

/*
 * Gains are per-mille (1000 = 1.0) so that 2/ln(2) = 2.885 is expressible;
 * defaults are those of BBR v1 (Cardwell et al., ACM Queue 2016; the kernel's
 * tcp_bbr.c).
 */
static struct bbrx_param bbrx_params[] = {
	/* 0: hooks act on bbrx sockets only; 1: on every TCP socket */
	BBRX_PARAM(scope, BBRX_SCOPE_BBRX, 0, 1),
	/* STARTUP pacing and cwnd gain, 2/ln(2) doubles delivery per round */
	BBRX_PARAM(high_gain, 2885, 1000, 10000),
	/*
	 * DRAIN pacing gain, 1/high_gain empties the STARTUP queue in a round;
	 * 344 is in-tree BBR's 88/256 (0.34375)
	 */
	BBRX_PARAM(drain_gain, 344, 100, 1000),
	/* PROBE_BW cwnd gain: room for delayed and stretched ACKs */
	BBRX_PARAM(cwnd_gain, 2000, 1000, 10000),
	/* PROBE_BW probing phase pacing gain */
	BBRX_PARAM(probe_bw_up_gain, 1250, 1000, 3000),
	/* PROBE_BW draining phase pacing gain */
	BBRX_PARAM(probe_bw_down_gain, 750, 100, 1000),
	/* ACK-aggregation (extra_acked) cwnd allowance gain, 0 = off */
	BBRX_PARAM(extra_acked_gain, 1000, 0, 10000),
	/* min_rtt filter window and PROBE_RTT interval, ms */
	BBRX_PARAM(min_rtt_win_ms, 10000, 100, 600000),
	/* time spent at 4 packets in flight in PROBE_RTT, ms */
	BBRX_PARAM(probe_rtt_ms, 200, 10, 10000),
	/* cwnd += tso_margin * tso_segs_goal (upstream 350c9f484bde uses 3) */
	BBRX_PARAM(tso_margin, 3, 0, 16),
	/* 1: burst goal capped by the device's gso_max_segs (pre-350c9f484bde) */
	BBRX_PARAM(gso_cap, 0, 0, 1),
	/* sk_pacing_shift of bbrx sockets: goal = pacing_rate >> shift bytes */
	BBRX_PARAM(pacing_shift, 10, 4, 16),
	/* 1: long-term (policer) bw sampling as 6.1's tcp_bbr.c; 0: off */
	BBRX_PARAM(lt_bw, 1, 0, 1),
	/*
	 * bbrx3 (draft-ietf-ccwg-bbr-06 and Google's BBRv3 release; cc_bbrx3.c):
	 * a round whose losses exceed loss_thresh of inflight means too high
	 * (LossThresh 2%)
	 */
	BBRX_PARAM(bbrx3_loss_thresh, 20, 1, 500),
	/* share of bw_lo/inflight_lo kept after a lossy loss round (Beta 0.7) */
	BBRX_PARAM(bbrx3_beta, 700, 100, 1000),
	/* inflight_hi share left free for other flows in CRUISE (0.15) */
	BBRX_PARAM(bbrx3_headroom, 150, 0, 500),
	/*
	 * 1: CE marks (ECN-capable connections) cut inflight; 0: ignored.
	 * Off by default: the v3 release reacts to CE only where the operator
	 * opts in (its per-route low-latency ECN flag)
	 */
	BBRX_PARAM(bbrx3_ecn, 0, 0, 1),
	/* CE-marked share of a sample that means too high (release: 50%) */
	BBRX_PARAM(bbrx3_ecn_thresh, 500, 1, 1000),
	/* ECN used only while min_rtt <= this, usec; 0 any (release: 5 ms) */
	BBRX_PARAM(bbrx3_ecn_max_rtt_us, 5000, 0, 10000000),
	/*
	 * PROBE_RTT when min_rtt was not refreshed for this long, ms (5 s);
	 * at most bbrx3's 10 s min_rtt window, which it exists to refresh
	 */
	BBRX_PARAM(bbrx3_probe_rtt_win_ms, 5000, 100, 10000),
	/* the hook policies, 0 the kernel's rule .. max (bbrx_hooks.h) */
#define BBRX_POLICY(id, field, hi) {				\
	.name = #field,						\
	.offset = offsetof(struct bbrx_net, policy[BBRX_POL_##id]), \
	.def = BBRX_POLICY_KERNEL, .min = 0, .max = hi,		\
	.pol = BBRX_POL_##id,					\
},
#include "bbrx_hooks.h"
};

/*
 * BIT(hook id) of the hooks a policy's non-zero value needs: those
 * bbrx_hooks.h arms by it.
 */
static unsigned long bbrx_param_hooks(const struct bbrx_param *p)
{
	/* each hook's policy, by enum bbrx_hook_id */
	static const int pol[BBRX_HOOK_MAX] = {
#define BBRX_HOOK(id, name, policy) BBRX_POL_##policy,
#include "bbrx_hooks.h"
	};
	unsigned long mask = 0;
	int i;

	for (i = 0; i < BBRX_HOOK_MAX; i++)
		if (pol[i] == p->pol)
			mask |= BIT(i);
	return mask;
}

static int *bbrx_param_ptr(struct bbrx_net *bn, const struct bbrx_param *p)
{
	return (int *)((char *)bn + p->offset);
}

/*
 * Policy knobs: range-checked like the others (-EINVAL), then writing needs
 * CAP_NET_ADMIN in the initial user namespace (-EPERM): a policy arms hooks
 * that every netns shares (the delack kprobe costs every host socket an
 * int3), so root of an unprivileged user+net namespace must not set it.
 * A non-zero value also needs its hook installed and active now
 * (-EOPNOTSUPP), and a lazy kprobe must arm (its error, -EBUSY when kprobes
 * are disarmed system-wide). Every refusal leaves the value unchanged.
 */
static int bbrx_proc_policy(BBRX_CTL_TABLE *table, int write, void *buffer,
			    size_t *lenp, loff_t *ppos)
{
	struct bbrx_param *p = table->extra1;
	int *cur = table->data;
	struct bbrx_net *bn = (void *)((char *)cur - p->offset);
	/*
	 * Reads show the value; a write parses into an out-of-range sentinel,
	 * so that a write with no number in it (empty, or at an offset) stays a
	 * no-op instead of storing a value read before the lock.
	 */
	int val = write ? INT_MIN : READ_ONCE(*cur);
	struct ctl_table tmp = {
		.data = &val,
		.maxlen = sizeof(int),
		.extra1 = &p->min,
		.extra2 = &p->max,
	};
	unsigned long hooks;
	int err, id;

	err = proc_dointvec_minmax(&tmp, write, buffer, lenp, ppos);
	if (err || !write || val == INT_MIN)
		return err;
	if (!capable(CAP_NET_ADMIN)) {
		pr_warn_ratelimited("bbrx: net.ipv4.bbrx.%s: writing a hook policy needs CAP_NET_ADMIN in the initial user namespace\n",
				    p->name);
		return -EPERM;
	}
	hooks = bbrx_param_hooks(p);
	bbrx_hook_lock();
	/*
	 * The table outlives pre_exit (it goes in .exit): a dying netns keeps
	 * its policies at 0, or a write would add a hook user nobody drops.
	 */
	if (bn->dying) {
		err = -ENOENT;
		goto out;
	}
	/*
	 * Checked under the lock: another netns arming or disarming the same
	 * lazy kprobe must not look like an inactive hook.
	 */
	if (val != BBRX_POLICY_KERNEL) {
		for_each_set_bit(id, &hooks, BBRX_HOOK_MAX) {
			if (bbrx_hook_installed(id))
				continue;
			pr_warn_ratelimited("bbrx: net.ipv4.bbrx.%s=%d needs hook %s, which is not installed or not active (see /proc/net/bbrx_hooks)\n",
					    p->name, val, bbrx_hook_name(id));
			err = -EOPNOTSUPP;
			goto out;
		}
	}
	/*
	 * Leaving 0, the hooks are armed before the value is visible (arming
	 * may fail); returning to 0, the value goes first.
	 */
	if (!*cur == !val) {
		WRITE_ONCE(*cur, val);
	} else if (val) {
		err = bbrx_hook_users(hooks, 1);
		if (!err)
			WRITE_ONCE(*cur, val);
	} else {
		WRITE_ONCE(*cur, val);
		bbrx_hook_users(hooks, -1);	/* cannot fail */
	}
out:
	bbrx_hook_unlock();
	return err;
}

/**
 * bbrx_sysctl_defaults() - give a netns the default settings
 * @bn: per-netns state, not yet visible to sockets or sysctl
 */
void bbrx_sysctl_defaults(struct bbrx_net *bn)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(bbrx_params); i++)
		*bbrx_param_ptr(bn, &bbrx_params[i]) = bbrx_params[i].def;
}

/**
 * bbrx_sysctl_policies_off() - set every hook policy of a dying netns to 0
 * @bn: per-netns state
 *
 * Kernel sockets of a netns being dismantled may still send; from here on
 * the hooks leave them to the kernel, lazy hooks lose this user, and policy
 * writes (the sysctl files exist until .exit) fail with -ENOENT.
 */
void bbrx_sysctl_policies_off(struct bbrx_net *bn)
{
	int i;

	bbrx_hook_lock();
	bn->dying = true;
	for (i = 0; i < ARRAY_SIZE(bbrx_params); i++) {
		const struct bbrx_param *p = &bbrx_params[i];
		int *v = bbrx_param_ptr(bn, p);

		if (p->pol < 0 || *v == BBRX_POLICY_KERNEL)
			continue;
		WRITE_ONCE(*v, BBRX_POLICY_KERNEL);
		bbrx_hook_users(bbrx_param_hooks(p), -1);	/* cannot fail */
	}
	bbrx_hook_unlock();
}

/**
 * bbrx_sysctl_net_init() - register net.ipv4.bbrx.* for one netns
 * @net: the network namespace
 * @bn: its bbrx state, whose ints the table points to
 *
 * Return: 0, or -ENOMEM when the table or its registration fails.
 */
int bbrx_sysctl_net_init(struct net *net, struct bbrx_net *bn)
{
	const size_t n = ARRAY_SIZE(bbrx_params);
	struct ctl_table *table;
	int i;

	/* n + 1: the zeroed sentinel kernels before 6.11 look for */
	table = kcalloc(n + 1, sizeof(*table), GFP_KERNEL);
	if (!table)
		return -ENOMEM;

	for (i = 0; i < n; i++) {
		struct bbrx_param *p = &bbrx_params[i];

		table[i].procname = p->name;
		table[i].data = bbrx_param_ptr(bn, p);
		table[i].maxlen = sizeof(int);
		table[i].mode = 0644;
		if (p->pol < 0) {
			table[i].proc_handler = proc_dointvec_minmax;
			table[i].extra1 = &p->min;
			table[i].extra2 = &p->max;
		} else {
			table[i].proc_handler = bbrx_proc_policy;
			table[i].extra1 = p;
		}
	}

	bn->sysctl_hdr = bbrx_register_net_sysctl(net, "net/ipv4/bbrx",
						  table, n);
	if (!bn->sysctl_hdr) {
		kfree(table);
		return -ENOMEM;
	}
	bn->sysctl_table = table;
	return 0;
}

/**
 * bbrx_sysctl_net_exit() - unregister the netns' table and free it
 * @bn: per-netns state
 */
void bbrx_sysctl_net_exit(struct bbrx_net *bn)
{
	unregister_net_sysctl_table(bn->sysctl_hdr);
	kfree(bn->sysctl_table);
}
