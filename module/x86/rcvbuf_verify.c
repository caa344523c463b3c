// SPDX-License-Identifier: GPL-2.0
/*
 * The x86-64 verifiers of the receive-buffer hooks (rcvbuf.c): what
 * tcp_init_transfer() does with sk_rcvbuf, and the growth function's body
 * against the rule bbrx's replacement follows.
 */
#include <linux/kernel.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* What a register holds while the growth function is walked. */
enum { RG_NONE, RG_SK, RG_NET, RG_SKB };

static const char * const bbrx_rg_tag_name[] = {
	[RG_SK] = "sk", [RG_NET] = "net", [RG_SKB] = "skb",
};

/* A write of sk_rcvbuf: must not be found. */
#define RB_RCVBUF_WR	RB_FACTS

static const char * const bbrx_rb_fact_name[RB_FACTS] = {
	[RB_RCVBUF_RD] = "read of sk_rcvbuf (tcp_full_space())",
	[RB_CLAMP_WR] = "store to window_clamp after it",
	[RB_SSTHRESH_WR] = "store to rcv_ssthresh after it",
	[RB_SPACE_WR] = "store to rcvq_space.space after it",
};

/* bbrx_rcvbuf_body()'s own state. */
struct bbrx_rb_walk {
	u32 rcvbuf;		/* sk_rcvbuf's offset (U32_MAX: fault_verify) */
	long at[RB_FACTS + 1];
};

/* Does an instruction with a memory operand only read it? */
static bool bbrx_rb_reads(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0], ext = X86_MODRM_REG(insn->modrm.value);

	if (insn->opcode.nbytes == 2)
		return op == 0x0f && (insn->opcode.bytes[1] & 0xf6) == 0xb6;
	return op == 0x8a || op == 0x8b || op == 0x63 ||	/* mov, movslq */
	       (op < 0x40 && (op & 7) < 4 &&
		((op & 2) || (op & 0x38) == 0x38)) ||		/* op r/m,r; cmp */
	       op == 0x84 || op == 0x85 ||			/* test */
	       ((op == 0x80 || op == 0x81 || op == 0x83) && ext == 7) ||
	       ((op == 0xf6 || op == 0xf7) && ext == 0);
}

static void bbrx_rb_fact(struct bbrx_rb_walk *w, int f, size_t off)
{
	if (w->at[f] < 0)
		w->at[f] = off;
}

static void bbrx_rb_facts(struct bbrx_body *b, const struct insn *insn,
			  size_t off, int base)
{
	struct bbrx_rb_walk *w = b->ctx;
	const bool store = bbrx_body_store(insn);
	u32 disp = insn->displacement.value;

	if (base < 0 || b->tag[base] != RG_SK || insn->displacement.value < 0 ||
	    insn->opcode.bytes[0] == 0x8d || bbrx_insn_prefix(insn, 0x65))
		return;
	if (disp == w->rcvbuf) {
		bbrx_rb_fact(w, bbrx_rb_reads(insn) ? RB_RCVBUF_RD : RB_RCVBUF_WR, off);
		return;
	}
	if (w->at[RB_RCVBUF_RD] < 0 || !store)
		return;
	if (disp == offsetof(struct tcp_sock, window_clamp))
		bbrx_rb_fact(w, RB_CLAMP_WR, off);
	if (disp == offsetof(struct tcp_sock, rcv_ssthresh))
		bbrx_rb_fact(w, RB_SSTHRESH_WR, off);
	if (disp == offsetof(struct tcp_sock, rcvq_space.space))
		bbrx_rb_fact(w, RB_SPACE_WR, off);
}

/* The kernel runs its own tcp_init_transfer(): any call, any exit. */
static bool bbrx_rb_call(struct bbrx_body *b, unsigned long target, size_t off)
{
	return true;
}

static bool bbrx_rb_exit(struct bbrx_body *b, unsigned long target, size_t off)
{
	return true;
}

static const struct bbrx_body_spec bbrx_rb_spec = {
	.fn = "tcp_init_transfer",
	.fact = bbrx_rb_facts,
	.call_ok = bbrx_rb_call,
	.exit_ok = bbrx_rb_exit,
	.indirect_calls = true,
};

