// SPDX-License-Identifier: GPL-2.0
/*
 * The x86-64 verifier of the autocork hook (autocork.c): tcp_push()'s
 * body does what bbrx's replacement does, fact by fact.
 */
#include <linux/kernel.h>
#include <linux/snmp.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* What a register holds while tcp_push() is walked. */
enum bbrx_ac_tag { AC_NONE, AC_SK, AC_SKB, AC_NET, AC_MIB, AC_FLAGS };

static const char * const bbrx_ac_tag_name[] = {
	[AC_SK] = "sk", [AC_SKB] = "skb", [AC_NET] = "net",
};

/* The facts of bbrx_autocork_tcp_push(), in the order tcp_push() has them. */
static const char * const bbrx_ac_fact_name[BBRX_AC_FACTS] = {
	[BBRX_AC_TAIL] = "skb = sk_write_queue.prev",
	[BBRX_AC_MORE] = "flags & MSG_MORE",
	[BBRX_AC_PSH] = "or $TCPHDR_PSH,tcp_flags(skb)",
	[BBRX_AC_WSEQ] = "read of write_seq",
	[BBRX_AC_PUSHED] = "store to pushed_seq",
	[BBRX_AC_MAXWIN] = "read of max_window",
	[BBRX_AC_OOB] = "flags & MSG_OOB",
	[BBRX_AC_URG] = "store to snd_up",
	[BBRX_AC_LEN] = "read of skb->len",
	[BBRX_AC_SYSCTL] = "read of sysctl_tcp_autocorking",
	[BBRX_AC_RTX] = "read of tcp_rtx_queue",
	[BBRX_AC_WMEM] = "two reads of sk_wmem_alloc",
	[BBRX_AC_TRUESIZE] = "read of skb->truesize",
	[BBRX_AC_EOR] = "test of the eor bit",
	[BBRX_AC_TSQ_TEST] = "read of sk_tsq_flags",
	[BBRX_AC_TSQ_SET] = "lock or $TSQF_THROTTLED,sk_tsq_flags",
	[BBRX_AC_MIB] = "inc of LINUX_MIB_TCPAUTOCORKING",
	[BBRX_AC_CORK] = "mov $TCP_NAGLE_CORK",
	[BBRX_AC_PUSH] = "jmp __tcp_push_pending_frames",
};

/**
 * bbrx_autocork_shape() - this build's offsets and constants bbrx's tcp_push uses
 * @sh: filled in, from the headers the module was built with
 * @fault: leave max_window out of the fields tcp_push() may read
 *	(fault_verify), as if the kernel's function read a field ours does not
 */
void bbrx_autocork_shape(struct bbrx_autocork_shape *sh, bool fault)
{
	struct tcp_skb_cb cb;
	const u8 *b = (const u8 *)&cb;
	size_t i;

	memset(sh, 0, sizeof(*sh));
	sh->sk[BBRX_AC_SK_TAIL] = offsetof(struct sock, sk_write_queue) +
				  offsetof(struct sk_buff_head, prev);
	sh->sk[BBRX_AC_SK_QUEUE] = offsetof(struct sock, sk_write_queue);
	sh->sk[BBRX_AC_SK_NET] = offsetof(struct sock, sk_net);
	sh->sk[BBRX_AC_SK_RTX] = offsetof(struct sock, tcp_rtx_queue);
	sh->sk[BBRX_AC_SK_WMEM] = offsetof(struct sock, sk_wmem_alloc);
	sh->sk[BBRX_AC_SK_TSQ] = offsetof(struct sock, sk_tsq_flags);
	sh->sk[BBRX_AC_SK_WSEQ] = offsetof(struct tcp_sock, write_seq);
	sh->sk[BBRX_AC_SK_PUSHED] = offsetof(struct tcp_sock, pushed_seq);
	sh->sk[BBRX_AC_SK_MAXWIN] = fault ? U32_MAX :
				    offsetof(struct tcp_sock, max_window);
	sh->sk[BBRX_AC_SK_UP] = offsetof(struct tcp_sock, snd_up);
	sh->skb_flags = offsetof(struct sk_buff, cb) +
			offsetof(struct tcp_skb_cb, tcp_flags);
	sh->skb_len = offsetof(struct sk_buff, len);
	sh->skb_truesize = offsetof(struct sk_buff, truesize);
	/* eor is a bit field: find its byte and bit by setting it */
	memset(&cb, 0, sizeof(cb));
	cb.eor = 1;
	for (i = 0; i < sizeof(cb); i++) {
		if (b[i]) {
			sh->skb_eor = offsetof(struct sk_buff, cb) + i;
			sh->eor_bit = b[i];
			break;
		}
	}
	sh->net_sysctl = offsetof(struct net, ipv4.sysctl_tcp_autocorking);
	sh->net_mib = offsetof(struct net, mib.net_statistics);
	sh->mib_idx = LINUX_MIB_TCPAUTOCORKING * sizeof(unsigned long);
}

