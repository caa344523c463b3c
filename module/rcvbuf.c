// SPDX-License-Identifier: GPL-2.0
/*
 * Receive-buffer policy: net.ipv4.bbrx.rcvbuf, the per-MSS sizing of the
 * 2013 proposal "tcp: rcvbuf autotuning improvements" (Eric Dumazet's
 * netdev series; not merged in that form).
 *
 * With TSO/GSO off at the sender every segment is its own skb, and each
 * costs a power-of-two slab object plus an sk_buff, more than the kernel's
 * SKB_TRUESIZE(advmss + MAX_TCP_HEADER) estimate; receivers with default
 * settings were then window-limited at low and mid RTTs (1150 vs 2906 Mbit/s
 * at 0 ms in the report). The proposal:
 *
 *   per_mss = roundup_pow_of_two(mss + MAX_TCP_HEADER +
 *                                SKB_DATA_ALIGN(sizeof(skb_shared_info)))
 *             + SKB_DATA_ALIGN(sizeof(struct sk_buff))
 *   rcvmem  = 2 * init_rwnd * per_mss, * 4 when tcp_moderate_rcvbuf is on
 *             (room for the 2-3 RTTs dynamic right-sizing needs to react)
 *
 * with mss = max(advmss, mss_cache) and init_rwnd = 20 segments for
 * mss <= 1460, else max(1460 * 20 / mss, 2) (its tcp_default_init_rwnd(),
 * gone from the kernel since 4.19).
 *
 *   0 kernel   sk_rcvbuf starts at tcp_rmem[1] (6.1)
 *   1 per_mss  at establishment sk_rcvbuf = max(sk_rcvbuf, min(rcvmem,
 *              tcp_rmem[2])); when the kernel grows the buffer, its
 *              window rule stays and its per-segment estimate is replaced
 *              by per_mss. Never when the application set SO_RCVBUF.
 *
 * Mechanisms: an ftrace callback at the entry of tcp_init_transfer(), which
 * runs on both sides at establishment right before tcp_init_buffer_space()
 * derives window_clamp and rcvq_space from sk_rcvbuf; and an ftrace
 * redirect, for in-scope sockets, of the function that grows the buffer:
 * tcp_rcv_space_adjust() through 6.12, tcp_rcvbuf_grow() on 7.x (both of
 * its callers: tcp_rcv_space_adjust() and tcp_data_queue_ofo()). Not a
 * kretprobe: kprobes on the ftrace site of this hot function crashed the
 * guest (a jump to address 0 from its caller) while the module was loaded
 * and unloaded under traffic.
 */
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/seq_file.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* The proposal's initial receive window, segments. */
#define BBRX_INIT_RWND		20
#define BBRX_INIT_RWND_MSS	1460

static bool bbrx_rcvbuf_acts(struct sock *sk, struct bbrx_net *bn)
{
	return bbrx_policy(bn, BBRX_POL_RCVBUF) != BBRX_POLICY_KERNEL &&
	       !(sk->sk_userlocks & SOCK_RCVBUF_LOCK) &&
	       bbrx_sk_in_scope(sk, bn);
}

/* Memory one received MSS costs: power-of-two data + sk_buff, bytes. */
static u32 bbrx_rcvbuf_per_mss(u32 mss)
{
	return roundup_pow_of_two(mss + MAX_TCP_HEADER +
				  SKB_DATA_ALIGN(sizeof(struct skb_shared_info))) +
	       SKB_DATA_ALIGN(sizeof(struct sk_buff));
}

/**
 * bbrx_rcvbuf_show() - append this build's per_mss formula to the status line
 * @seq: /proc/net/bbrx_hooks being read
 *
 * Prints " per_mss=pow2(mss+H)+S", bytes: H is MAX_TCP_HEADER plus the
 * aligned skb_shared_info, S the aligned sk_buff. Both depend on the kernel
 * build (the generic flavour of 6.1 reserves more link-layer headroom than
 * cloud: per_mss 4352 instead of 2304 for MSS 1448), so users and tests
 * read them here rather than assuming one build's values.
 */
