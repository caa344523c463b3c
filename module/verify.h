/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading kernel text for the hook verifiers (verify.c): the resolver,
 * pattern and ftrace-site checks, the x86 decoder walk and its register
 * helpers. Included by the files that verify a hook, hook.c and
 * hook_install.c.
 */
#ifndef _BBRX_VERIFY_H
#define _BBRX_VERIFY_H

#include <linux/types.h>

struct insn;
struct pt_regs;

int bbrx_hook_resolver_init(void);
unsigned long bbrx_hook_resolve(const char *symbol);
int bbrx_hook_fentry(unsigned long addr, bool fault, char *reason,
		     size_t rlen);
long bbrx_hook_find(unsigned long addr, size_t start, size_t end,
		    const u8 *pat, size_t len, bool fault);
int bbrx_hook_calls_check(unsigned long addr, bool fault, char *reason,
			  size_t rlen);
int bbrx_hook_sole_entry(unsigned long addr, size_t off, size_t from,
			 char *reason, size_t rlen);
int bbrx_hook_walk_buf(const u8 *buf, size_t size,
		       int (*fn)(const struct insn *insn, size_t off, void *ctx),
		       void *ctx, char *reason, size_t rlen);
size_t bbrx_hook_func_size(unsigned long addr);
int bbrx_hook_walk(unsigned long addr,
		   int (*fn)(const struct insn *insn, size_t off, void *ctx),
		   void *ctx, char *reason, size_t rlen);
bool bbrx_hook_leaf_call(unsigned long target);
bool bbrx_hook_ret_thunk(unsigned long target);
int bbrx_insn_dest(const struct insn *insn);
int bbrx_insn_reg(const struct insn *insn);
int bbrx_insn_rm(const struct insn *insn);
bool bbrx_insn_wide(const struct insn *insn);
bool bbrx_insn_plain(const struct insn *insn);
int bbrx_insn_mem_base(const struct insn *insn);
const char *bbrx_insn_reg_name(int reg);
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg);

#endif /* _BBRX_VERIFY_H */
