// SPDX-License-Identifier: GPL-2.0
/*
 * bbrx hook framework: hooks declared as data, verified, then installed.
 *
 * Each hook is one row of bbrx_hooks[]: the kernel function it acts on (by
 * exact symbol name), a verifier that checks the shape the handler depends
 * on (calling convention, instruction bytes, struct offsets), and one of
 * four mechanisms, the least invasive that does the job:
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
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"

enum bbrx_hook_state {
	BBRX_HOOK_NEW,
	BBRX_HOOK_INSTALLED,
	BBRX_HOOK_REFUSED,
	BBRX_HOOK_DISABLED,
};

enum bbrx_hook_kind {
	BBRX_HOOK_REDIRECT,
	BBRX_HOOK_ENTRY,
	BBRX_HOOK_KPROBE,
};

struct bbrx_hook {
	const char *symbol;	/* exact kallsyms name of the target */
	const char *inlined_into; /* where to look when symbol is inlined */
	enum bbrx_hook_kind kind;
	int (*verify)(unsigned long addr, char *reason, size_t len);
	bool (*wants)(struct sock *sk);		/* REDIRECT */
	void *redirect;		/* REDIRECT: replacement with the target's ABI */
	void (*entry)(struct sock *sk);		/* ENTRY */
	struct kprobe *kp;	/* KPROBE: .offset set by verify */
	void (*show)(struct seq_file *seq);	/* extra status, optional */
	bool lazy;		/* armed only while a netns policy needs it */
	int users;		/* netns whose policy needs it (bbrx_hook_mutex) */

	enum bbrx_hook_state state;
	unsigned long addr;
	struct ftrace_ops fops;
	char reason[160];	/* a refusal may quote an instruction */
};

static struct bbrx_hook bbrx_hooks[BBRX_HOOK_MAX] = {
	[BBRX_HOOK_AUTOCORK] = {
		.symbol = "tcp_push",
		.kind = BBRX_HOOK_REDIRECT,
		.verify = bbrx_autocork_verify,
		.wants = bbrx_autocork_wants,
		.redirect = bbrx_autocork_tcp_push,
	},
	[BBRX_HOOK_TSQ] = {
		.symbol = "tcp_small_queue_check.isra.0",
		.kind = BBRX_HOOK_REDIRECT,
		.verify = bbrx_tsq_verify,
		.wants = bbrx_tsq_wants,
		.redirect = bbrx_tsq_small_queue_check,
	},
	[BBRX_HOOK_RCVBUF] = {
		.symbol = "tcp_init_transfer",
		.kind = BBRX_HOOK_ENTRY,
		.verify = bbrx_rcvbuf_verify,
		.entry = bbrx_rcvbuf_init_transfer,
		.show = bbrx_rcvbuf_show,
	},
	[BBRX_HOOK_RCVBUF_GROW] = {
		.symbol = BBRX_RCVBUF_GROW_SYMBOL,
		.kind = BBRX_HOOK_REDIRECT,
		.verify = bbrx_rcvbuf_grow_verify,
		.wants = bbrx_rcvbuf_grow_wants,
		.redirect = bbrx_rcvbuf_grow,
	},
	[BBRX_HOOK_DELACK] = {
		/* out of line in 6.12; inlined into its caller in 6.1 */
		.symbol = "tcp_measure_rcv_mss",
		.inlined_into = "tcp_event_data_recv",
		.kind = BBRX_HOOK_KPROBE,
		.verify = bbrx_delack_verify,
		.kp = &bbrx_delack_kp,
		/* an int3 per >= MSS PSH segment host-wide: not at policy 0 */
		.lazy = true,
	},
};

/* Each hook's name in the status file and the module parameters. */
static const char * const bbrx_hook_names[BBRX_HOOK_MAX] = {
#define BBRX_HOOK(id, name) name,
#include "bbrx_hooks.h"
};

/* "autocork, tsq, ..., delack, ": the hook names, for an error message. */
static const char bbrx_hooks_known[] = {
#define BBRX_HOOK(id, name) name ", "
#include "bbrx_hooks.h"
};

/* The name of a table row, for messages. */
static const char *bbrx_hook_str(const struct bbrx_hook *h)
{
	return bbrx_hook_names[h - bbrx_hooks];
}