static void bbrx_rcvbuf_show(struct seq_file *seq)
{
	seq_printf(seq, " per_mss=pow2(mss+%zu)+%zu",
		   (size_t)MAX_TCP_HEADER +
		   SKB_DATA_ALIGN(sizeof(struct skb_shared_info)),
		   (size_t)SKB_DATA_ALIGN(sizeof(struct sk_buff)));
}

static u32 bbrx_rcvbuf_mss(const struct tcp_sock *tp)
{
	return max_t(u32, tp->advmss, tp->mss_cache);
}

/**
 * bbrx_rcvbuf_init_transfer() - size sk_rcvbuf per MSS at establishment
 * @sk: the socket tcp_init_transfer() is about to finish setting up
 *
 * Runs at the entry of tcp_init_transfer(), so the kernel's own
 * tcp_init_buffer_space() then derives window_clamp (tcp_full_space) and
 * rcv_ssthresh from the larger buffer. The window scale and the initial
 * window were fixed at SYN time and do not change.
 */
static void bbrx_rcvbuf_init_transfer(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	const struct net *net = sock_net(sk);
	u32 mss, rwnd, rcvmem;
	int target;

	if (!bbrx_rcvbuf_acts(sk, bn))
		return;

	mss = bbrx_rcvbuf_mss(tcp_sk(sk));
	if (!mss)
		return;
	rwnd = BBRX_INIT_RWND;
	if (mss > BBRX_INIT_RWND_MSS)
		rwnd = max_t(u32, BBRX_INIT_RWND_MSS * BBRX_INIT_RWND / mss, 2);
	rcvmem = 2 * rwnd * bbrx_rcvbuf_per_mss(mss);
	if (READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf))
		rcvmem *= 4;

	target = min_t(u32, rcvmem, READ_ONCE(net->ipv4.sysctl_tcp_rmem[2]));
	if (target <= READ_ONCE(sk->sk_rcvbuf))
		return;
	WRITE_ONCE(sk->sk_rcvbuf, target);
	bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_SIZED);
	if (trace_bbrx_rcvbuf_enabled())
		bbrx_trace_hook(sk, BBRX_POL_RCVBUF,
				bbrx_policy(bn, BBRX_POL_RCVBUF),
				BBRX_TRACE_SIZED, target);
}

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
static int bbrx_rcvbuf_verify(unsigned long addr, char *reason, size_t len)
{
	size_t size;
	long at[RB_FACTS];
	int err;

	BUILD_BUG_ON(!__same_type(&tcp_init_transfer,
				  void (*)(struct sock *, int, struct sk_buff *)));
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
static int bbrx_rcvbuf_grow_verify(unsigned long addr, char *reason,
				   size_t len)
{
	const char *misfit = bbrx_rcvbuf_grow_misfit();
	size_t size;
	int err;

	if (misfit) {
		snprintf(reason, len, "%s", misfit);
		return -ENOEXEC;
	}
#ifdef BBRX_HAVE_TCP_RCVBUF_GROW
	BUILD_BUG_ON(!__same_type(&tcp_rcvbuf_grow,
				  void (*)(struct sock *, u32)));
#else
	BUILD_BUG_ON(!__same_type(&tcp_rcv_space_adjust,
				  void (*)(struct sock *)));
#endif
	err = bbrx_hook_sized_entry(addr, &size, reason, len);
	if (err)
		return err;
	return bbrx_rcvbuf_grow_body(addr, size,
				     bbrx_hook_fault(BBRX_HOOK_RCVBUF_GROW),
				     reason, len);
}

/**
 * bbrx_rcvbuf_grow_wants() - does the growth redirect act on this socket?
 * @sk: the socket the growth function was called for
 *
 * Return: true with rcvbuf 1, @sk in scope and no SO_RCVBUF lock.
 */
static bool bbrx_rcvbuf_grow_wants(struct sock *sk)
{
	return bbrx_rcvbuf_acts(sk, bbrx_pernet(sock_net(sk)));
}

/*
 * Memory charged per segment when the buffer grows: per_mss, raised in
 * 128-byte steps (as the kernel raises its own estimate) until one
 * segment's worth of it still offers an advmss of window after
 * tcp_adv_win_scale. Without that, a buffer of N * per_mss would offer
 * fewer than N segments of window (1152 bytes each with per_mss 2304 and
 * the default scale of 1) and cap throughput at long RTTs.
 */
static u32 bbrx_rcvbuf_seg_mem(const struct sock *sk, const struct tcp_sock *tp)
{
	u32 mem = bbrx_rcvbuf_per_mss(bbrx_rcvbuf_mss(tp));

	while (tcp_win_from_space(sk, mem) < tp->advmss)
		mem += 128;
	return mem;
}

/*
 * Raise sk_rcvbuf to @mem (capped by tcp_rmem[2]) and the window clamp with
 * it, as the kernel's growth does; count it (@ofo: asked for by the
 * out-of-order path) and trace it.
 */
static void bbrx_rcvbuf_set(struct sock *sk, u64 mem, bool ofo)
{
	const struct net *net = sock_net(sk);
	struct bbrx_net *bn = bbrx_pernet(net);
	int rcvbuf;

	rcvbuf = min_t(u64, mem, READ_ONCE(net->ipv4.sysctl_tcp_rmem[2]));
	if (rcvbuf <= sk->sk_rcvbuf)
		return;
	WRITE_ONCE(sk->sk_rcvbuf, rcvbuf);
	WRITE_ONCE(tcp_sk(sk)->window_clamp, tcp_win_from_space(sk, rcvbuf));
	bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_GROWN);
	if (ofo)
		bbrx_stat_inc(bn, BBRX_STAT_RCVBUF_GROWN_OFO);
	if (trace_bbrx_rcvbuf_enabled())
		bbrx_trace_hook(sk, BBRX_POL_RCVBUF,
				bbrx_policy(bn, BBRX_POL_RCVBUF),
				BBRX_TRACE_GROWN, rcvbuf);
}

