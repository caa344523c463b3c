// SPDX-License-Identifier: GPL-2.0
/*
 * Installing and removing the hooks of the table in hook.c, and the
 * /proc/net/bbrx_hooks status file. At load each row is resolved, verified
 * (its verifier, then for a redirect bbrx_hook_calls_check()) and
 * installed by its mechanism, or refused with one dmesg line and the
 * reason in the status file; hook.c's top comment gives the mechanisms and
 * the rules for removal.
 */
#include <linux/ftrace.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/string.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"

static const char * const bbrx_hook_state_names[] = {
	[BBRX_HOOK_NEW] = "not-installed",
	[BBRX_HOOK_INSTALLED] = "installed",
	[BBRX_HOOK_REFUSED] = "refused",
	[BBRX_HOOK_DISABLED] = "disabled",
};

/*
 * The ftrace callback of every hook: runs at the target's fentry with the
 * target's arguments in fregs. Never sleeps; returns at its first branch for
 * sockets a hook does not act on.
 */
static void notrace bbrx_hook_thunk(unsigned long ip, unsigned long parent_ip,
				    struct ftrace_ops *ops,
				    struct ftrace_regs *fregs)
{
	struct bbrx_hook *h = container_of(ops, struct bbrx_hook, fops);
	struct sock *sk = (struct sock *)bbrx_fregs_arg0(fregs);

	if (!h->wants(sk))
		return;
	bbrx_fregs_set_ip(fregs, (unsigned long)h->redirect);
}

/* ENTRY hooks: a callback at the target's fentry, the function then runs. */
static void notrace bbrx_hook_entry_thunk(unsigned long ip,
					  unsigned long parent_ip,
					  struct ftrace_ops *ops,
					  struct ftrace_regs *fregs)
{
	struct bbrx_hook *h = container_of(ops, struct bbrx_hook, fops);

	h->entry((struct sock *)bbrx_fregs_arg0(fregs));
}

BBRX_DEFINE_FTRACE_WRAPPER(bbrx_hook_thunk)
BBRX_DEFINE_FTRACE_WRAPPER(bbrx_hook_entry_thunk)

static __printf(2, 3) void bbrx_hook_refuse(struct bbrx_hook *h,
					    const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	vsnprintf(h->reason, sizeof(h->reason), fmt, args);
	va_end(args);
	h->state = BBRX_HOOK_REFUSED;
	pr_warn("bbrx: hook %s (%s) refused: %s\n", bbrx_hook_str(h),
		h->symbol, h->reason);
}

static void bbrx_hook_installed_msg(struct bbrx_hook *h)
{
	WRITE_ONCE(h->state, BBRX_HOOK_INSTALLED);
	pr_info("bbrx: hook %s (%s) installed\n", bbrx_hook_str(h), h->symbol);
}

/*
 * The verifier set kp->offset (a probe inside the function). A lazy probe is
 * registered disabled: verified and placed now, armed by the first policy
 * that needs it (bbrx_hook_users()).
 */
static void bbrx_hook_install_kprobe(struct bbrx_hook *h)
{
	struct kprobe *kp = h->kp;
	int err;

	kp->addr = (kprobe_opcode_t *)h->addr;
	kp->symbol_name = NULL;
	if (h->lazy)
		kp->flags |= KPROBE_FLAG_DISABLED;
	err = register_kprobe(kp);
	if (err) {
		bbrx_hook_refuse(h, "register_kprobe at +%#x: %d", kp->offset,
				 err);
		return;
	}
	bbrx_hook_installed_msg(h);
}

static void bbrx_hook_install(struct bbrx_hook *h, int id)
{
	int err;

	if (bbrx_disable_mask & BIT(id)) {
		h->state = BBRX_HOOK_DISABLED;
		pr_info("bbrx: hook %s (%s) not installed (module parameter disable=)\n",
			bbrx_hook_str(h), h->symbol);
		return;
	}

	h->addr = bbrx_hook_resolve(h->symbol);
	if (!h->addr && h->inlined_into) {
		h->symbol = h->inlined_into;
		h->addr = bbrx_hook_resolve(h->symbol);
	}
	if (!h->addr) {
		bbrx_hook_refuse(h, "symbol not found or not probeable");
		return;
	}
	err = h->verify(h->addr, h->reason, sizeof(h->reason));
	if (err) {
		bbrx_hook_refuse(h, "%s", h->reason);
		return;
	}
	if (h->kind == BBRX_HOOK_REDIRECT) {
		char why[sizeof(h->reason)];

		if (bbrx_hook_calls_check((unsigned long)h->redirect,
					  bbrx_fault_calls_mask & BIT(id),
					  why, sizeof(why))) {
			bbrx_hook_refuse(h, "%s", why);
			return;
		}
	}

	switch (h->kind) {
	case BBRX_HOOK_KPROBE:
		bbrx_hook_install_kprobe(h);
		return;
	case BBRX_HOOK_ENTRY:
		h->fops.func = BBRX_FTRACE_FUNC(bbrx_hook_entry_thunk);
		h->fops.flags = FTRACE_OPS_FL_SAVE_REGS;
		break;
	case BBRX_HOOK_REDIRECT:
		h->fops.func = BBRX_FTRACE_FUNC(bbrx_hook_thunk);
		h->fops.flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY;
		break;
	}
	/*
	 * PERMANENT, as livepatch does: kernel.ftrace_enabled=0 would silently
	 * stop every policy, so that write fails with -EBUSY while bbrx's
	 * ftrace hooks are installed; with ftrace already off they are refused.
	 */
	h->fops.flags |= FTRACE_OPS_FL_PERMANENT;
	if (bbrx_ftrace_off()) {
		bbrx_hook_refuse(h, "ftrace disabled (kernel.ftrace_enabled = 0)");
		return;
	}
	err = ftrace_set_filter_ip(&h->fops, h->addr, 0, 0);
	if (err) {
		bbrx_hook_refuse(h, "not traceable (ftrace_set_filter_ip: %d)",
				 err);
		return;
	}
	err = register_ftrace_function(&h->fops);
	if (err) {
		ftrace_set_filter_ip(&h->fops, h->addr, 1, 0);
		if (err == -EBUSY && bbrx_ftrace_off())
			bbrx_hook_refuse(h, "ftrace disabled (kernel.ftrace_enabled = 0)");
		else if (err == -EBUSY)
			bbrx_hook_refuse(h, "IPMODIFY conflict (livepatch or other redirect) on %s",
					 h->symbol);
		else
			bbrx_hook_refuse(h, "register_ftrace_function: %d", err);
		return;
	}
	bbrx_hook_installed_msg(h);
}

