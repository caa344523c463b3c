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
int bbrx_hook_sized_entry(unsigned long addr, size_t *size, char *reason,
			  size_t rlen);
int bbrx_hook_walk(unsigned long addr,
		   int (*fn)(const struct insn *insn, size_t off, void *ctx),
		   void *ctx, char *reason, size_t rlen);
bool bbrx_hook_leaf_call(unsigned long target);
bool bbrx_hook_ret_thunk(unsigned long target);
int bbrx_insn_dest(const struct insn *insn);
int bbrx_insn_reg(const struct insn *insn);

struct bbrx_body;

/*
 * What a whole-body walk (bbrx_body_walk()) of one kernel function checks:
 * registers carry tags (0: nothing known; the spec's own numbers for a
 * socket, an skb, a netns, ...), which moves copy and loads derive.
 */
struct bbrx_body_spec {
	const char *fn;			/* the function, for reasons */
	const char * const *tag_name;	/* tags whose fields are checked */
	int ntags;			/* entries in tag_name */
	unsigned long value_tags;	/* BIT(tag): kept by a 32-bit move */
	/* may the function touch @off of what a @tag register points to? */
	bool (*field)(struct bbrx_body *b, int tag, u32 off);
	/* the tag of what a 64-bit load of @off through @tag gives (0: none) */
	u8 (*load)(struct bbrx_body *b, int tag, u32 off);
	/* each instruction the walk accepted, to note facts; @base: -1 or
	 * the base register of its memory operand
	 */
	void (*fact)(struct bbrx_body *b, const struct insn *insn, size_t off,
		     int base);
	/* a direct call other than the ftrace site and bbrx_hook_leaf_call() */
	bool (*call_ok)(struct bbrx_body *b, unsigned long target, size_t off);
	/* a branch out of the function, other than to a return thunk */
	bool (*exit_ok)(struct bbrx_body *b, unsigned long target, size_t off);
	bool indirect_calls;		/* call *%reg (a tracepoint's probes) */
	u8 percpu_tag;			/* %gs:disp(%reg) allowed with this tag */
};

/* Forward branches whose targets the walk has not reached yet. */
#define BBRX_BODY_PENDING	24

/* One walk: the text, the registers' tags, the spec's own state. */
struct bbrx_body {
	const struct bbrx_body_spec *spec;
	const u8 *text;
	size_t size, site;		/* bytes; the ftrace site's offset */
	unsigned long addr;		/* where @text runs */
	u8 tag[16];
	bool ended;			/* the last instruction was a jmp or ret */
	int npending;
	struct {
		size_t target;
		u8 tag[16];		/* the tags the branch carries there */
	} pending[BBRX_BODY_PENDING];
	void *ctx;
	char *reason;
	size_t len;
};

int bbrx_body_walk(struct bbrx_body *b);
bool bbrx_insn_prefix(const struct insn *insn, u8 byte);
bool bbrx_body_store(const struct insn *insn);
bool bbrx_body_lock(const struct insn *insn);
bool bbrx_body_named(unsigned long target, const char *prefix);
int bbrx_insn_rm(const struct insn *insn);
bool bbrx_insn_wide(const struct insn *insn);
bool bbrx_insn_plain(const struct insn *insn);
int bbrx_insn_mem_base(const struct insn *insn);
const char *bbrx_insn_reg_name(int reg);
unsigned long bbrx_insn_reg_value(const struct pt_regs *regs, int reg);

#endif /* _BBRX_VERIFY_H */