#ifndef BBRX_HAVE_TCP_RCVBUF_GROW
/**
 * bbrx_rcvbuf_grow() - 6.1/6.12's tcp_rcv_space_adjust() charging per_mss
 * @sk: a TCP socket the application just read from, locked
 *
 * Dynamic right-sizing (the kernel's rule since 2.6, refined in 4.x): once
 * per receive RTT, if the application read more than in the previous RTT,
 * size the window for the next one at twice what was read (room for a
 * loss) plus 16 segments of cushion, plus twice the growth seen (a sender
 * in slow start doubles per RTT, and the ACK now opens the window for the
 * RTT after next), then the buffer at that many segments times the memory
 * each costs. The only change from the kernel is that cost: per_mss,
 * raised until a segment's memory offers an advmss of window, instead of
 * 6.1's SKB_TRUESIZE(advmss + MAX_TCP_HEADER) raised the same way (2944 vs
 * 2932 bytes for MSS 1448 with tcp_adv_win_scale 1; the difference is
 * larger for other MSS) or 6.12's tcp_space_from_win() (the window scaled
 * by the len/truesize ratio measured on received skbs). What counts as
 * read follows the running kernel (bbrx_rcvq_copied()). The
 * tcp_rcv_space_adjust tracepoint does not fire for redirected calls.
 */
static void bbrx_rcvbuf_grow(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct net *net = sock_net(sk);
	typeof(tp->rcvq_space.space) prev;
	u32 rtt_us8;
	s64 copied;
	u64 now_ns, win;

	/* What tcp_mstamp_refresh() does (not exported). */
	now_ns = tcp_clock_ns();
	tp->tcp_clock_cache = now_ns;
	tp->tcp_mstamp = div_u64(now_ns, NSEC_PER_USEC);

	rtt_us8 = tp->rcv_rtt_est.rtt_us;	/* << 3 */
	if (!rtt_us8 ||
	    tcp_stamp_us_delta(tp->tcp_mstamp, tp->rcvq_space.time) < (rtt_us8 >> 3))
		return;

	copied = bbrx_rcvq_copied(tp);
	prev = tp->rcvq_space.space;
	/*
	 * Compared in the field's own type, as the kernel does: u32 in 6.1,
	 * int in 6.12, where copied (read minus still queued) can be negative
	 * and must not pass. Stored negative, the kernel's own function would
	 * later store 0 there and divide by it.
	 */
	if ((typeof(prev))copied > prev) {
		if (READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf) && prev > 0 &&
		    tp->advmss) {
			win = 2ULL * copied + 16ULL * tp->advmss;
			win += 2 * div_u64(win * (u32)(copied - prev), prev);
			win = div_u64(win, tp->advmss) *
			      bbrx_rcvbuf_seg_mem(sk, tp);
			bbrx_rcvbuf_set(sk, win, false);
		}
		tp->rcvq_space.space = copied;
	}
	tp->rcvq_space.seq = tp->copied_seq;
	tp->rcvq_space.time = tp->tcp_mstamp;
}