/**
 * bbrx_hooks_install() - resolve, verify and install every hook
 *
 * A hook that fails is refused with its reason (dmesg and
 * /proc/net/bbrx_hooks); the others and the congestion control still work.
 *
 * Return: 0; every hook's own preparation runs in its verifier, and a
 * failure there refuses that hook only.
 */
int bbrx_hooks_install(void)
{
	int i, err;

	err = bbrx_hook_resolver_init();
	if (err)
		pr_warn("bbrx: kallsyms_lookup_name not found (%d): every hook will be refused\n",
			err);
	else
		bbrx_hook_switches_init();
	bbrx_verify_selftest();
	for (i = 0; i < BBRX_HOOK_MAX; i++)
		bbrx_hook_install(bbrx_hooks[i], i);
	return 0;
}

/**
 * bbrx_hooks_remove() - remove every installed hook, then wait
 *
 * After this returns no CPU runs the thunk or a replacement.
 */
void bbrx_hooks_remove(void)
{
	bool any = false;
	int i;

	for (i = 0; i < BBRX_HOOK_MAX; i++) {
		struct bbrx_hook *h = bbrx_hooks[i];

		if (h->state != BBRX_HOOK_INSTALLED)
			continue;
		WRITE_ONCE(h->state, BBRX_HOOK_NEW);
		switch (h->kind) {
		case BBRX_HOOK_KPROBE:
			unregister_kprobe(h->kp);
			break;
		default:
			unregister_ftrace_function(&h->fops);
			ftrace_set_filter_ip(&h->fops, h->addr, 1, 0);
		}
		any = true;
	}
	if (any)
		synchronize_rcu_tasks();
}

/*
 * /proc/net/bbrx_hooks: "hook symbol state[: reason]", one hook per line;
 * lazy hooks add " armed=0|1", rcvbuf (unless refused) its per_mss
 * formula. An installed hook that does not act, checked at read time,
 * shows "inactive: reason" (another tool turned ftrace or kprobes off
 * under it).
 */
static int bbrx_hooks_show(struct seq_file *seq, void *v)
{
	int i;

	/* users and the kprobe's arming change together under the lock */
	bbrx_hook_lock();
	for (i = 0; i < BBRX_HOOK_MAX; i++) {
		const struct bbrx_hook *h = bbrx_hooks[i];
		enum bbrx_hook_state state = READ_ONCE(h->state);
		const char *why = NULL;

		if (state == BBRX_HOOK_INSTALLED)
			why = bbrx_hook_inactive(h);
		seq_printf(seq, "%s %s %s", bbrx_hook_str(h), h->symbol,
			   why ? "inactive" : bbrx_hook_state_names[state]);
		if (state == BBRX_HOOK_REFUSED)
			seq_printf(seq, ": %s", h->reason);
		else if (why)
			seq_printf(seq, ": %s", why);
		if (state == BBRX_HOOK_INSTALLED && h->lazy)
			seq_printf(seq, " armed=%d",
				   !why && !kprobe_disabled(h->kp));
		if (h->show && state != BBRX_HOOK_REFUSED)
			h->show(seq);
		seq_putc(seq, '\n');
	}
	bbrx_hook_unlock();
	return 0;
}

/**
 * bbrx_hooks_net_init() - show the (global) hook status in a netns
 * @net: the network namespace
 *
 * Return: 0 or -ENOMEM.
 */
int bbrx_hooks_net_init(struct net *net)
{
	if (!proc_create_net_single("bbrx_hooks", 0444, net->proc_net,
				    bbrx_hooks_show, NULL))
		return -ENOMEM;
	return 0;
}

/**
 * bbrx_hooks_net_exit() - remove the netns' hook status file
 * @net: the network namespace
 */
void bbrx_hooks_net_exit(struct net *net)
{
	remove_proc_entry("bbrx_hooks", net->proc_net);
}
