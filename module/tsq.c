// SPDX-License-Identifier: GPL-2.0
/*
 * TSQ policy: net.ipv4.bbrx.tsq, a redirect of tcp_small_queue_check().
 *
 * TCP Small Queues stop a socket from queueing more than about 1 ms of data
 * (pacing_rate >> sk_pacing_shift, at least two skbs) below it; the TX
 * completion of a queued skb wakes the socket up again. When TX completions
 * come late (NIC interrupt mitigation, some virtual NICs), a socket with a
 * single skb in flight waits for nothing useful. Upstream "tcp: tsq: relax
 * tcp_small_queue_check() when rtx queue contains a single skb" (Oct 2023,
 * in 6.1 stable) sends anyway when the rtx queue is empty or holds one skb
 * (81.5 -> 94.4 Mbit/s on a 100 Mbit link in its report).
 *
 *   0 kernel        no redirect: the running kernel's check
 *   1 post-change   send when the rtx queue is empty or holds a single skb
 *                   (6.1's own rule, counted)
 *   2 pre-change    send only when it is empty (the regression)
 *
 * The limit is the kernel's: max(2 * truesize, pacing_rate >> pacing_shift),
 * capped by tcp_limit_output_bytes for unpaced sockets, shifted by factor (1
 * for retransmits), plus the tcp_tx_delay allowance.
 */
#include <linux/kernel.h>
#include <linux/uaccess.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "bbrx_trace.h"
#include "compat.h"

/**
 * bbrx_tsq_wants() - does the TSQ hook act on this socket?
 * @sk: the socket tcp_small_queue_check() was called for
 *
 * Return: true when the netns policy is not 0 and @sk is in scope.
 */
bool bbrx_tsq_wants(struct sock *sk)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));

	return READ_ONCE(bn->tsq) != BBRX_POLICY_KERNEL &&
	       bbrx_sk_in_scope(sk, bn);
}

static unsigned long bbrx_tsq_limit(struct sock *sk, unsigned int truesize,
				    unsigned int factor)
{
	unsigned long pacing_rate = READ_ONCE(sk->sk_pacing_rate);
	unsigned long limit;

	limit = max_t(unsigned long, 2UL * truesize,
		      pacing_rate >> READ_ONCE(sk->sk_pacing_shift));
	if (READ_ONCE(sk->sk_pacing_status) == SK_PACING_NONE)
		limit = min_t(unsigned long, limit,
			      READ_ONCE(sock_net(sk)->ipv4.sysctl_tcp_limit_output_bytes));
	limit <<= factor;

	/*
	 * tcp_tx_delay: queue the delayed data too (truesize ~2x payload).
	 * The kernel guards this with the tcp_tx_delay_enabled static key,
	 * which 6.12 no longer exports; a non-zero tcp_tx_delay implies it.
	 */
	if (tcp_sk(sk)->tcp_tx_delay)
		limit += ((u64)pacing_rate * tcp_sk(sk)->tcp_tx_delay) >> 19;
	return limit;
}

/**
 * bbrx_tsq_small_queue_check() - tcp_small_queue_check() with the TSQ policy
 * @sk: the socket, locked or in its TX softirq path
 * @truesize: truesize of the skb about to be sent, bytes (GCC's isra clone
 *	passes it instead of the skb)
 * @factor: limit shift, 0 for new data, 1 for retransmits
 *
 * Return: true if the socket must wait for a TX completion (TSQ_THROTTLED
 * is set then), false to send now.
 */