static const char * const bbrx_hook_state_names[] = {
	[BBRX_HOOK_NEW] = "not-installed",
	[BBRX_HOOK_INSTALLED] = "installed",
	[BBRX_HOOK_REFUSED] = "refused",
	[BBRX_HOOK_DISABLED] = "disabled",
};

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
static unsigned long bbrx_disable_mask;
static unsigned long bbrx_fault_mask;
static unsigned long bbrx_fault_calls_mask;

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

static bool bbrx_ftrace_off(void)
{
	return bbrx_ftrace_enabled && !READ_ONCE(*bbrx_ftrace_enabled);
}

/* Serialises policy writes that change how many netns need a hook. */
static DEFINE_MUTEX(bbrx_hook_mutex);

/*
 * Why an installed hook does not act right now, from the live state of
 * ftrace and kprobes (not from install time), or NULL when it does.
 */
static const char *bbrx_hook_inactive(const struct bbrx_hook *h)
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
	const struct bbrx_hook *h = &bbrx_hooks[id];

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
		struct bbrx_hook *h = &bbrx_hooks[id];
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

/* kallsyms_lookup_name() is not exported since 5.7; found once at load. */
static unsigned long (*bbrx_kallsyms_lookup_name)(const char *name);

/* For bbrx_hook_walk(): the kernel's own decoder and symbol sizes. */
static int (*bbrx_insn_decode)(struct insn *insn, const void *kaddr,
			       int buf_len, enum insn_mode m);
static int (*bbrx_kallsyms_size)(unsigned long addr, unsigned long *symbolsize,
				 unsigned long *offset);

/*
 * Kernel functions a redirect's replacement may call (bbrx_hook_calls_check()),
 * none of which can block, on PREEMPT_RT either:
 *   __rcu_read_lock, __rcu_read_unlock  preemptible RCU's read side (a
 *	per-task counter; the unlock's slow path takes raw spinlocks only)
 *   ktime_get                          a seqcount retry loop, no lock
 *   rcu_is_watching                    reads a per-cpu counter
 * on debug kernels also the instrumentation the compiler adds to our code,
 * none of which sleeps (make check-debug):
 *   lockdep (PROVE_LOCKING/PROVE_RCU): debug_lockdep_rcu_enabled,
 *	lock_acquire, lock_release, rcu_read_lock_held, lockdep_rcu_suspicious
 *	(irqs off, lockdep's raw lock)
 *   KASAN: __kasan_check_read/write and __asan_report_*_noabort (a shadow
 *	lookup; a report prints under a raw spinlock and returns)
 * and module functions (bbrx_stats_late(), helpers the compiler did not
 * inline), which are decoded and checked in turn, except bbrx_trace_hook():
 * it only fires a tracepoint, whose probes run with preemption disabled
 * and whose call site the kernel re-targets at run time (trace.c).
 */
static const char * const bbrx_leaf_calls[] = {
	"__rcu_read_lock", "__rcu_read_unlock", "ktime_get", "rcu_is_watching",
	"debug_lockdep_rcu_enabled", "lock_acquire", "lock_release",
	"rcu_read_lock_held", "lockdep_rcu_suspicious",
	"__kasan_check_read", "__kasan_check_write",
	"__asan_report_load1_noabort", "__asan_report_load2_noabort",
	"__asan_report_load4_noabort", "__asan_report_load8_noabort",
	"__asan_report_load16_noabort", "__asan_report_load_n_noabort",
	"__asan_report_store1_noabort", "__asan_report_store2_noabort",
	"__asan_report_store4_noabort", "__asan_report_store8_noabort",
	"__asan_report_store16_noabort", "__asan_report_store_n_noabort",
};

static unsigned long bbrx_leaf_addr[ARRAY_SIZE(bbrx_leaf_calls)];

/*
 * The kprobe API resolves names for us. Only kallsyms_lookup_name() itself
 * is probed (briefly, with no handlers): never a hot TCP function while
 * traffic runs through it.
 */