/**
 * bbrx_rcvbuf_body() - does tcp_init_transfer() size the window from sk_rcvbuf?
 * @text: the function's instructions
 * @size: bytes in @text
 * @addr: where @text runs
 * @rcvbuf: sk_rcvbuf's offset in the socket (another one: fault_verify)
 * @at: each fact's offset, RB_FACTS entries, filled in
 * @reason: set to why not
 * @len: size of @reason
 *
 * Its inlined tcp_init_buffer_space() must read sk_rcvbuf through the
 * socket (tcp_full_space()) and then store window_clamp, rcv_ssthresh and
 * rcvq_space.space (in text order after the read), and nothing in the
 * function may write sk_rcvbuf (as kernels before 4.19 did in
 * tcp_fixup_rcvbuf(), which would undo or redo bbrx's sizing). The walk
 * (bbrx_body_walk()) follows the socket from %rdi; the function calls and
 * exits as it likes: the kernel runs it, not a replacement.
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the decoder) with @reason.
 */
int bbrx_rcvbuf_body(const u8 *text, size_t size, unsigned long addr,
		     u32 rcvbuf, long *at, char *reason, size_t len)
{
	struct bbrx_rb_walk w = { .rcvbuf = rcvbuf };
	struct bbrx_body b = {
		.spec = &bbrx_rb_spec, .text = text, .size = size,
		.site = bbrx_endbr_len(addr), .addr = addr, .ctx = &w,
		.reason = reason, .len = len,
	};
	int i, err;

	for (i = 0; i <= RB_FACTS; i++)
		w.at[i] = -1;
	b.tag[7] = RG_SK;		/* %rdi */
	err = bbrx_body_walk(&b);
	if (err)
		return err;
	if (w.at[RB_RCVBUF_WR] >= 0) {
		snprintf(reason, len, "tcp_init_transfer+%#lx writes sk_rcvbuf",
			 w.at[RB_RCVBUF_WR]);
		return -ENOEXEC;
	}
	for (i = 0; i < RB_FACTS; i++) {
		if (w.at[i] < 0) {
			snprintf(reason, len, "tcp_init_transfer has no %s",
				 bbrx_rb_fact_name[i]);
			return -ENOEXEC;
		}
		at[i] = w.at[i];
	}
	return 0;
}

/**
 * bbrx_rcvbuf_verify() - check tcp_init_transfer() is the expected function
 * @addr: its address
 * @reason: set to why not
 * @len: size of @reason
 *
 * The prototype is checked at build time against the headers; at run time
 * that ftrace can attach (the function starts with its fentry site) and
 * that its body derives the window from sk_rcvbuf after the entry
 * callback ran (bbrx_rcvbuf_body()).
 *
 * Return: 0, or -ENOEXEC (-ENOENT) with @reason.
 */
int bbrx_rcvbuf_verify(unsigned long addr, char *reason, size_t len)
{
	size_t size;
	long at[RB_FACTS];
	int err;

	err = bbrx_hook_sized_entry(addr, &size, reason, len);
	if (err)
		return err;
	err = bbrx_rcvbuf_body((const u8 *)addr, size, addr,
			       bbrx_hook_fault(BBRX_HOOK_RCVBUF) ? U32_MAX :
			       offsetof(struct sock, sk_rcvbuf), at, reason, len);
	if (err)
		return err;
	pr_info("bbrx: rcvbuf: tcp_init_transfer (%zu bytes) reads sk_rcvbuf at %#lx, then stores window_clamp at %#lx, rcv_ssthresh at %#lx, rcvq_space.space at %#lx\n",
		size, at[RB_RCVBUF_RD], at[RB_CLAMP_WR], at[RB_SSTHRESH_WR],
		at[RB_SPACE_WR]);
	return 0;
}

/* What bbrx_rcvbuf_grow() follows of the kernel's function, each a fact. */
enum bbrx_rg_fact {
	RG_RTT, RG_SPACE_RD, RG_SPACE_WR, RG_MODERATE, RG_LOCK, RG_RMEM,
	RG_RCVBUF_WR, RG_CLAMP_WR, RG_RCV_NXT_OR_SCALE,
#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
	RG_MSTAMP, RG_MSTAMP_RD, RG_TIME_RD, RG_TIME_WR, RG_COPIED, RG_SEQ_RD,
	RG_SEQ_WR, RG_ADVMSS,
#endif
#if defined(BBRX_HAVE_TCP_RCVBUF_GROW) || defined(BBRX_HAVE_TCP_SPACE_FROM_WIN)
	RG_RATIO,
#endif
#ifdef BBRX_HAVE_TCP_RCVBUF_GROW
	RG_LOW_RTT, RG_OOO, RG_END_SEQ,
#endif
	RG_FACTS
};