/* bbrx_autocork_body()'s own state. */
struct bbrx_ac_walk {
	const struct bbrx_autocork_shape *sh;
	unsigned long push;		/* the tail call's target */
	int wmem;			/* reads of sk_wmem_alloc so far */
	bool eor_read;			/* any access to the eor bit's byte */
	struct bbrx_autocork_found *found;
};

static void bbrx_ac_fact(struct bbrx_ac_walk *w, enum bbrx_ac_fact f, size_t off)
{
	if (w->found->at[f] < 0)
		w->found->at[f] = off;
}

/* Is @off one of the sk fields bbrx's tcp_push reads or writes? */
static int bbrx_ac_sk_field(const struct bbrx_autocork_shape *sh, u32 off)
{
	int i;

	for (i = 0; i < BBRX_AC_SK_FIELDS; i++)
		if (sh->sk[i] == off)
			return i;
	return -1;
}

/* The fields of sk, the skb and the netns bbrx's tcp_push touches. */
static bool bbrx_ac_field(struct bbrx_body *b, int tag, u32 off)
{
	struct bbrx_ac_walk *w = b->ctx;
	const struct bbrx_autocork_shape *sh = w->sh;

	switch (tag) {
	case AC_SK:
		return bbrx_ac_sk_field(sh, off) >= 0;
	case AC_SKB:
		if (off == sh->skb_eor)
			w->eor_read = true;
		return off == sh->skb_len || off == sh->skb_truesize ||
		       off == sh->skb_flags || off == sh->skb_eor;
	case AC_NET:
		return off == sh->net_sysctl || off == sh->net_mib;
	}
	return false;
}

/* The tail skb, the netns and its MIB, loaded through sk and the netns. */
static u8 bbrx_ac_load(struct bbrx_body *b, int tag, u32 off)
{
	const struct bbrx_autocork_shape *sh = ((struct bbrx_ac_walk *)b->ctx)->sh;

	if (tag == AC_SK && off == sh->sk[BBRX_AC_SK_TAIL])
		return AC_SKB;
	if (tag == AC_SK && off == sh->sk[BBRX_AC_SK_NET])
		return AC_NET;
	if (tag == AC_NET && off == sh->net_mib)
		return AC_MIB;
	return AC_NONE;
}

