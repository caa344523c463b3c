// SPDX-License-Identifier: GPL-2.0
/*
 * The hooks' symbol resolver: kallsyms_lookup_name(), which is not
 * exported since 5.7, found once at load through the kprobe API. Every
 * architecture uses it; what the architecture's verifiers need from the
 * kernel besides is theirs to find (bbrx_verify_init()).
 */
#include <linux/kprobes.h>

#include "compat.h"
#include "hook.h"

static unsigned long (*bbrx_kallsyms_lookup_name)(const char *name);

/**
 * bbrx_hook_resolver_init() - find the kernel's symbol resolver
 *
 * The kprobe API resolves names for us. Only kallsyms_lookup_name() itself
 * is probed (briefly, with no handlers): never a hot TCP function while
 * traffic runs through it. Then the architecture's verifiers find what
 * they call (bbrx_verify_init()). Process context (module load).
 *
 * Return: 0, register_kprobe()'s error, or -ENOEXEC when
 * kallsyms_lookup_name() cannot be called through a pointer (IBT).
 */
int bbrx_hook_resolver_init(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long addr;
	int err;

	err = register_kprobe(&kp);
	if (err < 0)
		return err;
	unregister_kprobe(&kp);
	addr = bbrx_kprobe_func_start((unsigned long)kp.addr);
	if (!bbrx_indirect_call_ok(addr))
		return -ENOEXEC;
	bbrx_kallsyms_lookup_name = (void *)addr;
	bbrx_verify_init();
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