static const char * const bbrx_rg_fact_name[RG_FACTS] = {
	[RG_RTT] = "read of rcv_rtt_est.rtt_us",
	[RG_SPACE_RD] = "read of rcvq_space.space",
	[RG_SPACE_WR] = "store to rcvq_space.space",
	[RG_MODERATE] = "read of sysctl_tcp_moderate_rcvbuf",
	[RG_LOCK] = "test of SOCK_RCVBUF_LOCK in sk_userlocks",
	[RG_RMEM] = "read of sysctl_tcp_rmem[2]",
	[RG_RCVBUF_WR] = "store to sk_rcvbuf",
	[RG_CLAMP_WR] = "store to window_clamp",
#if defined(BBRX_HAVE_TCP_RCVBUF_GROW) || defined(BBRX_HAVE_TCP_SPACE_FROM_WIN)
	[RG_RCV_NXT_OR_SCALE] = "read of rcv_nxt",
	[RG_RATIO] = "read of scaling_ratio",
#else
	[RG_RCV_NXT_OR_SCALE] = "read of sysctl_tcp_adv_win_scale",
#endif
#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
	[RG_MSTAMP] = "tcp_mstamp refreshed (a call of tcp_mstamp_refresh or a store)",
	[RG_MSTAMP_RD] = "read of tcp_mstamp",
	[RG_TIME_RD] = "read of rcvq_space.time",
	[RG_TIME_WR] = "store to rcvq_space.time",
	[RG_COPIED] = "read of copied_seq",
	[RG_SEQ_RD] = "read of rcvq_space.seq",
	[RG_SEQ_WR] = "store to rcvq_space.seq",
	[RG_ADVMSS] = "read of advmss",
#else
	[RG_LOW_RTT] = "read of sysctl_tcp_rcvbuf_low_rtt",
	[RG_OOO] = "read of out_of_order_queue",
	[RG_END_SEQ] = "read of the last out-of-order skb's end_seq",
#endif
};

/* A field the kernel's function may touch: its facts when read, written. */
struct bbrx_rg_field {
	u8 tag;
	u32 off;
	s8 rd, wr;
};

#define RG_F(t, o, r, w)	{ .tag = (t), .off = (o), .rd = (r), .wr = (w) }
#define RG_SKF(f, r, w)		RG_F(RG_SK, offsetof(struct tcp_sock, f), r, w)
#define RG_NETF(f, r)		RG_F(RG_NET, offsetof(struct net, ipv4.f), r, -1)

/* The fields of this series' function; sk_userlocks is a bit field. */
static const struct bbrx_rg_field bbrx_rg_fields[] = {
	RG_F(RG_SK, offsetof(struct sock, sk_net), -1, -1),
	RG_F(RG_SK, offsetof(struct sock, sk_rcvbuf), -1, RG_RCVBUF_WR),
	RG_SKF(window_clamp, -1, RG_CLAMP_WR),
	RG_SKF(rcvq_space.space, RG_SPACE_RD, RG_SPACE_WR),
	RG_SKF(rcv_rtt_est.rtt_us, RG_RTT, -1),
	RG_NETF(sysctl_tcp_moderate_rcvbuf, RG_MODERATE),
	RG_NETF(sysctl_tcp_rmem[2], RG_RMEM),
#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
	RG_SKF(tcp_mstamp, RG_MSTAMP_RD, RG_MSTAMP),
	RG_SKF(tcp_clock_cache, -1, -1),
	RG_SKF(rcvq_space.time, RG_TIME_RD, RG_TIME_WR),
	RG_SKF(rcvq_space.seq, RG_SEQ_RD, RG_SEQ_WR),
	RG_SKF(copied_seq, RG_COPIED, -1),
	RG_SKF(advmss, RG_ADVMSS, -1),
#endif
#if defined(BBRX_HAVE_TCP_RCVBUF_GROW) || defined(BBRX_HAVE_TCP_SPACE_FROM_WIN)
	RG_SKF(rcv_nxt, RG_RCV_NXT_OR_SCALE, -1),
	RG_SKF(scaling_ratio, RG_RATIO, -1),
#else
	RG_NETF(sysctl_tcp_adv_win_scale, RG_RCV_NXT_OR_SCALE),
#endif
#ifdef BBRX_HAVE_TCP_RCVBUF_LOW_RTT	/* else refused: a misfit */
	RG_NETF(sysctl_tcp_rcvbuf_low_rtt, RG_LOW_RTT),
#endif
#ifdef BBRX_HAVE_TCP_RCVBUF_GROW
	RG_SKF(out_of_order_queue, RG_OOO, -1),
	RG_SKF(ooo_last_skb, -1, -1),
	RG_F(RG_SKB, offsetof(struct sk_buff, cb) + offsetof(struct tcp_skb_cb, end_seq),
	     RG_END_SEQ, -1),
#endif
};