static int bbrx_hook_resolver_init(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long addr;
	int err, i;

	err = register_kprobe(&kp);
	if (err < 0)
		return err;
	unregister_kprobe(&kp);
	addr = bbrx_kprobe_func_start((unsigned long)kp.addr);
	if (!bbrx_indirect_call_ok(addr))
		return -ENOEXEC;
	bbrx_kallsyms_lookup_name = (void *)addr;

	BUILD_BUG_ON(!__same_type(&insn_decode, bbrx_insn_decode));
	BUILD_BUG_ON(!__same_type(&kallsyms_lookup_size_offset,
				  bbrx_kallsyms_size));
	bbrx_insn_decode = (void *)bbrx_hook_resolve("insn_decode");
	if (bbrx_insn_decode && !bbrx_indirect_call_ok((unsigned long)bbrx_insn_decode))
		bbrx_insn_decode = NULL;
	bbrx_kallsyms_size = (void *)bbrx_hook_resolve("kallsyms_lookup_size_offset");
	if (bbrx_kallsyms_size && !bbrx_indirect_call_ok((unsigned long)bbrx_kallsyms_size))
		bbrx_kallsyms_size = NULL;

	for (i = 0; i < ARRAY_SIZE(bbrx_leaf_calls); i++)
		bbrx_leaf_addr[i] = bbrx_hook_resolve(bbrx_leaf_calls[i]);

	bbrx_ftrace_enabled = (void *)bbrx_hook_resolve("ftrace_enabled");
	bbrx_ftrace_dead = (void *)bbrx_hook_resolve("ftrace_disabled");
	bbrx_kprobes_all_disarmed = (void *)bbrx_hook_resolve("kprobes_all_disarmed");
	if (!bbrx_ftrace_enabled || !bbrx_ftrace_dead || !bbrx_kprobes_all_disarmed)
		pr_warn("bbrx: ftrace/kprobes switches not found (CONFIG_KALLSYMS_ALL?): /proc/net/bbrx_hooks cannot tell when other tools turn them off\n");
	return 0;
}

/**
 * bbrx_hook_resolve() - address of a kernel symbol, exported or not
 * @symbol: exact kallsyms name (local names with suffixes, e.g. ".isra.0")
 *
 * Return: the address, or 0 if the symbol does not exist or no resolver.
 */
unsigned long bbrx_hook_resolve(const char *symbol)
{
	if (!bbrx_kallsyms_lookup_name)
		return 0;
	return bbrx_kallsyms_lookup_name(symbol);
}

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
		h->fops.func = bbrx_hook_entry_thunk;
		h->fops.flags = FTRACE_OPS_FL_SAVE_REGS;
		break;
	case BBRX_HOOK_REDIRECT:
		h->fops.func = bbrx_hook_thunk;
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
	bbrx_verify_selftest();
	for (i = 0; i < BBRX_HOOK_MAX; i++)
		bbrx_hook_install(&bbrx_hooks[i], i);
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
		struct bbrx_hook *h = &bbrx_hooks[i];

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
		const struct bbrx_hook *h = &bbrx_hooks[i];
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

/**
 * bbrx_hook_find() - find a byte pattern in kernel text
 * @addr: function address
 * @start: first offset searched, bytes
 * @end: offset where the search stops (the pattern lies before it), bytes
 * @pat: expected bytes
 * @len: pattern length, at most 32
 * @fault: expect a deliberately wrong pattern (fault_verify)
 *
 * For verifiers that must find one instruction in a function whose layout
 * varies between builds (the PSH branch of an inlined helper, for example).
 *
 * Return: the offset of the only occurrence, -ENOENT if none, -E2BIG if more
 * than one (the hook cannot know which one it would act on), -EFAULT if the
 * text is unreadable.
 */
long bbrx_hook_find(unsigned long addr, size_t start, size_t end,
		    const u8 *pat, size_t len, bool fault)
{
	u8 text[64];
	long found = -ENOENT;
	size_t off, i;

	if (WARN_ON_ONCE(len > 32 || !len))
		return -EINVAL;
	if (fault)
		return -ENOENT;	/* what a different build would show */
	/* Windows of 64 bytes overlapping by len - 1. */
	for (off = start; off + len <= end; off += sizeof(text) - (len - 1)) {
		size_t n = min(sizeof(text), end - off);

		if (copy_from_kernel_nofault(text, (void *)(addr + off), n))
			return -EFAULT;
		for (i = 0; i + len <= n; i++) {
			if (memcmp(text + i, pat, len))
				continue;
			if (found >= 0 && found != off + i)
				return -E2BIG;
			found = off + i;
		}
	}
	return found;
}

