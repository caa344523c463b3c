// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx hook framework: hooks declared as data, verified, then installed.
 *
 * Each hook is one row, struct bbrx_hook bbrx_hook_NAME in its own file
 * (the list: bbrx_hooks.h; bbrx_hooks[] points to them): the kernel
 * function it acts on (by exact symbol name), a verifier that checks the
 * shape the handler depends on (calling convention, instruction bytes,
 * struct offsets), and one of three mechanisms, the least invasive that
 * does the job:
 *
 *   REDIRECT   ftrace IPMODIFY redirect to our replacement (the mechanism
 *              livepatch uses), when a "wants" test on the socket says so
 *   ENTRY      plain ftrace callback at the target's fentry (reads/sets
 *              socket fields before the function runs)
 *   KPROBE     an int3 kprobe the hook's file provides inside the function
 *              (e.g. one that skips one verified instruction)
 *
 * No kprobe or kretprobe sits on a function's ftrace site: in the 6.1 guest,
 * registering and unregistering those on hot TCP functions under traffic
 * twice made the CPU jump to address 0 from the function's caller.
 *
 * At load every hook is resolved, verified and installed, or refused with
 * one dmesg line; a refused hook never stops the module or the congestion
 * control. Handlers return at their first branch for sockets out of scope or
 * a policy at 0; replacements are written from what the function must do,
 * not copied.
 *
 * Removal: unregister_ftrace_function() / unregister_kprobe() stop new
 * entries, then synchronize_rcu_tasks() waits until no task can still be
 * running a thunk, handler or replacement, before the module text goes away.
 * A task that blocks counts as quiescent for it, and on PREEMPT_RT spinlock_t
 * blocks: so a replacement must not block with its frame on the stack. Thunks
 * and handlers run with preemption off; each replacement's own text is
 * decoded at load and may call only functions known not to block
 * (bbrx_hook_calls_check()), so that the call into the kernel's transmit
 * path in the autocork redirect must be a tail jump.
 */
#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/proc_fs.h>
#include <linux/rcupdate.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"

/* The rows, each defined in its hook's own file. */
struct bbrx_hook *const bbrx_hooks[BBRX_HOOK_MAX] = {
#define BBRX_HOOK(id, name, pol) (&bbrx_hook_##name),
#include "bbrx_hooks.h"
};

/* Each hook's name in the status file and the module parameters. */
static const char * const bbrx_hook_names[BBRX_HOOK_MAX] = {
#define BBRX_HOOK(id, name, pol) (#name),
#include "bbrx_hooks.h"
};

/* "autocork, tsq, ..., delack, ": the hook names, for an error message. */
static const char bbrx_hooks_known[] = {
#define BBRX_HOOK(id, name, pol) #name ", "
#include "bbrx_hooks.h"
};

/**
 * bbrx_hook_str() - the name of a row of the hook table
 * @h: a row of bbrx_hooks[]
 *
 * Return: a static string, for messages and the status file.
 */
const char *bbrx_hook_str(const struct bbrx_hook *h)
{
	int i;

	for (i = 0; i < BBRX_HOOK_MAX; i++)
		if (bbrx_hooks[i] == h)
			break;
	return i < BBRX_HOOK_MAX ? bbrx_hook_names[i] : "?";
}

/*
 * Module parameters naming hooks: "disable" skips hooks at load, "fault_verify"
 * makes their verifier expect a wrong pattern (for the refusal test). Both
 * take a comma-separated list of hook names; an unknown name fails the load
 * with -EINVAL.
 */
/*
 * Every hook is installed by default (verified and reported at load; a
 * policy at 0 costs one early return). `disable=all` installs none.
 */
unsigned long bbrx_disable_mask;
static unsigned long bbrx_fault_mask;
unsigned long bbrx_fault_calls_mask;

