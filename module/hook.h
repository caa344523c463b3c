/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A hook's row: each hook's own file defines it as struct bbrx_hook
 * bbrx_hook_NAME (NAME as in bbrx_hooks.h) with what the hook is, the
 * first block of fields below; hook.c (the table, its parameters and the
 * arming of lazy hooks) and hook_install.c (install, removal and the
 * status file) keep the rest. Included by those and the hook files only.
 */
#ifndef _BBRX_HOOK_H
#define _BBRX_HOOK_H

#include <linux/ftrace.h>
#include <linux/types.h>

#include "bbrx.h"
#include "hook_arch.h"

struct kprobe;
struct seq_file;

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

/*
 * The rows, bbrx_hook_NAME each (one declaration: the list is declarators),
 * and the table of pointers to them by enum bbrx_hook_id (hook.c).
 */
extern struct bbrx_hook
#define BBRX_HOOK(id, name, pol) bbrx_hook_##name,
#include "bbrx_hooks.h"
	*const bbrx_hooks[BBRX_HOOK_MAX];
/* BIT(hook id) of the disable= and fault_calls= module parameters */
extern unsigned long bbrx_disable_mask;
extern unsigned long bbrx_fault_calls_mask;

const char *bbrx_hook_str(const struct bbrx_hook *h);
/* resolve.c */
int bbrx_hook_resolver_init(void);
unsigned long bbrx_hook_resolve(const char *symbol);
void bbrx_hook_switches_init(void);
bool bbrx_ftrace_off(void);
const char *bbrx_hook_inactive(const struct bbrx_hook *h);

#endif /* _BBRX_HOOK_H */
