// SPDX-License-Identifier: GPL-2.0
/*
 * Autocork policy: net.ipv4.bbrx.autocork, a redirect of tcp_push().
 *
 * Autocorking (3.14) holds a small write back while earlier data still sits
 * in the qdisc or NIC, so that later writes join it in one bigger segment.
 * In 4.15 the retransmit queue moved to an rb-tree; tcp_should_autocork()'s
 * test "skb != tcp_write_queue_head(sk)" then held for the last unsent skb
 * almost never, and autocorking stopped. Upstream 114f39feab36 ("tcp:
 * restore autocorking", 4.17) made the test "the rtx queue is not empty"
 * (500-byte writes: 2682 -> 5472 Mbit/s in its report).
 *
 *   0 kernel        no redirect: the running kernel's tcp_push()
 *   1 post-change   cork when the rtx queue is not empty (6.1's own rule)
 *   2 pre-change    cork when the skb is not the head of the write queue
 *                   (the 4.15 test; since sent skbs left sk_write_queue for
 *                   the rb-tree its head is the first unsent skb,
 *                   tcp_send_head(), usually the tail skb itself: in
 *                   practice never)
 *   3 never         never cork in-scope sockets
 *
 * Everything else tcp_push() does stays the kernel's: PSH marking (unless
 * MSG_MORE, or half the peer's max window written since the last push),
 * the urgent pointer for MSG_OOB, the EOR rule (no corking onto an skb that
 * ends a record), TcpExtTCPAutoCorking, and MSG_MORE as TCP_NAGLE_CORK.
 */
#include <linux/kernel.h>
#include <linux/snmp.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* Not exported; resolved at load and called with tcp_push()'s arguments. */
static void (*bbrx_push_pending_frames)(struct sock *sk, unsigned int cur_mss,
					int nonagle);
static unsigned long bbrx_push_pending_addr;

/**
 * bbrx_autocork_wants() - does the autocork hook act on this socket?
 * @sk: the socket tcp_push() was called for
 *
 * Return: true when the netns policy is not 0 and @sk is in scope.
 */
static bool bbrx_autocork_wants(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));

	return bbrx_policy(bn, BBRX_POL_AUTOCORK) != BBRX_POLICY_KERNEL &&
	       bbrx_sk_in_scope(sk, bn);
}

/* The policy's part of the corking decision. */
static bool bbrx_autocork_rule(struct sock *sk, struct sk_buff *skb, int policy)
{
	switch (policy) {
	case BBRX_POLICY_PRE:
		return skb != tcp_send_head(sk);
	case BBRX_AUTOCORK_NEVER:
		return false;
	default:
		return !tcp_rtx_queue_empty(sk);
	}
}

/**
 * bbrx_autocork_tcp_push() - tcp_push() with the autocork policy
 * @sk: the socket, locked by the caller
 * @flags: sendmsg flags (MSG_MORE, MSG_OOB)
 * @mss_now: current MSS, bytes
 * @nonagle: TCP_NAGLE_* of the socket
 * @size_goal: bytes the tail skb may grow to
 *
 * Same ABI and effects as the kernel's tcp_push() except the corking rule.
 */