/**
 * bbrx_hook_fentry() - does a function start with its ftrace site?
 * @addr: function address
 * @fault: expect a deliberately wrong pattern (fault_verify)
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * The site (after ENDBR64 on IBT kernels) is "call __fentry__" while traced
 * and the 5-byte NOP ftrace writes over it otherwise; either means the compiler kept the function
 * whole (not a clone with another ABI) and ftrace manages its entry.
 *
 * Return: 0, or -ENOEXEC (-EFAULT if unreadable) with @reason.
 */
int bbrx_hook_fentry(unsigned long addr, bool fault, char *reason,
		     size_t rlen)
{
	static const u8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	u8 text[sizeof(nop5)];

	addr += bbrx_endbr_len(addr);
	if (copy_from_kernel_nofault(text, (void *)addr, sizeof(text))) {
		snprintf(reason, rlen, "entry unreadable");
		return -EFAULT;
	}
	if (fault)
		text[0] ^= 0xff;
	if (text[0] == 0xe8 || !memcmp(text, nop5, sizeof(nop5)))
		return 0;
	snprintf(reason, rlen, "no ftrace site at entry (%*ph)",
		 (int)sizeof(text), text);
	return -ENOEXEC;
}

static u8 bbrx_insn_rex(const struct insn *insn)
{
	return insn->rex_prefix.nbytes == 1 ? insn->rex_prefix.bytes[0] : 0;
}

/**
 * bbrx_insn_plain() - an instruction the register helpers describe fully?
 * @insn: a decoded instruction
 *
 * Legacy prefixes (segment, operand or address size, lock, rep), VEX/EVEX
 * and REX2 change what the ModRM fields mean (another segment, 16-bit
 * operands, registers 16-31): a verifier treats such an instruction as
 * unknown.
 *
 * Return: true with at most a one-byte REX prefix.
 */
bool bbrx_insn_plain(const struct insn *insn)
{
	return !insn->prefixes.nbytes && !insn->vex_prefix.nbytes &&
	       insn->rex_prefix.nbytes <= 1;
}

/**
 * bbrx_insn_reg() - the register in an instruction's ModRM reg field
 * @insn: a decoded instruction with a ModRM byte
 *
 * Return: 0-15 in x86 numbering (rax 0 .. rdi 7, r8 8 .. r15 15), REX.R
 * included.
 */
int bbrx_insn_reg(const struct insn *insn)
{
	return X86_MODRM_REG(insn->modrm.value) +
	       (X86_REX_R(bbrx_insn_rex(insn)) ? 8 : 0);
}

/**
 * bbrx_insn_rm() - the register in an instruction's ModRM rm field
 * @insn: a decoded instruction with a ModRM byte, mod 3 (register form)
 *
 * Return: 0-15, REX.B included.
 */
int bbrx_insn_rm(const struct insn *insn)
{
	return X86_MODRM_RM(insn->modrm.value) +
	       (X86_REX_B(bbrx_insn_rex(insn)) ? 8 : 0);
}

/**
 * bbrx_insn_wide() - does the instruction operate on 64 bits (REX.W)?
 * @insn: a decoded instruction
 *
 * Return: true with REX.W.
 */
bool bbrx_insn_wide(const struct insn *insn)
{
	return X86_REX_W(bbrx_insn_rex(insn));
}

/**
 * bbrx_insn_mem_base() - the base register of a "disp(%reg)" operand
 * @insn: a decoded instruction with a ModRM byte
 *
 * Only the form a field access takes: a base register and an 8- or 32-bit
 * displacement (insn->displacement), no index, not RIP-relative; the SIB
 * byte %rsp and %r12 need is allowed when it names no index.
 *
 * Return: 0-15, or -1 for any other operand.
 */
int bbrx_insn_mem_base(const struct insn *insn)
{
	const u8 mod = X86_MODRM_MOD(insn->modrm.value);
	const u8 rex = bbrx_insn_rex(insn);
	u8 base = X86_MODRM_RM(insn->modrm.value);

	if (mod != 1 && mod != 2)
		return -1;
	if (base == 4) {
		u8 sib = insn->sib.value;

		/* index 4 without REX.X means none */
		if (X86_SIB_INDEX(sib) != 4 || X86_REX_X(rex))
			return -1;
		base = X86_SIB_BASE(sib);
	}
	return base + (X86_REX_B(rex) ? 8 : 0);
}

/**
 * bbrx_insn_reg_name() - a register's AT&T name, for refusal reasons
 * @reg: 0-15
 *
 * Return: "rax" .. "r15", or "?" out of range.
 */