#else /* BBRX_HAVE_TCP_RCVBUF_GROW */

/**
 * bbrx_rcvbuf_grow() - 7.x's tcp_rcvbuf_grow() charging per_mss
 * @sk: a TCP socket, locked, with an application attached
 * @newval: what the application read in the last receive RTT, bytes (from
 *	tcp_rcv_space_adjust(), above rcvq_space.space), or rcvq_space.space
 *	itself (from tcp_data_queue_ofo(), when out-of-order data queues)
 *
 * 7.x's window rule, unchanged: twice @newval (dynamic right-sizing is one
 * RTT late), plus room to grow: below net.ipv4.tcp_rcvbuf_low_rtt (1000 us
 * by default) that room is the window scaled by rtt / low_rtt, so short
 * paths do not inflate the buffer; otherwise twice the window times the
 * relative growth of what was read (a sender in slow start doubles per
 * RTT); plus the span the out-of-order queue covers. As in 7.3.4's
 * tcp_input.c; upstream 65c5287892e9 ("tcp: fix sk_rcvbuf overshoot"),
 * aa251c84636c ("tcp: fix too slow tcp_rcvbuf_grow() action") and "tcp:
 * add net.ipv4.tcp_rcvbuf_low_rtt" (net-next, November 2025). The one
 * change from the kernel is the memory charged per segment of window:
 * per_mss (bbrx_rcvbuf_seg_mem()) instead of tcp_space_from_win()'s
 * measured len/truesize ratio. RcvbufGrownOfo counts the growths the
 * out-of-order caller asked for (@newval equal to rcvq_space.space: the
 * other caller passes more).
 */
static void bbrx_rcvbuf_grow(struct sock *sk, u32 newval)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct net *net = sock_net(sk);
	u32 oldval = tp->rcvq_space.space, rtt_us, low_rtt;
	u64 win;

	tp->rcvq_space.space = newval;
	if (!READ_ONCE(net->ipv4.sysctl_tcp_moderate_rcvbuf) || !tp->advmss)
		return;

	win = 2ULL * newval;
	rtt_us = tp->rcv_rtt_est.rtt_us >> 3;
	low_rtt = bbrx_rcvbuf_low_rtt(net);
	if (rtt_us < low_rtt)
		win += div_u64(win * rtt_us, low_rtt);
	else if (oldval)	/* the kernel divides unchecked: never 0 there */
		win += div_u64((win << 1) * (u32)(newval - oldval), oldval);
	if (!RB_EMPTY_ROOT(&tp->out_of_order_queue))
		win += TCP_SKB_CB(tp->ooo_last_skb)->end_seq - tp->rcv_nxt;
	win = div_u64(win, tp->advmss) * bbrx_rcvbuf_seg_mem(sk, tp);
	bbrx_rcvbuf_set(sk, win, newval == oldval);
}
#endif /* BBRX_HAVE_TCP_RCVBUF_GROW */

struct bbrx_hook bbrx_hook_rcvbuf = {
	.symbol = "tcp_init_transfer",
	.kind = BBRX_HOOK_ENTRY,
	.verify = bbrx_rcvbuf_verify,
	.entry = bbrx_rcvbuf_init_transfer,
	.show = bbrx_rcvbuf_show,
};

struct bbrx_hook bbrx_hook_rcvbuf_grow = {
	.symbol = BBRX_RCVBUF_GROW_SYMBOL,
	.kind = BBRX_HOOK_REDIRECT,
	.verify = bbrx_rcvbuf_grow_verify,
	.wants = bbrx_rcvbuf_grow_wants,
	.redirect = bbrx_rcvbuf_grow,
};