static int bbrx_hook_mask_set(const char *val, const struct kernel_param *kp)
{
	unsigned long *mask = kp->arg, m = 0;
	char *buf, *cur, *tok;
	int i, err = 0;

	buf = kstrdup(val, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	cur = strim(buf);
	while ((tok = strsep(&cur, ",")) != NULL) {
		tok = strim(tok);
		if (!*tok)
			continue;
		if (!strcmp(tok, "all")) {
			m = BIT(BBRX_HOOK_MAX) - 1;
			continue;
		}
		for (i = 0; i < BBRX_HOOK_MAX; i++)
			if (!strcmp(tok, bbrx_hook_names[i]))
				break;
		if (i == BBRX_HOOK_MAX) {
			pr_err("bbrx: %s: unknown hook \"%s\" (known: %sall)\n",
			       kp->name, tok, bbrx_hooks_known);
			err = -EINVAL;
			break;
		}
		m |= BIT(i);
	}
	kfree(buf);
	if (!err)
		*mask = m;
	return err;
}

static int bbrx_hook_mask_get(char *buf, const struct kernel_param *kp)
{
	unsigned long mask = *(unsigned long *)kp->arg;
	int i, n = 0;

	for (i = 0; i < BBRX_HOOK_MAX; i++)
		if (mask & BIT(i))
			n += sysfs_emit_at(buf, n, "%s%s", n ? "," : "",
					   bbrx_hook_names[i]);
	n += sysfs_emit_at(buf, n, "\n");
	return n;
}

static const struct kernel_param_ops bbrx_hook_mask_ops = {
	.set = bbrx_hook_mask_set,
	.get = bbrx_hook_mask_get,
};

module_param_cb(disable, &bbrx_hook_mask_ops, &bbrx_disable_mask, 0444);
/* The names are those of /proc/net/bbrx_hooks; a wrong one says them. */
MODULE_PARM_DESC(disable,
		 "Hooks not to install, comma-separated: names as in /proc/net/bbrx_hooks, or all (default: none, every hook is installed)");
module_param_cb(fault_verify, &bbrx_hook_mask_ops, &bbrx_fault_mask, 0444);
MODULE_PARM_DESC(fault_verify,
		 "Test only: hooks whose verifier expects a wrong pattern and refuses");
module_param_cb(fault_calls, &bbrx_hook_mask_ops, &bbrx_fault_calls_mask, 0444);
MODULE_PARM_DESC(fault_calls,
		 "Test only: redirects whose replacement may call nothing and is refused");

/**
 * bbrx_hook_fault() - should this hook's verifier expect a wrong pattern?
 * @id: the hook
 *
 * Return: true if named in the fault_verify module parameter.
 */
bool bbrx_hook_fault(enum bbrx_hook_id id)
{
	return bbrx_fault_mask & BIT(id);
}

/*
 * Switches other tools can flip under an installed hook, read for the live
 * state (KALLSYMS_ALL lists these variables; NULL when not found):
 * kernel.ftrace_enabled, ftrace's shutdown after an internal error
 * (ftrace_kill()), and debugfs kprobes/enabled.
 */
static const int *bbrx_ftrace_enabled;
static const int *bbrx_ftrace_dead;
static const bool *bbrx_kprobes_all_disarmed;

static bool bbrx_kprobes_disarmed(void)
{
	return bbrx_kprobes_all_disarmed && READ_ONCE(*bbrx_kprobes_all_disarmed);
}

/**
 * bbrx_ftrace_off() - is kernel.ftrace_enabled 0 right now?
 *
 * Return: true if it is; false also when the switch was not found.
 */
bool bbrx_ftrace_off(void)
{
	return bbrx_ftrace_enabled && !READ_ONCE(*bbrx_ftrace_enabled);
}

/**
 * bbrx_hook_switches_init() - find the switches the live state reads
 *
 * After bbrx_hook_resolver_init() succeeded; process context (module
 * load). A switch not found leaves its pointer NULL: the status file then
 * cannot tell when another tool turns it off, which is said once here.
 */
void bbrx_hook_switches_init(void)
{
	bbrx_ftrace_enabled = (void *)bbrx_hook_resolve("ftrace_enabled");
	bbrx_ftrace_dead = (void *)bbrx_hook_resolve("ftrace_disabled");
	bbrx_kprobes_all_disarmed = (void *)bbrx_hook_resolve("kprobes_all_disarmed");
	if (!bbrx_ftrace_enabled || !bbrx_ftrace_dead || !bbrx_kprobes_all_disarmed)
		pr_warn("bbrx: ftrace/kprobes switches not found (CONFIG_KALLSYMS_ALL?): /proc/net/bbrx_hooks cannot tell when other tools turn them off\n");
}

/* Serialises policy writes that change how many netns need a hook. */
static DEFINE_MUTEX(bbrx_hook_mutex);

/**
 * bbrx_hook_inactive() - why an installed hook does not act right now
 * @h: an installed row of bbrx_hooks[]
 *
 * From the live state of ftrace and kprobes (not from install time): other
 * tools can turn either off under an installed hook.
 *
 * Return: the reason, a static string, or NULL when the hook acts.
 */
const char *bbrx_hook_inactive(const struct bbrx_hook *h)
{
	if (h->kind == BBRX_HOOK_KPROBE) {
		if (bbrx_kprobes_disarmed())
			return "kprobes disarmed system-wide (debugfs kprobes/enabled is 0)";
		if (kprobe_gone(h->kp))
			return "kprobe gone";
		if (READ_ONCE(h->users) && kprobe_disabled(h->kp))
			return "kprobe disabled while a policy needs it";
		return NULL;
	}
	if (bbrx_ftrace_dead && READ_ONCE(*bbrx_ftrace_dead))
		return "ftrace shut down after an internal error (see dmesg)";
	if (bbrx_ftrace_off())
		return "ftrace disabled (kernel.ftrace_enabled = 0)";
	if (!(READ_ONCE(h->fops.flags) & FTRACE_OPS_FL_ENABLED))
		return "ftrace_ops not enabled";
	return NULL;
}

/**
 * bbrx_hook_installed() - may a policy of this hook be set?
 * @id: the hook
 *
 * Caller holds bbrx_hook_lock(), under which a lazy kprobe's arming and
 * its user count change together.
 *
 * Return: true if the hook is installed and, checked now, acts: ftrace
 * (redirects, entry callbacks) neither disabled nor shut down, kprobes
 * not disarmed system-wide.
 */
bool bbrx_hook_installed(enum bbrx_hook_id id)
{
	const struct bbrx_hook *h = bbrx_hooks[id];

	lockdep_assert_held(&bbrx_hook_mutex);

	return READ_ONCE(h->state) == BBRX_HOOK_INSTALLED &&
	       !bbrx_hook_inactive(h);
}

/**
 * bbrx_hook_name() - the name of a hook in the status file and parameters
 * @id: the hook
 *
 * Return: a static string.
 */
const char *bbrx_hook_name(enum bbrx_hook_id id)
{
	return bbrx_hook_names[id];
}

/**
 * bbrx_hook_lock() - take the mutex policy changes hold
 *
 * Process context only (sysctl writes, netns teardown); may sleep.
 */
void bbrx_hook_lock(void)
{
	mutex_lock(&bbrx_hook_mutex);
}

/**
 * bbrx_hook_unlock() - release it
 */
void bbrx_hook_unlock(void)
{
	mutex_unlock(&bbrx_hook_mutex);
}

/* Arm a lazy kprobe for its first user; 0 or why it is not armed. */
static int bbrx_hook_arm(struct bbrx_hook *h)
{
	int err;

	err = enable_kprobe(h->kp);
	if (err) {
		pr_warn("bbrx: hook %s: enable_kprobe: %d\n", bbrx_hook_str(h),
			err);
		return err;
	}
	/*
	 * With kprobes disarmed system-wide (debugfs kprobes/enabled = 0)
	 * enable_kprobe() succeeds and arms nothing.
	 */
	if (kprobe_disabled(h->kp) || bbrx_kprobes_disarmed()) {
		disable_kprobe(h->kp);
		pr_warn("bbrx: hook %s: kprobes are disarmed system-wide (/sys/kernel/debug/kprobes/enabled is 0)\n",
			bbrx_hook_str(h));
		return -EBUSY;
	}
	return 0;
}

/**
 * bbrx_hook_users() - a netns starts or stops needing some hooks
 * @mask: BIT(hook id) of the hooks its policy uses
 * @delta: +1 when the policy leaves 0, -1 when it returns to 0
 *
 * Lazy hooks are armed while at least one netns needs them, so a policy at
 * 0 everywhere costs nothing. Caller holds bbrx_hook_lock().
 *
 * Return: 0, or (for delta +1 only) the error of arming a lazy kprobe:
 * enable_kprobe()'s, or -EBUSY when kprobes are disarmed system-wide.
 * On error nothing changed.
 */
int bbrx_hook_users(unsigned long mask, int delta)
{
	unsigned long done = 0;
	int id, err;

	lockdep_assert_held(&bbrx_hook_mutex);
	for_each_set_bit(id, &mask, BBRX_HOOK_MAX) {
		struct bbrx_hook *h = bbrx_hooks[id];
		bool lazy = h->lazy && h->state == BBRX_HOOK_INSTALLED;

		/*
		 * Armed before it counts its first user, disarmed after the
		 * last one left, so that users > 0 always means armed.
		 */
		if (lazy && delta > 0 && !h->users) {
			err = bbrx_hook_arm(h);
			if (err) {
				if (done)
					bbrx_hook_users(done, -1);
				return err;
			}
		}
		h->users += delta;
		if (WARN_ON_ONCE(h->users < 0))
			h->users = 0;
		done |= BIT(id);
		if (lazy && delta < 0 && !h->users)
			disable_kprobe(h->kp);
	}
	return 0;
}