const char *bbrx_insn_reg_name(int reg)
{
	static const char * const names[] = {
		"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
	};

	return reg >= 0 && reg < ARRAY_SIZE(names) ? names[reg] : "?";
}

/**
 * bbrx_insn_reg_value() - a register's value in a kprobe's saved registers
 * @regs: the registers at the probed instruction
 * @reg: 0-15, as a verifier found it with the helpers above
 *
 * Return: the register's content (0 for an invalid @reg).
 */
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg)
{
	switch (reg) {
	case 0: return regs->ax;
	case 1: return regs->cx;
	case 2: return regs->dx;
	case 3: return regs->bx;
	case 4: return regs->sp;
	case 5: return regs->bp;
	case 6: return regs->si;
	case 7: return regs->di;
	case 8: return regs->r8;
	case 9: return regs->r9;
	case 10: return regs->r10;
	case 11: return regs->r11;
	case 12: return regs->r12;
	case 13: return regs->r13;
	case 14: return regs->r14;
	case 15: return regs->r15;
	}
	return 0;
}

/**
 * bbrx_hook_walk_buf() - decode a run of instructions, one by one
 * @buf: the instructions (kernel text, or a copy)
 * @size: bytes to decode
 * @fn: called for each instruction with its offset in bytes; a non-zero
 *	return stops the walk
 * @ctx: passed to @fn
 * @reason: set to why the walk failed
 * @rlen: size of @reason
 *
 * Decodes with the kernel's own insn_decode(), so a verifier can look for
 * what instructions do (operands, registers) rather than for their bytes,
 * which the compiler's register choice changes between builds.
 *
 * Return: 0 after the last instruction, @fn's non-zero return, -ENOENT
 * without the decoder, -ENOEXEC when the bytes do not decode (@reason set
 * for both).
 */
int bbrx_hook_walk_buf(const u8 *buf, size_t size,
		       int (*fn)(const struct insn *insn, size_t off, void *ctx),
		       void *ctx, char *reason, size_t rlen)
{
	size_t pos;
	int ret;

	if (!bbrx_insn_decode) {
		snprintf(reason, rlen, "insn_decode not found");
		return -ENOENT;
	}
	for (pos = 0; pos < size; ) {
		struct insn insn;

		if (bbrx_insn_decode(&insn, buf + pos,
				     min_t(size_t, MAX_INSN_SIZE, size - pos),
				     INSN_MODE_KERN) < 0 || !insn.length) {
			snprintf(reason, rlen, "text at +%#zx does not decode", pos);
			return -ENOEXEC;
		}
		ret = fn(&insn, pos, ctx);
		if (ret)
			return ret;
		pos += insn.length;
	}
	return 0;
}

/**
 * bbrx_hook_func_size() - a kernel function's size
 * @addr: the function's address
 *
 * Return: its size in bytes from kallsyms, 0 when unknown or when @addr is
 * not the start of a symbol.
 */
size_t bbrx_hook_func_size(unsigned long addr)
{
	unsigned long size, soff;

	if (!bbrx_kallsyms_size || !bbrx_kallsyms_size(addr, &size, &soff) ||
	    soff)
		return 0;
	return size;
}

/**
 * bbrx_hook_walk() - decode a whole kernel function, instruction by instruction
 * @addr: function address (its size from bbrx_hook_func_size())
 * @fn: as for bbrx_hook_walk_buf()
 * @ctx: passed to @fn
 * @reason: set to why the walk failed
 * @rlen: size of @reason
 *
 * Return: as bbrx_hook_walk_buf(); -ENOENT also when the size is unknown.
 */
int bbrx_hook_walk(unsigned long addr,
		   int (*fn)(const struct insn *insn, size_t off, void *ctx),
		   void *ctx, char *reason, size_t rlen)
{
	size_t size = bbrx_hook_func_size(addr);

	if (!size) {
		snprintf(reason, rlen, "the function size not found");
		return -ENOENT;
	}
	return bbrx_hook_walk_buf((const u8 *)addr, size, fn, ctx, reason, rlen);
}

/* Relative branch (jcc, jmp, loop/jcxz): its target offset, else -1. */
static long bbrx_insn_branch_target(const struct insn *insn, size_t off)
{
	const u8 op = insn->opcode.bytes[0];
	bool rel = (op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3) ||
		   op == 0xe9 || op == 0xeb ||
		   (op == 0x0f && insn->opcode.nbytes == 2 &&
		    (insn->opcode.bytes[1] & 0xf0) == 0x80);

	if (!rel)
		return -1;
	return off + insn->length + insn->immediate.value;
}

