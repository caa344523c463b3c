// SPDX-License-Identifier: GPL-2.0
/*
 * The x86-64 verifier of the TSQ hook (tsq.c): the calling convention of
 * GCC's clone of tcp_small_queue_check() and the clamp rule its body has.
 */
#include <linux/kernel.h>
#include <linux/uaccess.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* Registers by their x86 number (REX extension included). */
#define BBRX_RSP	4
#define BBRX_RSI	6
#define BBRX_RDI	7

/*
 * What the prologue has shown so far: which registers still hold the
 * socket and the truesize argument (one bit per register), and whether
 * sk_pacing_rate was loaded through the socket and the truesize doubled.
 */
struct bbrx_tsq_flow {
	u16 sk, ts;
	bool rate, twice;
	u32 off;		/* sk_pacing_rate's offset */
	size_t start, end;	/* where the copy starts; where to give up */
	size_t next;		/* the instruction after the last one followed */
	const u8 *text;
	char *reason;
	size_t len;
};

/* @reg now holds something else: it no longer carries either argument. */
static void bbrx_tsq_clobber(struct bbrx_tsq_flow *f, int reg)
{
	f->sk &= ~BIT(reg);
	f->ts &= ~BIT(reg);
}

/* Does this lea compute 2 * a register holding the truesize? */
static bool bbrx_tsq_lea_doubles(const struct bbrx_tsq_flow *f,
				 const struct insn *insn)
{
	u8 modrm = insn->modrm.value, sib = insn->sib.value;
	u8 rex = insn->rex_prefix.nbytes ? insn->rex_prefix.bytes[0] : 0;
	int index, base;

	/* lea (%base,%index,1) or lea 0(,%index,2): a SIB, no displacement */
	if (X86_MODRM_RM(modrm) != 4 || insn->displacement.value)
		return false;
	index = X86_SIB_INDEX(sib) + (X86_REX_X(rex) ? 8 : 0);
	base = X86_SIB_BASE(sib) + (X86_REX_B(rex) ? 8 : 0);
	/* index 4 without REX.X is "no index" */
	if (index == 4 || !(f->ts & BIT(index)))
		return false;
	if (X86_MODRM_MOD(modrm) == 0 && X86_SIB_BASE(sib) == 5)
		return X86_SIB_SCALE(sib) == 1;		/* 0(,%index,2) */
	return X86_MODRM_MOD(modrm) == 0 && base == index &&
	       X86_SIB_SCALE(sib) == 0;			/* (%r,%r,1) */
}

/*
 * Follow one prologue instruction. Return: 0 when it is accounted for
 * (frame setup, a register move that carries an argument along, a load or
 * arithmetic into a register, which then carries neither), -1 for anything
 * else: a branch, a store, a call, an opcode not listed here.
 */
static int bbrx_tsq_follow(struct bbrx_tsq_flow *f, const struct insn *insn)
{
	const u8 op = insn->opcode.bytes[0];
	const bool reg_form = X86_MODRM_MOD(insn->modrm.value) == 3;
	int dst, src, base;

	if (!bbrx_insn_plain(insn))
		return -1;
	if (op >= 0x50 && op <= 0x57 && insn->opcode.nbytes == 1)
		return 0;					/* push */
	switch (op) {
	case 0x81: case 0x83:		/* add/sub $imm,%rsp: a stack frame */
		if (reg_form && bbrx_insn_rm(insn) == BBRX_RSP &&
		    bbrx_insn_wide(insn) &&
		    (X86_MODRM_REG(insn->modrm.value) == 0 ||
		     X86_MODRM_REG(insn->modrm.value) == 5))
			return 0;
		return -1;
	case 0x89: case 0x8b:		/* mov */
		if (reg_form) {
			dst = op == 0x89 ? bbrx_insn_rm(insn) : bbrx_insn_reg(insn);
			src = op == 0x89 ? bbrx_insn_reg(insn) : bbrx_insn_rm(insn);
			/* a 32-bit copy truncates the pointer, keeps the u32 */
			f->sk = (f->sk & ~BIT(dst)) |
				(bbrx_insn_wide(insn) && (f->sk & BIT(src)) ? BIT(dst) : 0);
			f->ts = (f->ts & ~BIT(dst)) |
				(f->ts & BIT(src) ? BIT(dst) : 0);
			return 0;
		}
		if (op == 0x89)
			return -1;				/* a store */
		base = bbrx_insn_mem_base(insn);
		if (base < 0)
			return -1;
		if ((f->sk & BIT(base)) && bbrx_insn_wide(insn) &&
		    insn->displacement.value >= 0 &&
		    (u32)insn->displacement.value == f->off)
			f->rate = true;
		bbrx_tsq_clobber(f, bbrx_insn_reg(insn));
		return 0;
	case 0x8d:			/* lea */
		if (bbrx_tsq_lea_doubles(f, insn))
			f->twice = true;
		bbrx_tsq_clobber(f, bbrx_insn_reg(insn));
		return 0;
	case 0x01:			/* add %r,%r: doubles it when r == r */
		if (!reg_form)
			return -1;
		dst = bbrx_insn_rm(insn);
		if (dst == bbrx_insn_reg(insn) && (f->ts & BIT(dst)))
			f->twice = true;
		bbrx_tsq_clobber(f, dst);
		return 0;
	case 0xd1:			/* shl %r: doubles it */
		if (!reg_form)
			return -1;
		dst = bbrx_insn_rm(insn);
		if (X86_MODRM_REG(insn->modrm.value) == 4 && (f->ts & BIT(dst)))
			f->twice = true;
		bbrx_tsq_clobber(f, dst);
		return 0;
	case 0x29: case 0x31: case 0xc1:	/* sub, xor, shift by imm */
		if (!reg_form)
			return -1;
		bbrx_tsq_clobber(f, bbrx_insn_rm(insn));
		return 0;
	case 0x03: case 0x2b: case 0x33:	/* add, sub, xor into a register */
		bbrx_tsq_clobber(f, bbrx_insn_reg(insn));
		return 0;
	case 0x0f:			/* movzx/movsx */
		if (insn->opcode.nbytes == 2 &&
		    (insn->opcode.bytes[1] & 0xf6) == 0xb6) {
			bbrx_tsq_clobber(f, bbrx_insn_reg(insn));
			return 0;
		}
		return -1;
	}
	return -1;
}