/* A field of sk: which facts it is. */
static void bbrx_ac_sk_fact(struct bbrx_ac_walk *w, const struct insn *insn,
			    size_t off, int f)
{
	const bool store = bbrx_body_store(insn), lea = insn->opcode.bytes[0] == 0x8d;
	static const s8 read_fact[BBRX_AC_SK_FIELDS] = {
		[BBRX_AC_SK_TAIL] = BBRX_AC_TAIL, [BBRX_AC_SK_QUEUE] = -1,
		[BBRX_AC_SK_NET] = -1, [BBRX_AC_SK_RTX] = BBRX_AC_RTX,
		[BBRX_AC_SK_WMEM] = -1, [BBRX_AC_SK_TSQ] = BBRX_AC_TSQ_TEST,
		[BBRX_AC_SK_WSEQ] = BBRX_AC_WSEQ, [BBRX_AC_SK_PUSHED] = -1,
		[BBRX_AC_SK_MAXWIN] = BBRX_AC_MAXWIN, [BBRX_AC_SK_UP] = -1,
	};

	if (lea)
		return;
	if (store) {
		if (f == BBRX_AC_SK_PUSHED)
			bbrx_ac_fact(w, BBRX_AC_PUSHED, off);
		if (f == BBRX_AC_SK_UP)
			bbrx_ac_fact(w, BBRX_AC_URG, off);
		return;
	}
	/* set_bit(TSQ_THROTTLED): lock orb $TSQF_THROTTLED */
	if (bbrx_body_lock(insn)) {
		if (f == BBRX_AC_SK_TSQ && insn->opcode.bytes[0] == 0x80 &&
		    X86_MODRM_REG(insn->modrm.value) == 1 &&
		    (u8)insn->immediate.value == TSQF_THROTTLED)
			bbrx_ac_fact(w, BBRX_AC_TSQ_SET, off);
		return;
	}
	if (f == BBRX_AC_SK_WMEM && ++w->wmem == 2)
		bbrx_ac_fact(w, BBRX_AC_WMEM, off);
	if (read_fact[f] >= 0)
		bbrx_ac_fact(w, read_fact[f], off);
}

/* flags & MSG_MORE, flags & MSG_OOB: and/test $imm on a copy of flags. */
static void bbrx_ac_flags(struct bbrx_body *b, const struct insn *insn,
			  size_t off)
{
	const u8 op = insn->opcode.bytes[0], ext = X86_MODRM_REG(insn->modrm.value);
	bool reg_form = insn->modrm.nbytes && X86_MODRM_MOD(insn->modrm.value) == 3;
	int r = -1;

	if ((op == 0xa8 || op == 0xa9) && insn->opcode.nbytes == 1)
		r = 0;					/* test $imm,%al/%eax */
	else if (reg_form && (((op == 0x80 || op == 0x81 || op == 0x83) && ext == 4) ||
			      ((op == 0xf6 || op == 0xf7) && ext == 0)))
		r = bbrx_insn_rm(insn);			/* and, test $imm,%reg */
	if (r < 0 || b->tag[r] != AC_FLAGS)
		return;
	if (insn->immediate.value == MSG_MORE)
		bbrx_ac_fact(b->ctx, BBRX_AC_MORE, off);
	if (insn->immediate.value == MSG_OOB)
		bbrx_ac_fact(b->ctx, BBRX_AC_OOB, off);
}