/* Is this a jmp, ret, int3 or ud2, after which control cannot continue? */
static bool bbrx_insn_ends_flow(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];

	return op == 0xe9 || op == 0xeb || op == 0xc3 || op == 0xc2 ||
	       op == 0xcc ||
	       (op == 0x0f && insn->opcode.nbytes == 2 &&
		insn->opcode.bytes[1] == 0x0b);		/* ud2 */
}

/* jmp *r/m (ff /4, /5): a jump table or tail call through a register. */
static bool bbrx_insn_indirect_jmp(const struct insn *insn)
{
	return insn->opcode.bytes[0] == 0xff &&
	       (X86_MODRM_REG(insn->modrm.value) == 4 ||
		X86_MODRM_REG(insn->modrm.value) == 5);
}

/* bbrx_hook_sole_entry()'s walk: the ways into @off seen so far. */
struct bbrx_sole_entry {
	size_t off, from, prev;
	bool prev_ends;
	int n;
	char *reason;
	size_t rlen;
};

static int bbrx_sole_entry_step(const struct insn *insn, size_t pos, void *ctx)
{
	struct bbrx_sole_entry *se = ctx;

	if (bbrx_insn_indirect_jmp(insn)) {
		snprintf(se->reason, se->rlen, "indirect jmp at +%#zx", pos);
		return -ENOEXEC;
	}
	if (pos + insn->length == se->off) {
		se->prev = pos;
		se->prev_ends = bbrx_insn_ends_flow(insn);
	}
	if (bbrx_insn_branch_target(insn, pos) == se->off) {
		if (pos != se->from) {
			snprintf(se->reason, se->rlen,
				 "+%#zx is also reached from +%#zx", se->off, pos);
			return -ENOEXEC;
		}
		se->n++;
	}
	return 0;
}

/**
 * bbrx_hook_sole_entry() - is an instruction reached from one place only?
 * @addr: function address
 * @off: offset of the instruction, bytes
 * @from: offset of the conditional branch that must be its only way in,
 *	bytes: either jumping to @off, or right before it and falling through
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * For a hook that changes what one instruction does for one condition: it
 * must not also change it for another path merged into the same
 * instruction. Decodes the whole function (size from kallsyms) with the
 * kernel's own x86 decoder, insn_decode(), and checks that @off is an
 * instruction boundary, that its ways in (relative branches to it, and
 * falling through from the instruction before unless that is a jmp, ret,
 * int3 or ud2) are exactly one, from @from, and that the function has no
 * indirect jmp (a jump table could reach any instruction).
 *
 * Return: 0; -ENOENT when the decoder or the size cannot be found,
 * -ENOEXEC when the check fails or the text does not decode; @reason says
 * why.
 */
int bbrx_hook_sole_entry(unsigned long addr, size_t off, size_t from,
			 char *reason, size_t rlen)
{
	struct bbrx_sole_entry se = {
		.off = off, .from = from, .reason = reason, .rlen = rlen,
	};
	int err;

	err = bbrx_hook_walk(addr, bbrx_sole_entry_step, &se, reason, rlen);
	if (err)
		return err;
	if (!se.prev) {
		snprintf(reason, rlen, "+%#zx is not an instruction boundary", off);
		return -ENOEXEC;
	}
	/* Falling through from the instruction before is a way in too. */
	if (!se.prev_ends) {
		if (se.prev != from) {
			snprintf(reason, rlen,
				 "+%#zx is also reached by falling through from +%#zx",
				 off, se.prev);
			return -ENOEXEC;
		}
		se.n++;
	}
	if (se.n != 1) {
		snprintf(reason, rlen, "+%#zx is not reached from +%#zx", off, from);
		return -ENOEXEC;
	}
	return 0;
}

/* Is a direct call to @target one to a kernel function known not to block? */
static bool bbrx_leaf_call(unsigned long target)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bbrx_leaf_addr); i++)
		if (bbrx_leaf_addr[i] && target <= bbrx_leaf_addr[i] &&
		    bbrx_leaf_addr[i] - target <= BBRX_CALL_PAD)
			return true;
	return false;
}