/*
 * bbrx_hook_walk_buf() callback. Return: 1 once both arguments are seen, 0
 * to go on, -EPERM refused (@reason set), -E2BIG past the prologue.
 */
static int bbrx_tsq_step(const struct insn *insn, size_t pos, void *ctx)
{
	struct bbrx_tsq_flow *f = ctx;

	if (pos >= f->end)
		return -E2BIG;		/* searched far enough */
	f->next = pos + insn->length;
	if (bbrx_tsq_follow(f, insn)) {
		snprintf(f->reason, f->len,
			 "prologue: unaccounted instruction at +%#zx (%*ph) before %s",
			 f->start + pos, insn->length, f->text + pos, !f->rate ?
			 "a load of sk_pacing_rate from rdi (sk)" :
			 "esi (truesize) is doubled");
		return -EPERM;
	}
	if (!f->rate && !f->sk) {
		snprintf(f->reason, f->len,
			 "prologue: rdi (sk) overwritten at +%#zx before sk_pacing_rate was loaded",
			 f->start + pos);
		return -EPERM;
	}
	if (!f->twice && !f->ts) {
		snprintf(f->reason, f->len,
			 "prologue: esi (truesize) overwritten at +%#zx before it was doubled",
			 f->start + pos);
		return -EPERM;
	}
	return f->rate && f->twice;
}

/**
 * bbrx_tsq_prologue() - does this prologue take (sk, truesize) in rdi, esi?
 * @text: a copy of the function's text after its fentry site, with
 *	MAX_INSN_SIZE bytes to spare
 * @size: bytes in @text
 * @start: @text's offset in the function, for @reason
 * @off: sk_pacing_rate's offset in struct sock
 * @reason: why not, on failure
 * @len: size of @reason
 *
 * The data-flow half of bbrx_tsq_verify(), on a buffer so that
 * bbrx_verify_selftest() can feed it known prologues.
 *
 * Return: 0 when both are seen, -ENOEXEC (-ENOENT without the decoder)
 * with @reason.
 */
int bbrx_tsq_prologue(const u8 *text, size_t size, size_t start, u32 off,
		      char *reason, size_t len)
{
	struct bbrx_tsq_flow f = {
		.sk = BIT(BBRX_RDI), .ts = BIT(BBRX_RSI), .off = off,
		.start = start, .end = size - MAX_INSN_SIZE, .text = text,
		.reason = reason, .len = len,
	};
	int ret = bbrx_hook_walk_buf(text, size, bbrx_tsq_step, &f, reason, len);

	if (ret == 1)
		return 0;
	/* refused by a step, or not decodable, or no decoder: reason set */
	if (ret == -EPERM)
		return -ENOEXEC;
	/* an instruction past the search cut by the end of the copy */
	if (ret == -ENOENT || (ret == -ENOEXEC && f.next < f.end))
		return ret;
	snprintf(reason, len,
		 "prologue +%#zx..+%#zx: %s (expected rdi = sk, esi = truesize)",
		 start, start + f.end, !f.rate ?
		 "no load of sk_pacing_rate from rdi (sk)" : "esi (truesize) not doubled");
	return -ENOEXEC;
}