/* Every instruction the walk accepted: the facts of bbrx_ac_fact_name[]. */
static void bbrx_ac_facts(struct bbrx_body *b, const struct insn *insn,
			  size_t off, int base)
{
	struct bbrx_ac_walk *w = b->ctx;
	const struct bbrx_autocork_shape *sh = w->sh;
	const u8 op = insn->opcode.bytes[0], ext = X86_MODRM_REG(insn->modrm.value);
	const u8 imm = insn->immediate.value;
	const u32 disp = insn->displacement.value;
	const bool read = !bbrx_body_store(insn) && op != 0x8d;
	u8 tag = base >= 0 ? b->tag[base] : AC_NONE;

	bbrx_ac_flags(b, insn, off);
	/* mov $TCP_NAGLE_CORK,%reg */
	if (((op >= 0xb8 && op <= 0xbf) || (op == 0xc7 && base < 0)) &&
	    insn->immediate.value == TCP_NAGLE_CORK)
		bbrx_ac_fact(w, BBRX_AC_CORK, off);
	if (base < 0 || insn->displacement.value < 0)
		return;
	if (bbrx_insn_prefix(insn, 0x65)) {
		/* inc %gs:LINUX_MIB_TCPAUTOCORKING*8(mib) */
		if (tag == AC_MIB && op == 0xff && ext == 0 && disp == sh->mib_idx)
			bbrx_ac_fact(w, BBRX_AC_MIB, off);
		return;
	}
	switch (tag) {
	case AC_SK:
		if (bbrx_ac_sk_field(sh, disp) >= 0)
			bbrx_ac_sk_fact(w, insn, off, bbrx_ac_sk_field(sh, disp));
		break;
	case AC_SKB:
		if (disp == sh->skb_len && read)
			bbrx_ac_fact(w, BBRX_AC_LEN, off);
		if (disp == sh->skb_truesize && read)
			bbrx_ac_fact(w, BBRX_AC_TRUESIZE, off);
		/* or $TCPHDR_PSH: orb (80 /1), orw (66 83 /1 or 66 81 /1) */
		if (disp == sh->skb_flags && (op == 0x80 || op == 0x81 || op == 0x83) &&
		    ext == 1 && insn->immediate.value == TCPHDR_PSH)
			bbrx_ac_fact(w, BBRX_AC_PSH, off);
		/* testb $eor_bit */
		if (disp == sh->skb_eor && op == 0xf6 && ext == 0 && imm == sh->eor_bit)
			bbrx_ac_fact(w, BBRX_AC_EOR, off);
		break;
	case AC_NET:
		if (disp == sh->net_sysctl && read)
			bbrx_ac_fact(w, BBRX_AC_SYSCTL, off);
		break;
	}
}

/* The tail call: a branch out to __tcp_push_pending_frames. */
static bool bbrx_ac_exit(struct bbrx_body *b, unsigned long target, size_t off)
{
	struct bbrx_ac_walk *w = b->ctx;

	if (target != w->push)
		return false;
	bbrx_ac_fact(w, BBRX_AC_PUSH, off);
	return true;
}

static const struct bbrx_body_spec bbrx_ac_spec = {
	.fn = "tcp_push",
	.tag_name = bbrx_ac_tag_name,
	.ntags = ARRAY_SIZE(bbrx_ac_tag_name),
	.value_tags = BIT(AC_FLAGS),
	.field = bbrx_ac_field,
	.load = bbrx_ac_load,
	.fact = bbrx_ac_facts,
	.exit_ok = bbrx_ac_exit,
	.percpu_tag = AC_MIB,
};

/**
 * bbrx_autocork_body() - does tcp_push() do what bbrx_autocork_tcp_push() does?
 * @text: the function's instructions
 * @size: bytes in @text
 * @addr: where @text runs (for branch and call targets)
 * @push: the address of __tcp_push_pending_frames
 * @sh: this build's offsets and constants (bbrx_autocork_shape())
 * @found: each fact's offset, filled in
 * @reason: set to why not
 * @len: size of @reason
 *
 * Walks the whole function with bbrx_body_walk(), which follows which
 * registers hold sk (%rdi), the tail skb (loaded from sk_write_queue.prev),
 * the netns (sk_net), its MIB and the flags argument (%esi). Every memory access
 * through sk, the skb or the netns must be to a field bbrx's tcp_push uses
 * too (a kernel whose tcp_push reads another field decides on something
 * ours does not); every fact of bbrx_ac_fact_name[] must be there but the
 * EOR test, which 5.10 lacks (@found tells; the replacement follows), and
 * which may be missing only where nothing touches the eor bit's byte; no
 * call but the ftrace site (and a debug kernel's instrumentation); every
 * branch out of the function goes to __tcp_push_pending_frames or a return
 * thunk.
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the decoder) with @reason.
 */