/* A call to bbrx_trace_hook() (or its call-thunk padding)? */
static bool bbrx_trace_call(unsigned long target)
{
	unsigned long fn = (unsigned long)bbrx_trace_hook;

	return target <= fn && fn - target <= BBRX_CALL_PAD;
}

/* Module functions a replacement calls are checked in turn, this deep. */
#define BBRX_CALLS_DEPTH	4

static int bbrx_calls_check(unsigned long addr, int depth, bool fault,
			    char *reason, size_t rlen)
{
	unsigned long size, soff;
	size_t pos, site = bbrx_endbr_len(addr);
	int err;

	if (!bbrx_insn_decode || !bbrx_kallsyms_size ||
	    !bbrx_kallsyms_size(addr, &size, &soff)) {
		snprintf(reason, rlen, "%ps: insn_decode or its size not found",
			 (void *)addr);
		return -ENOENT;
	}
	/* A call into a function's padding (call thunks): the function. */
	if (soff && size - soff <= BBRX_CALL_PAD) {
		addr += size - soff;
		site = bbrx_endbr_len(addr);
		if (!bbrx_kallsyms_size(addr, &size, &soff))
			soff = 1;
	}
	if (soff) {
		snprintf(reason, rlen, "%ps is not a function start", (void *)addr);
		return -ENOEXEC;
	}
	for (pos = 0; pos < size; ) {
		struct insn insn;
		unsigned long target;
		u8 op;

		if (bbrx_insn_decode(&insn, (void *)(addr + pos),
				     min_t(unsigned long, MAX_INSN_SIZE, size - pos),
				     INSN_MODE_KERN) < 0 || !insn.length) {
			snprintf(reason, rlen, "%ps+%#zx does not decode",
				 (void *)addr, pos);
			return -ENOEXEC;
		}
		op = insn.opcode.bytes[0];
		if (op == 0xff && (X86_MODRM_REG(insn.modrm.value) == 2 ||
				   X86_MODRM_REG(insn.modrm.value) == 3)) {
			snprintf(reason, rlen,
				 "%ps+%#zx: indirect call (may block on RT)",
				 (void *)addr, pos);
			return -ENOEXEC;
		}
		if (op == 0xe8 && pos != site) {
			target = addr + pos + insn.length + insn.immediate.value;
			if (!fault && bbrx_trace_call(target)) {
				/* a tracepoint: preemption off (trace.c) */
			} else if (!fault && within_module(target, THIS_MODULE) &&
				   depth < BBRX_CALLS_DEPTH) {
				err = bbrx_calls_check(target, depth + 1, fault,
						       reason, rlen);
				if (err)
					return err;
			} else if (fault || !bbrx_leaf_call(target)) {
				snprintf(reason, rlen,
					 "%ps+%#zx calls %ps (may block on RT)",
					 (void *)addr, pos, (void *)target);
				return -ENOEXEC;
			}
		}
		pos += insn.length;
	}
	return 0;
}

/**
 * bbrx_hook_calls_check() - can a replacement block with its frame live?
 * @addr: the replacement (module text)
 * @fault: test only: allow no call at all, so that the check refuses
 * @reason: set to why not
 * @rlen: size of @reason
 *
 * synchronize_rcu_tasks() counts a blocked task as quiescent, and on
 * PREEMPT_RT every spinlock_t can block: a replacement that called into the
 * kernel's transmit path (qdisc and driver locks) and returned afterwards
 * would leave a return address into module text that rmmod may free.
 * Decodes the replacement's live text (after the kernel applied
 * alternatives, retpolines and call thunks) with insn_decode() and refuses
 * it if it has an indirect call (call *reg, or a call into a retpoline
 * thunk) or a direct call to anything but the kernel functions of
 * bbrx_leaf_calls[] and module functions that pass the same check (up to
 * BBRX_CALLS_DEPTH deep). The compiler ends the autocork replacement with a
 * tail jump to __tcp_push_pending_frames(); this is what proves it. Each
 * function's ftrace site is skipped (a NOP unless someone traces it).
 *
 * Return: 0 if it cannot block with its frame on the stack; -ENOENT when
 * the decoder or a size cannot be found, -ENOEXEC otherwise; @reason says
 * why.
 */
int bbrx_hook_calls_check(unsigned long addr, bool fault, char *reason,
			  size_t rlen)
{
	return bbrx_calls_check(addr, 0, fault, reason, rlen);
}
