// SPDX-License-Identifier: GPL-2.0
/*
 * The x86-64 verifier of the delayed-ACK hook (delack.c): the one
 * instruction that marks ICSK_ACK_PUSHED for a PSH segment of at least
 * rcv_mss, and the test that is its only way in.
 */
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <net/inet_connection_sock.h>
#include <net/tcp.h>
#include <asm/insn.h>

#include "bbrx.h"
#include "compat.h"
#include "hook.h"
#include "verify.h"

/* Candidate "test the flags, branch" pairs kept while walking. */
#define BBRX_DELACK_TESTS	8

/* What the walk of the target function found. */
struct bbrx_delack_scan {
	u32 pend, flags;	/* icsk_ack.pending, tcp_skb_cb tcp_flags */
	long orb;		/* the PUSHED mark: offset, -1, or -2 twice */
	int orb_len, orb_reg;
	long test;		/* the instruction before this one, if a test */
	int test_reg, test_bit;
	int ntests;
	struct {
		long t, j, target;	/* test, branch, branch target */
		int len, reg, bit;	/* branch length, test's register and bit */
		bool jne;
	} tests[BBRX_DELACK_TESTS];
};

/* "orb $ICSK_ACK_PUSHED, pending(%reg)": the PUSHED mark, any base register. */
static bool bbrx_delack_is_orb(const struct bbrx_delack_scan *sc,
			       const struct insn *insn)
{
	return bbrx_insn_plain(insn) &&
	       insn->opcode.nbytes == 1 && insn->opcode.bytes[0] == 0x80 &&
	       X86_MODRM_REG(insn->modrm.value) == 1 &&
	       bbrx_insn_mem_base(insn) >= 0 &&
	       insn->displacement.value >= 0 &&
	       (u32)insn->displacement.value == sc->pend &&
	       (u8)insn->immediate.value == ICSK_ACK_PUSHED;
}

/* "testb $bit, tcp_flags(%reg)": a test of the skb's TCP flags. */
static bool bbrx_delack_is_test(const struct bbrx_delack_scan *sc,
				const struct insn *insn)
{
	return bbrx_insn_plain(insn) &&
	       insn->opcode.nbytes == 1 && insn->opcode.bytes[0] == 0xf6 &&
	       X86_MODRM_REG(insn->modrm.value) == 0 &&
	       bbrx_insn_mem_base(insn) >= 0 &&
	       insn->displacement.value >= 0 &&
	       (u32)insn->displacement.value == sc->flags;
}

static int bbrx_delack_step(const struct insn *insn, size_t off, void *ctx)
{
	struct bbrx_delack_scan *sc = ctx;
	const u8 op = insn->opcode.bytes[0];
	long test = sc->test;
	bool jne, je;

	sc->test = -1;
	if (bbrx_delack_is_orb(sc, insn)) {
		sc->orb = sc->orb == -1 ? (long)off : -2;
		sc->orb_len = insn->length;
		sc->orb_reg = bbrx_insn_mem_base(insn);
		return 0;
	}
	if (bbrx_delack_is_test(sc, insn)) {
		sc->test = off;
		sc->test_reg = bbrx_insn_mem_base(insn);
		sc->test_bit = (u8)insn->immediate.value;
		return 0;
	}
	if (test < 0)
		return 0;
	jne = op == 0x75 || (op == 0x0f && insn->opcode.bytes[1] == 0x85);
	je = op == 0x74 || (op == 0x0f && insn->opcode.bytes[1] == 0x84);
	if (!jne && !je)
		return 0;
	if (sc->ntests == BBRX_DELACK_TESTS)
		return -E2BIG;
	sc->tests[sc->ntests].t = test;
	sc->tests[sc->ntests].j = off;
	sc->tests[sc->ntests].len = insn->length;
	sc->tests[sc->ntests].target = off + insn->length + insn->immediate.value;
	sc->tests[sc->ntests].reg = sc->test_reg;
	sc->tests[sc->ntests].bit = sc->test_bit;
	sc->tests[sc->ntests].jne = jne;
	sc->ntests++;
	return 0;
}

/**
 * bbrx_delack_find() - find the PUSHED mark and the PSH branch before it
 * @text: the function's instructions
 * @size: bytes in @text
 * @pend: offset of icsk_ack.pending in the socket
 * @site: filled in on success
 * @reason: set to why not
 * @len: size of @reason
 *
 * The decoding half of bbrx_delack_verify(), on a buffer so that
 * bbrx_verify_selftest() can feed it known code: the one "orb
 * $ICSK_ACK_PUSHED, @pend(%reg)" and the one "testb $bit, <tcp_skb_cb
 * tcp_flags>(%reg)" directly followed by a branch that runs the orb only
 * when the bit is set, "jne <orb>" (6.1: the orb sits out of line) or "je
 * <past the orb>" with the orb right after it (6.12, 7.x); the bit must be
 * TCPHDR_PSH. Registers are the compiler's choice (the skb is in %r12 with
 * gcc-12 and gcc-14, in %r8 with gcc-16's 7.2).
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the decoder) with @reason.
 */