bool bbrx_tsq_small_queue_check(struct sock *sk, unsigned int truesize,
				unsigned int factor)
{
	struct bbrx_net *bn = bbrx_pernet(sock_net(sk));
	unsigned long limit = bbrx_tsq_limit(sk, truesize, factor);
	const struct rb_node *node;

	if (refcount_read(&sk->sk_wmem_alloc) <= limit)
		return false;

	/* Nothing in flight: no completion would wake us up. */
	node = sk->tcp_rtx_queue.rb_node;
	if (!node)
		return false;
	if (!node->rb_left && !node->rb_right) {
		int policy = READ_ONCE(bn->tsq);

		if (policy != BBRX_POLICY_PRE) {
			bbrx_stat_inc(bn, BBRX_STAT_TSQ_SINGLE_SKB);
			if (trace_bbrx_tsq_enabled())
				bbrx_trace_hook(sk, BBRX_HOOK_TSQ, policy,
						BBRX_TRACE_SINGLE_SKB, limit);
			return false;
		}
		bbrx_stat_inc(bn, BBRX_STAT_TSQ_WITHHELD);
		if (trace_bbrx_tsq_enabled())
			bbrx_trace_hook(sk, BBRX_HOOK_TSQ, policy,
					BBRX_TRACE_WITHHELD, limit);
	}

	set_bit(TSQ_THROTTLED, &sk->sk_tsq_flags);
	/* The completion may have come before the bit was set: test again. */
	smp_mb__after_atomic();
	if (refcount_read(&sk->sk_wmem_alloc) > limit) {
		bbrx_stat_inc(bn, BBRX_STAT_TSQ_THROTTLED);
		return true;
	}
	return false;
}

/* Registers by their x86 number (REX extension included). */
#define BBRX_RSI	6
#define BBRX_RDI	7
/* The clone's prologue is searched this far. */
#define BBRX_TSQ_SCAN	48

static u8 bbrx_insn_rex(const struct insn *insn)
{
	return insn->rex_prefix.nbytes ? insn->rex_prefix.bytes[0] : 0;
}

static int bbrx_insn_reg(const struct insn *insn)
{
	return X86_MODRM_REG(insn->modrm.value) +
	       (X86_REX_R(bbrx_insn_rex(insn)) ? 8 : 0);
}

static int bbrx_insn_rm(const struct insn *insn)
{
	return X86_MODRM_RM(insn->modrm.value) +
	       (X86_REX_B(bbrx_insn_rex(insn)) ? 8 : 0);
}

/*
 * The general register a prologue instruction writes: 0-15, -1 for none
 * (push, a store to memory), -2 for an instruction outside the forms a
 * prologue is made of here, which ends the search.
 */
static int bbrx_tsq_insn_dest(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];
	const bool reg_dst = X86_MODRM_MOD(insn->modrm.value) == 3;

	if (op >= 0x50 && op <= 0x57)			/* push */
		return -1;
	switch (op) {
	case 0x01: case 0x29: case 0x31: case 0x89:	/* add/sub/xor/mov r -> r/m */
	case 0xc1: case 0xd1:				/* shifts */
		return reg_dst ? bbrx_insn_rm(insn) : -1;
	case 0x03: case 0x2b: case 0x33: case 0x8b: case 0x8d:	/* -> r */
		return bbrx_insn_reg(insn);
	case 0x0f:					/* movzx/movsx */
		if (insn->opcode.nbytes == 2 &&
		    (insn->opcode.bytes[1] & 0xf6) == 0xb6)
			return bbrx_insn_reg(insn);
		return -2;
	}
	return -2;
}

/* mov disp(%rdi),%r64 with disp == @off: the socket's sk_pacing_rate. */
static bool bbrx_tsq_loads_rate(const struct insn *insn, u32 off)
{
	u8 mod = X86_MODRM_MOD(insn->modrm.value);

	return insn->opcode.bytes[0] == 0x8b && X86_REX_W(bbrx_insn_rex(insn)) &&
	       (mod == 1 || mod == 2) && bbrx_insn_rm(insn) == BBRX_RDI &&
	       (u32)insn->displacement.value == off;
}

/* add %esi,%esi; shl %esi; lea (%rsi,%rsi,1),r or lea 0(,%rsi,2),r */
static bool bbrx_tsq_doubles_esi(const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];
	u8 modrm = insn->modrm.value, sib = insn->sib.value;
	u8 rex = bbrx_insn_rex(insn);

	if (op == 0x01 && X86_MODRM_MOD(modrm) == 3)
		return bbrx_insn_rm(insn) == BBRX_RSI &&
		       bbrx_insn_reg(insn) == BBRX_RSI;
	if (op == 0xd1 && X86_MODRM_MOD(modrm) == 3)
		return X86_MODRM_REG(modrm) == 4 && bbrx_insn_rm(insn) == BBRX_RSI;
	if (op != 0x8d || X86_MODRM_MOD(modrm) != 0 ||
	    X86_MODRM_RM(modrm) != 4 || X86_REX_X(rex) || X86_REX_B(rex))
		return false;
	if (X86_SIB_INDEX(sib) != BBRX_RSI)
		return false;
	return (X86_SIB_BASE(sib) == BBRX_RSI && X86_SIB_SCALE(sib) == 0) ||
	       (X86_SIB_BASE(sib) == 5 && X86_SIB_SCALE(sib) == 1 &&
		!insn->displacement.value);
}

