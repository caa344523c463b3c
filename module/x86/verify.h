/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading x86-64 kernel text for the hook verifiers (verify.c): pattern
 * and ftrace-site checks, the decoder walk and its register helpers, and
 * the parts of each hook's verifier that verify_selftest.c feeds known
 * code. Included by the files of this directory only.
 */
#ifndef _BBRX_VERIFY_H
#define _BBRX_VERIFY_H

#include <linux/types.h>
#include <asm/insn.h>

struct insn;

int bbrx_hook_fentry(unsigned long addr, bool fault, char *reason,
		     size_t rlen);
long bbrx_hook_find(unsigned long addr, size_t start, size_t end,
		    const u8 *pat, size_t len, bool fault);
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

/* autocork_verify.c: its parts, for verify_selftest.c */
/* The fields of sk (and tcp_sock) bbrx's tcp_push uses. */
enum {
	BBRX_AC_SK_TAIL, BBRX_AC_SK_QUEUE, BBRX_AC_SK_NET, BBRX_AC_SK_RTX,
	BBRX_AC_SK_WMEM, BBRX_AC_SK_TSQ, BBRX_AC_SK_WSEQ, BBRX_AC_SK_PUSHED,
	BBRX_AC_SK_MAXWIN, BBRX_AC_SK_UP, BBRX_AC_SK_FIELDS
};

/* This build's offsets (bytes) and constants bbrx's tcp_push uses. */
struct bbrx_autocork_shape {
	u32 sk[BBRX_AC_SK_FIELDS];
	u32 skb_flags, skb_len, skb_truesize, skb_eor;
	u8 eor_bit;
	u32 net_sysctl, net_mib, mib_idx;
};

/* What bbrx_autocork_body() must find in tcp_push(). */
enum bbrx_ac_fact {
	BBRX_AC_TAIL, BBRX_AC_MORE, BBRX_AC_PSH, BBRX_AC_WSEQ, BBRX_AC_PUSHED,
	BBRX_AC_MAXWIN, BBRX_AC_OOB, BBRX_AC_URG, BBRX_AC_LEN, BBRX_AC_SYSCTL,
	BBRX_AC_RTX, BBRX_AC_WMEM, BBRX_AC_TRUESIZE, BBRX_AC_EOR,
	BBRX_AC_TSQ_TEST, BBRX_AC_TSQ_SET, BBRX_AC_MIB, BBRX_AC_CORK,
	BBRX_AC_PUSH, BBRX_AC_FACTS
};

struct bbrx_autocork_found {
	long at[BBRX_AC_FACTS];		/* each fact's offset, bytes */
};

void bbrx_autocork_shape(struct bbrx_autocork_shape *sh, bool fault);
int bbrx_autocork_body(const u8 *text, size_t size, unsigned long addr,
		       unsigned long push, const struct bbrx_autocork_shape *sh,
		       struct bbrx_autocork_found *found, char *reason, size_t len);

/* tsq_verify.c: its parts, for verify_selftest.c */
int bbrx_tsq_prologue(const u8 *text, size_t size, size_t start, u32 off,
		      char *reason, size_t len);
/* The prologue is followed this far; a copy of it has an insn to spare. */
#define BBRX_TSQ_SCAN	64
#define BBRX_TSQ_TEXT	(BBRX_TSQ_SCAN + MAX_INSN_SIZE)

/* rcvbuf_verify.c: its parts, for verify_selftest.c */
/* What bbrx_rcvbuf_init_transfer() relies on tcp_init_transfer() to do. */
enum bbrx_rb_fact {
	RB_RCVBUF_RD, RB_CLAMP_WR, RB_SSTHRESH_WR, RB_SPACE_WR, RB_FACTS
};

int bbrx_rcvbuf_body(const u8 *text, size_t size, unsigned long addr,
		     u32 rcvbuf, long *at, char *reason, size_t len);

/* delack_verify.c: its parts, for verify_selftest.c */
/* Where bbrx_delack_find() found the PUSHED mark and its PSH branch. */
struct bbrx_delack_site {
	long orb, test, branch;		/* offsets, bytes */
	int orb_len, orb_reg, test_reg;	/* registers 0-15 (rax .. r15) */
};

int bbrx_delack_find(const u8 *text, size_t size, u32 pend,
		     struct bbrx_delack_site *site, char *reason, size_t len);

#endif /* _BBRX_VERIFY_H */