int bbrx_delack_find(const u8 *text, size_t size, u32 pend,
		     struct bbrx_delack_site *site, char *reason, size_t len)
{
	struct bbrx_delack_scan scan = {}, *sc = &scan;
	int i, n = 0, bit = 0, err;
	long o;

	BUILD_BUG_ON(ICSK_ACK_PUSHED != 4);
	sc->pend = pend;
	sc->flags = offsetof(struct sk_buff, cb) +
		    offsetof(struct tcp_skb_cb, tcp_flags);
	sc->orb = -1;
	sc->test = -1;
	err = bbrx_hook_walk_buf(text, size, bbrx_delack_step, sc, reason, len);
	if (err == -E2BIG)
		snprintf(reason, len, "more than %d tests of tcp_flags at %#x",
			 BBRX_DELACK_TESTS, sc->flags);
	if (err)
		return err == -ENOENT ? -ENOENT : -ENOEXEC;
	o = sc->orb;
	if (o < 0) {
		snprintf(reason, len, "PSH mark (orb $%#x,%#x(%%reg)) %s",
			 ICSK_ACK_PUSHED, pend,
			 o == -2 ? "ambiguous" : "not found");
		return -ENOEXEC;
	}
	for (i = 0; i < sc->ntests; i++) {
		bool runs = sc->tests[i].jne ? sc->tests[i].target == o :
			    sc->tests[i].j + sc->tests[i].len == o &&
			    sc->tests[i].target >= o + sc->orb_len;

		if (!runs)
			continue;
		n++;
		site->test = sc->tests[i].t;
		site->branch = sc->tests[i].j;
		site->test_reg = sc->tests[i].reg;
		bit = sc->tests[i].bit;
	}
	if (n == 1 && bit != TCPHDR_PSH) {
		snprintf(reason, len,
			 "the branch at +%#lx to the PUSHED mark at +%#lx tests bit %#x of tcp_flags, not PSH (%#x)",
			 site->branch, o, bit, (unsigned int)TCPHDR_PSH);
		return -ENOEXEC;
	}
	if (n != 1) {
		snprintf(reason, len,
			 "%s \"testb $PSH,%#x(%%reg)\" + branch running the PSH mark at +%#lx",
			 n ? "more than one" : "no", sc->flags, o);
		return -ENOEXEC;
	}
	site->orb = o;
	site->orb_len = sc->orb_len;
	site->orb_reg = sc->orb_reg;
	return 0;
}

/**
 * bbrx_delack_verify() - check the target has the PSH branch
 * @addr: address of tcp_measure_rcv_mss (6.12, 7.x) or, where that is
 *	inlined, tcp_event_data_recv (6.1)
 * @reason: set to why the shape does not match
 * @len: size of @reason
 *
 * Decodes the whole function with the kernel's insn_decode() for the PUSHED
 * mark and its PSH branch (bbrx_delack_find(); icsk_ack.pending's offset
 * from the headers this module was built with), checks that branch is the
 * mark's only way in (bbrx_hook_sole_entry()), sets the kprobe's offset
 * to the mark and remembers the register holding the socket (the mark's
 * base register) for the handler.
 *
 * Return: 0, or -ENOEXEC (-ENOENT without the kernel's decoder or the
 * function's size) with @reason when any of these is missing or ambiguous.
 */
int bbrx_delack_verify(unsigned long addr, char *reason, size_t len)
{
	size_t size = bbrx_hook_func_size(addr);
	struct bbrx_delack_site site;
	u32 pend;
	int err;

	pend = offsetof(struct inet_connection_sock, icsk_ack) +
	       offsetof(typeof_member(struct inet_connection_sock, icsk_ack),
			pending);
	/* fault_verify: an offset no build marks, as if the struct differed */
	if (bbrx_hook_fault(BBRX_HOOK_DELACK))
		pend = U32_MAX;
	if (!size) {
		snprintf(reason, len, "the function size not found");
		return -ENOENT;
	}
	err = bbrx_delack_find((const u8 *)addr, size, pend, &site, reason, len);
	if (err)
		return err;
	/*
	 * The sub-MSS heuristic also sets PUSHED: a build that merged its
	 * path into this instruction would make policy 2 suppress it too.
	 */
	err = bbrx_hook_sole_entry(addr, site.orb, site.branch, reason, len);
	if (err)
		return err;
	bbrx_delack_reg = site.orb_reg;
	bbrx_delack_len = site.orb_len;
	bbrx_hook_delack.kp->offset = site.orb;
	pr_info("bbrx: delack: this kernel marks PUSHED for PSH >= rcv_mss (4720852ed9af), only after the PSH test of %%%s at +%#lx; policy 1 relies on it, policy 2 skips +%#lx (sk in %%%s)\n",
		bbrx_insn_reg_name(site.test_reg), site.test, site.orb,
		bbrx_insn_reg_name(site.orb_reg));
	return 0;
}