int bbrx_autocork_body(const u8 *text, size_t size, unsigned long addr,
		       unsigned long push, const struct bbrx_autocork_shape *sh,
		       struct bbrx_autocork_found *found, char *reason, size_t len)
{
	struct bbrx_ac_walk w = { .sh = sh, .push = push, .found = found };
	struct bbrx_body b = {
		.spec = &bbrx_ac_spec, .text = text, .size = size,
		.site = bbrx_endbr_len(addr), .addr = addr, .ctx = &w,
		.reason = reason, .len = len,
	};
	int i, err;

	for (i = 0; i < BBRX_AC_FACTS; i++)
		found->at[i] = -1;
	b.tag[7] = AC_SK;		/* %rdi */
	b.tag[6] = AC_FLAGS;		/* %esi */
	err = bbrx_body_walk(&b);
	if (err)
		return err;
	for (i = 0; i < BBRX_AC_FACTS; i++) {
		/*
		 * 5.10's tcp_should_autocork() has no EOR rule, which the
		 * replacement follows; a body that reads the eor bit's byte
		 * but not with the testb this walk knows is refused.
		 */
		if (found->at[i] < 0 && (i != BBRX_AC_EOR || w.eor_read)) {
			snprintf(reason, len, "tcp_push has no %s",
				 bbrx_ac_fact_name[i]);
			return -ENOEXEC;
		}
	}
	return 0;
}

/**
 * bbrx_autocork_verify() - check tcp_push() is the function we replace
 * @addr: address of tcp_push
 * @reason: why not, on failure
 * @len: size of @reason
 *
 * Both prototypes are checked at build time against the headers the module
 * is built with; __tcp_push_pending_frames() must be found and safe to
 * call through a pointer; then tcp_push()'s body must do what ours does
 * (bbrx_autocork_body()), which a dmesg line reports with each fact's
 * offset.
 *
 * Return: 0 if the hook may be installed, -ENOEXEC or -ENOENT otherwise.
 */
int bbrx_autocork_verify(unsigned long addr, char *reason, size_t len)
{
	struct bbrx_autocork_shape sh;
	struct bbrx_autocork_found found;
	size_t size = bbrx_hook_func_size(addr);
	unsigned long target;
	int err, i, n = 0;
	char line[320];

	/* The pointer takes the headers' prototype. */
	BUILD_BUG_ON(!__same_type(&__tcp_push_pending_frames,
				  bbrx_push_pending_frames));
	BUILD_BUG_ON(TSQ_THROTTLED >= 8);	/* a byte's lock or */

	target = bbrx_hook_resolve("__tcp_push_pending_frames");
	if (!target) {
		snprintf(reason, len, "__tcp_push_pending_frames not found");
		return -ENOENT;
	}
	if (!bbrx_indirect_call_ok(target)) {
		snprintf(reason, len, "__tcp_push_pending_frames has no ENDBR (IBT)");
		return -ENOEXEC;
	}
	if (!size) {
		snprintf(reason, len, "tcp_push's size not found");
		return -ENOENT;
	}
	bbrx_autocork_shape(&sh, bbrx_hook_fault(BBRX_HOOK_AUTOCORK));
	err = bbrx_autocork_body((const u8 *)addr, size, addr, target, &sh,
				 &found, reason, len);
	if (err)
		return err;
	for (i = 0; i < BBRX_AC_FACTS; i++)
		if (found.at[i] >= 0)
			n += scnprintf(line + n, sizeof(line) - n, " %#lx",
				       found.at[i]);
	bbrx_autocork_eor = found.at[BBRX_AC_EOR] >= 0;
	pr_info("bbrx: autocork: tcp_push (%zu bytes) does what bbrx's does%s; facts at%s\n",
		size, bbrx_autocork_eor ? "" :
		" (no EOR rule: it corks onto an skb that ends a record, and so do the policies)",
		line);
	bbrx_push_pending_frames = (void *)target;
	return 0;
}