/* bbrx_rcvbuf_grow_body()'s own state. */
struct bbrx_rg_walk {
	u32 locks, space;	/* sk_userlocks' byte; rcvq_space.space (fault) */
	u8 lock_bit;		/* SOCK_RCVBUF_LOCK in that byte */
	long at[RG_FACTS];
};

static const struct bbrx_rg_field *bbrx_rg_field(struct bbrx_body *b, int tag,
						 u32 off)
{
	const struct bbrx_rg_walk *w = b->ctx;
	size_t i;

	if (tag == RG_SK && off == w->space)
		return NULL;	/* fault_verify */
	for (i = 0; i < ARRAY_SIZE(bbrx_rg_fields); i++)
		if (bbrx_rg_fields[i].tag == tag && bbrx_rg_fields[i].off == off)
			return &bbrx_rg_fields[i];
	return NULL;
}

static bool bbrx_rg_known(struct bbrx_body *b, int tag, u32 off)
{
	const struct bbrx_rg_walk *w = b->ctx;

	return bbrx_rg_field(b, tag, off) || (tag == RG_SK && off == w->locks);
}

static u8 bbrx_rg_load(struct bbrx_body *b, int tag, u32 off)
{
	if (tag == RG_SK && off == offsetof(struct sock, sk_net))
		return RG_NET;
#ifdef BBRX_HAVE_TCP_RCVBUF_GROW
	if (tag == RG_SK && off == offsetof(struct tcp_sock, ooo_last_skb))
		return RG_SKB;
#endif
	return RG_NONE;
}

static void bbrx_rg_fact(struct bbrx_rg_walk *w, int f, size_t off)
{
	if (f >= 0 && w->at[f] < 0)
		w->at[f] = off;
}

static void bbrx_rg_facts(struct bbrx_body *b, const struct insn *insn,
			  size_t off, int base)
{
	struct bbrx_rg_walk *w = b->ctx;
	const struct bbrx_rg_field *f;
	u32 disp = insn->displacement.value;
	u8 tag;

	if (base < 0 || insn->displacement.value < 0 ||
	    insn->opcode.bytes[0] == 0x8d)
		return;
	tag = b->tag[base];
	/* testb $SOCK_RCVBUF_LOCK,sk_userlocks */
	if (tag == RG_SK && disp == w->locks && insn->opcode.bytes[0] == 0xf6 &&
	    X86_MODRM_REG(insn->modrm.value) == 0 &&
	    (u8)insn->immediate.value == w->lock_bit)
		bbrx_rg_fact(w, RG_LOCK, off);
	f = bbrx_rg_field(b, tag, disp);
	if (f)
		bbrx_rg_fact(w, bbrx_body_store(insn) ? f->wr : f->rd, off);
}

#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
/*
 * tcp_mstamp_refresh(), and the tracepoint's calls: its static call (the
 * kernel points it at the probe: an event, perf or BPF) and the
 * preemption point after it.
 */
static bool bbrx_rg_call(struct bbrx_body *b, unsigned long target, size_t off)
{
	static const char * const probes[] = {
		"__SCT__", "__traceiter_", "trace_event_raw_event_", "perf_trace_",
		"__bpf_trace_", "bpf_trace_run", "preempt_schedule",
	};
	size_t i;

	if (bbrx_body_named(target, "tcp_mstamp_refresh")) {
		bbrx_rg_fact(b->ctx, RG_MSTAMP, off);
		return true;
	}
	for (i = 0; i < ARRAY_SIZE(probes); i++)
		if (bbrx_body_named(target, probes[i]))
			return true;
	return false;
}
#endif