/*
 * A read at sk_pacing_status's offset (a u32 in 6.x: mov, cmp, test or
 * movzx/movsx from memory), not through %rsp. Return: 1 + the
 * instruction's offset, to stop the walk there; its opcode and ModRM in
 * *ctx for the log.
 */
static int bbrx_tsq_reads_status(const struct insn *insn, size_t off, void *ctx)
{
	const u8 op = insn->opcode.bytes[0], reg = X86_MODRM_REG(insn->modrm.value);
	int base = bbrx_insn_mem_base(insn);
	bool read;

	if (!bbrx_insn_plain(insn) || base < 0 || base == BBRX_RSP ||
	    insn->displacement.value != offsetof(struct sock, sk_pacing_status))
		return 0;
	read = op == 0x8a || op == 0x8b ||			/* mov */
	       (op >= 0x38 && op <= 0x3b) ||			/* cmp */
	       op == 0x84 || op == 0x85 ||			/* test */
	       ((op == 0x80 || op == 0x81 || op == 0x83) && reg == 7) ||
	       ((op == 0xf6 || op == 0xf7) && reg == 0) ||
	       (op == 0x0f && (insn->opcode.bytes[1] & 0xf6) == 0xb6);
	if (!read)
		return 0;
	*(u32 *)ctx = op << 8 | insn->modrm.value;
	return 1 + off;
}

/*
 * Which clamp rule the kernel's function has: 6.1 and 6.12 read
 * sk_pacing_status to clamp unpaced sockets only; 7.x's function clamps
 * every socket and does not read it. Mode 1 must be the kernel's rule.
 */
static int bbrx_tsq_clamp_rule(unsigned long addr, char *reason, size_t len)
{
	u32 op = 0;
	int ret = bbrx_hook_walk(addr, bbrx_tsq_reads_status, &op, reason, len);

	if (ret < 0)
		return ret;
	bbrx_tsq_clamp_all = !ret;
	if (ret)
		pr_info("bbrx: tsq: this kernel caps unpaced sockets at tcp_limit_output_bytes (sk_pacing_status read at +%#x, opcode/ModRM %04x); the policies do the same\n",
			ret - 1, op);
	else
		pr_info("bbrx: tsq: this kernel caps all sockets at tcp_limit_output_bytes (sk_pacing_status not read); the policies do the same\n");
	return 0;
}

/**
 * bbrx_tsq_verify() - check the isra clone's calling convention
 * @addr: address of tcp_small_queue_check.isra.0
 * @reason: why not, on failure
 * @len: size of @reason
 *
 * GCC's clone takes (sk, skb->truesize, factor). Its prologue shows it:
 * sk_pacing_rate is loaded (at this build's offset) through a register that
 * still holds rdi, the socket, and a register that still holds esi is
 * doubled as 2 * truesize. The prologue is followed instruction by
 * instruction with the kernel's insn_decode(), through frame setup
 * (push, sub $imm,%rsp) and register moves, because builds schedule and
 * allocate differently:
 *   6.1 cloud  mov %rdi,%rax; mov rate(%rdi),%rdi; add %esi,%esi
 *   6.1 with lockdep and KASAN (make check-debug)
 *              movzbl shift(%rdi),%ecx; mov rate(%rdi),%rax; push %r12;
 *              mov %edx,%r12d; lea (%rsi,%rsi,1),%edx
 *   7.3 (gcc-14) push %r12; lea (%rsi,%rsi,1),%r12d; push %rbp; ...;
 *              mov %rdi,%rbx; sub $0x10,%rsp; ...; mov rate(%rdi),%rax
 *   7.2 (gcc-16) sub $0x20,%rsp first
 * Any instruction outside those forms (a branch, a store, a call) before
 * both are seen refuses the hook, naming it. The whole function is then
 * decoded for its clamp rule (bbrx_tsq_clamp_rule()).
 * Redirecting a local function relies on -flive-patching=inline-clone
 * (CONFIG_LIVEPATCH), under which callers assume nothing beyond the ABI.
 *
 * Return: 0 if the hook may be installed; -ENOEXEC (-EFAULT if the text is
 * unreadable, -ENOENT without insn_decode()) otherwise, with @reason.
 */
int bbrx_tsq_verify(unsigned long addr, char *reason, size_t len)
{
	u32 off = offsetof(struct sock, sk_pacing_rate);
	size_t start = 5 + bbrx_endbr_len(addr);
	u8 text[BBRX_TSQ_TEXT];
	int err;

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
	err = bbrx_tsq_prologue(text, sizeof(text), start, off, reason, len);
	return err ?: bbrx_tsq_clamp_rule(addr, reason, len);
}