/**
 * bbrx_tsq_verify() - check the isra clone's calling convention
 * @addr: address of tcp_small_queue_check.isra.0
 * @reason: why not, on failure
 * @len: size of @reason
 *
 * GCC's clone takes (sk, skb->truesize, factor). Its prologue shows it: rdi
 * is the socket (sk_pacing_rate is loaded from it at this build's offset)
 * and esi is doubled as 2 * truesize, each before anything overwrites that
 * register. The instructions are decoded with the kernel's insn_decode(),
 * not matched byte for byte, because builds schedule them differently:
 *   6.1 cloud  mov %rdi,%rax; mov rate(%rdi),%rdi; add %esi,%esi
 *   6.1 with lockdep and KASAN (make check-debug)
 *              movzbl shift(%rdi),%ecx; mov rate(%rdi),%rax; push %r12;
 *              mov %edx,%r12d; lea (%rsi,%rsi,1),%edx
 * Redirecting a local function relies on -flive-patching=inline-clone
 * (CONFIG_LIVEPATCH), under which callers assume nothing beyond the ABI.
 *
 * Return: 0 if the hook may be installed; -ENOEXEC (-EFAULT if the text is
 * unreadable, -ENOENT without insn_decode()) otherwise, with @reason.
 */
int bbrx_tsq_verify(unsigned long addr, char *reason, size_t len)
{
	u32 off = offsetof(struct sock, sk_pacing_rate);
	bool rdi_live = true, rsi_live = true, rate = false, twice = false;
	size_t start = 5 + bbrx_endbr_len(addr), pos = 0;
	u8 text[BBRX_TSQ_SCAN + MAX_INSN_SIZE];
	struct insn insn;
	int err, dest;

	if (!IS_ENABLED(CONFIG_LIVEPATCH)) {
		snprintf(reason, len,
			 "kernel built without CONFIG_LIVEPATCH: a local function's ABI is not guaranteed");
		return -ENOEXEC;
	}
	/* fault_verify: an offset no build loads, as if the struct differed */
	if (bbrx_hook_fault(BBRX_HOOK_TSQ))
		off = U32_MAX;
	/* after the 5-byte fentry call site (and ENDBR64 where present) */
	if (copy_from_kernel_nofault(text, (void *)(addr + start), sizeof(text))) {
		snprintf(reason, len, "text at +%#zx unreadable", start);
		return -EFAULT;
	}
	while (pos < BBRX_TSQ_SCAN && !(rate && twice)) {
		err = bbrx_hook_insn(text + pos, sizeof(text) - pos, &insn);
		if (err) {
			snprintf(reason, len, err == -ENOENT ?
				 "insn_decode not found" :
				 "text at +%#zx does not decode", start + pos);
			return err;
		}
		dest = bbrx_tsq_insn_dest(&insn);
		if (dest == -2)
			break;
		if (rdi_live && bbrx_tsq_loads_rate(&insn, off))
			rate = true;
		if (rsi_live && bbrx_tsq_doubles_esi(&insn))
			twice = true;
		/* the source is read before the destination is written */
		rdi_live &= dest != BBRX_RDI;
		rsi_live &= dest != BBRX_RSI;
		pos += insn.length;
	}
	if (rate && twice)
		return 0;
	snprintf(reason, len,
		 "prologue +%#zx..+%#zx: %s (expected rdi = sk, esi = truesize)",
		 start, start + pos, !rate ?
		 "no load of sk_pacing_rate from %rdi" : "%esi not doubled");
	return -ENOEXEC;
}