static const struct bbrx_body_spec bbrx_rg_spec = {
	.fn = BBRX_RCVBUF_GROW_SYMBOL,
	.tag_name = bbrx_rg_tag_name,
	.ntags = ARRAY_SIZE(bbrx_rg_tag_name),
	.field = bbrx_rg_known,
	.load = bbrx_rg_load,
	.fact = bbrx_rg_facts,
#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
	.call_ok = bbrx_rg_call,
#endif
};

/*
 * Does the kernel's growth function decide on what bbrx_rcvbuf_grow()
 * follows? The whole function is walked (bbrx_body_walk()) from sk in
 * %rdi: every field of sk, the netns and (7.x) the last out-of-order skb it
 * touches must be one of bbrx_rg_fields[] or sk_userlocks, every fact of
 * bbrx_rg_fact_name[] must be there, and it calls only
 * tcp_mstamp_refresh() and the tracepoint's (through 6.12), nothing on 7.x.
 */
static int bbrx_rcvbuf_grow_body(unsigned long addr, size_t size, bool fault,
				 char *reason, size_t len)
{
	struct bbrx_rg_walk w = { .space = U32_MAX };
	struct bbrx_body b = {
		.spec = &bbrx_rg_spec, .text = (const u8 *)addr, .size = size,
		.site = bbrx_endbr_len(addr), .addr = addr, .ctx = &w,
		.reason = reason, .len = len,
	};
	char line[RG_FACTS * 7 + 1];
	const u8 *bytes;
	struct sock *sk;
	int i, n = 0, err;
	size_t k;

	/* sk_userlocks is a bit field in 6.1: find its byte by setting it */
	sk = kzalloc(sizeof(*sk), GFP_KERNEL);
	if (!sk) {
		snprintf(reason, len, "no memory");
		return -ENOMEM;
	}
	sk->sk_userlocks = SOCK_RCVBUF_LOCK;
	bytes = (const u8 *)sk;
	for (k = 0; k < sizeof(*sk); k++) {
		if (bytes[k]) {
			w.locks = k;
			w.lock_bit = bytes[k];
			break;
		}
	}
	kfree(sk);
	if (fault)
		w.space = offsetof(struct tcp_sock, rcvq_space.space);
	for (i = 0; i < RG_FACTS; i++)
		w.at[i] = -1;
	b.tag[7] = RG_SK;		/* %rdi */
	err = bbrx_body_walk(&b);
	if (err)
		return err;
	for (i = 0; i < RG_FACTS; i++) {
		if (w.at[i] < 0) {
			snprintf(reason, len, "%s has no %s", BBRX_RCVBUF_GROW_SYMBOL,
				 bbrx_rg_fact_name[i]);
			return -ENOEXEC;
		}
		n += scnprintf(line + n, sizeof(line) - n, " %#lx", w.at[i]);
	}
	pr_info("bbrx: rcvbuf_grow: %s (%zu bytes) does what bbrx's does; facts at%s\n",
		BBRX_RCVBUF_GROW_SYMBOL, size, line);
	return 0;
}

/**
 * bbrx_rcvbuf_grow_verify() - check the growth function is the one we follow
 * @addr: address of BBRX_RCVBUF_GROW_SYMBOL (tcp_rcv_space_adjust() through
 *	6.12, tcp_rcvbuf_grow() on 7.x)
 * @reason: set to why not
 * @len: size of @reason
 *
 * The prototype is checked at build time; refused where the kernel's rule
 * is not the one bbrx_rcvbuf_grow() was written against
 * (bbrx_rcvbuf_grow_misfit()), where the function does not start with its
 * ftrace site, or where its body touches other fields or lacks a step
 * bbrx_rcvbuf_grow() follows (bbrx_rcvbuf_grow_body()).
 *
 * Return: 0, or -ENOEXEC (-ENOENT, -ENOMEM) with @reason.
 */
int bbrx_rcvbuf_grow_verify(unsigned long addr, char *reason, size_t len)
{
	const char *misfit = bbrx_rcvbuf_grow_misfit();
	size_t size;
	int err;

	if (misfit) {
		snprintf(reason, len, "%s", misfit);
		return -ENOEXEC;
	}
	err = bbrx_hook_sized_entry(addr, &size, reason, len);
	if (err)
		return err;
	return bbrx_rcvbuf_grow_body(addr, size,
				     bbrx_hook_fault(BBRX_HOOK_RCVBUF_GROW),
				     reason, len);
}