static void bbrx_autocork_tcp_push(struct sock *sk, int flags,
				   int mss_now, int nonagle, int size_goal)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	struct tcp_sock *tp = tcp_sk(sk);
	struct sk_buff *skb;
	int policy = 0;
	bool cork;

	skb = tcp_write_queue_tail(sk);
	if (!skb)
		return;

	if (!(flags & MSG_MORE) ||
	    after(tp->write_seq, tp->pushed_seq + (tp->max_window >> 1))) {
		TCP_SKB_CB(skb)->tcp_flags |= TCPHDR_PSH;
		tp->pushed_seq = tp->write_seq;
	}
	if (unlikely(flags & MSG_OOB))
		tp->snd_up = tp->write_seq;

	/* The kernel's conditions that do not depend on the policy. */
	cork = skb->len < size_goal &&
	       READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_autocorking) &&
	       refcount_read(&sk->sk_wmem_alloc) > skb->truesize &&
	       tcp_skb_can_collapse_to(skb);
	if (cork) {
		bool kernel_corks = !tcp_rtx_queue_empty(sk);

		policy = bbrx_policy(bn, BBRX_POL_AUTOCORK);
		cork = bbrx_autocork_rule(sk, skb, policy);
		if (kernel_corks && !cork) {
			bbrx_stat_inc(bn, BBRX_STAT_AUTOCORK_DECLINED);
			if (trace_bbrx_autocork_enabled())
				bbrx_trace_hook(sk, BBRX_POL_AUTOCORK, policy,
						BBRX_TRACE_DECLINED, skb->len);
		}
	}
	if (cork) {
		/* TSQ_THROTTLED makes the TX completion push the queue. */
		if (!test_bit(TSQ_THROTTLED, &sk->sk_tsq_flags)) {
			NET_INC_STATS(sock_net(sk), LINUX_MIB_TCPAUTOCORKING);
			set_bit(TSQ_THROTTLED, &sk->sk_tsq_flags);
			/* order the bit before re-reading sk_wmem_alloc */
			smp_mb__after_atomic();
		}
		/* Unless the completion came before the bit was set. */
		if (refcount_read(&sk->sk_wmem_alloc) > skb->truesize) {
			bbrx_stat_inc(bn, BBRX_STAT_AUTOCORK_CORKED);
			if (trace_bbrx_autocork_enabled())
				bbrx_trace_hook(sk, BBRX_POL_AUTOCORK, policy,
						BBRX_TRACE_CORKED, skb->len);
			return;
		}
	}

	if (flags & MSG_MORE)
		nonagle = TCP_NAGLE_CORK;
	bbrx_push_pending_frames(sk, mss_now, nonagle);
}

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
	const struct bbrx_autocork_shape *sh = ((struct bbrx_ac_walk *)b->ctx)->sh;

	switch (tag) {
	case AC_SK:
		return bbrx_ac_sk_field(sh, off) >= 0;
	case AC_SKB:
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
 * ours does not); every fact of bbrx_ac_fact_name[] must be there; no call
 * but the ftrace site (and a debug kernel's instrumentation); every branch
 * out of the function goes to __tcp_push_pending_frames or a return thunk.
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
		if (found->at[i] < 0) {
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
static int bbrx_autocork_verify(unsigned long addr, char *reason,
				size_t len)
{
	struct bbrx_autocork_shape sh;
	struct bbrx_autocork_found found;
	size_t size = bbrx_hook_func_size(addr);
	unsigned long target;
	int err, i, n = 0;
	char line[320];

	/* The replacement and the pointer take the headers' prototypes. */
	BUILD_BUG_ON(!__same_type(&tcp_push, &bbrx_autocork_tcp_push));
	BUILD_BUG_ON(!__same_type(&__tcp_push_pending_frames,
				  bbrx_push_pending_frames));
	BUILD_BUG_ON(TSQ_THROTTLED >= 8);	/* a byte's lock or */

	bbrx_push_pending_addr = bbrx_hook_resolve("__tcp_push_pending_frames");
	target = bbrx_push_pending_addr;
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
		n += scnprintf(line + n, sizeof(line) - n, " %#lx", found.at[i]);
	pr_info("bbrx: autocork: tcp_push (%zu bytes) does what bbrx's does; facts at%s\n",
		size, line);
	bbrx_push_pending_frames = (void *)bbrx_push_pending_addr;
	return 0;
}

struct bbrx_hook bbrx_hook_autocork = {
	.symbol = "tcp_push",
	.kind = BBRX_HOOK_REDIRECT,
	.verify = bbrx_autocork_verify,
	.wants = bbrx_autocork_wants,
	.redirect = bbrx_autocork_tcp_push,
};
